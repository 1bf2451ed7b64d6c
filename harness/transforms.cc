#include "harness/transforms.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <sstream>
#include <stdexcept>

namespace minrepro {

std::string transformArg(const TransformSpec& spec) {
  std::string arg = "type=" + spec.type + ";tensor=" + spec.tensor;
  for (const auto& [key, value] : spec.params) arg += ";" + key + "=" + value;
  if (spec.type == "noise" || spec.type == "crop") arg += ";seed=" + std::to_string(spec.seed.value_or(0));
  return arg;
}

TransformStep parseTransformArg(const std::string& arg) {
  TransformStep step;
  std::istringstream in(arg);
  for (std::string field; std::getline(in, field, ';');) {
    const auto eq = field.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("bad --transform field '" + field + "' in '" + arg + "'");
    step.params[field.substr(0, eq)] = field.substr(eq + 1);
  }
  step.type = step.params["type"];
  step.tensor = step.params["tensor"];
  if (step.type.empty() || step.tensor.empty())
    throw std::invalid_argument("--transform needs type= and tensor=: " + arg);
  return step;
}

namespace {

double param(const TransformStep& step, const std::string& key) {
  auto it = step.params.find(key);
  if (it == step.params.end()) throw std::invalid_argument(step.type + " transform needs " + key);
  return std::stod(it->second);
}

at::ScalarType parseDtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> types{
      {"float16", at::kHalf}, {"bfloat16", at::kBFloat16}, {"float32", at::kFloat}, {"float64", at::kDouble},
      {"int8", at::kChar},    {"uint8", at::kByte},        {"int16", at::kShort},   {"int32", at::kInt},
      {"int64", at::kLong},   {"bool", at::kBool}};
  auto it = types.find(name);
  if (it == types.end()) throw std::invalid_argument("unknown dtype '" + name + "' in a cast transform");
  return it->second;
}

at::Generator generator(const TransformStep& step) {
  return at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(param(step, "seed")));
}

int64_t axisOf(const TransformStep& step, const at::Tensor& x) {
  const auto axis = static_cast<int64_t>(param(step, "axis"));
  if (axis >= x.dim() || axis < -x.dim())
    throw std::invalid_argument(step.type + " transform: axis " + std::to_string(axis) + " out of range for " +
                                step.tensor);
  return axis < 0 ? axis + x.dim() : axis;
}

// Pads with `value` at the end or truncates, to exactly `length` positions.
at::Tensor padTo(const at::Tensor& x, int64_t axis, int64_t length, double value) {
  if (x.size(axis) >= length) return x.narrow(axis, 0, length);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[static_cast<std::size_t>(axis)] = length - x.size(axis);
  return at::cat({x, at::full(sizes, value, x.options())}, axis);
}

at::Tensor apply(const TransformStep& step, const at::Tensor& x) {
  if (step.type == "cast") return x.to(parseDtype(step.params.at("dtype")));
  if (step.type == "pad")
    return padTo(x, axisOf(step, x), static_cast<int64_t>(param(step, "length")), param(step, "value"));
  if (step.type == "crop") {
    const int64_t axis = axisOf(step, x), length = static_cast<int64_t>(param(step, "length"));
    if (x.size(axis) <= length) return x;
    const int64_t start = at::randint(x.size(axis) - length + 1, {1}, generator(step)).item<int64_t>();
    return x.narrow(axis, start, length);
  }
  if (!at::isFloatingType(x.scalar_type()))
    throw std::invalid_argument(step.type + " transform on " + step.tensor + ", which is not floating point");
  if (step.type == "normalize") return (x - param(step, "mean")) / param(step, "std");
  if (step.type == "noise")
    return x + (at::randn(x.sizes(), generator(step), at::TensorOptions().dtype(at::kFloat)) * param(step, "std"))
                   .to(x.scalar_type());
  throw std::invalid_argument("unknown transform type '" + step.type + "'");
}

}  // namespace

void applyTransform(NamedTensors& batch, const TransformStep& step) {
  for (std::size_t i = 0; i < batch.names.size(); ++i) {
    if (batch.names[i] != step.tensor) continue;
    batch.tensors[i] = apply(step, batch.tensors[i]);
    return;
  }
  throw std::invalid_argument(step.type + " transform: the batch has no tensor '" + step.tensor + "'");
}

}  // namespace minrepro
