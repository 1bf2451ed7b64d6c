#include "engine/archive/repro_cpp.h"

#include <sstream>

#include "core/text_lines.h"

namespace minrepro {

namespace {

std::string lossExpression(const HarnessTrial& h) {
  const std::string ignore = std::to_string(h.ignore_index);
  if (!h.target.empty() && h.loss == "cross_entropy")
    return "at::cross_entropy_loss(output, target, {}, at::Reduction::Mean, " + ignore + ", 0.0)";
  if (!h.target.empty() && h.loss == "nll")
    return "at::nll_loss(output, target, {}, at::Reduction::Mean, " + ignore + ")";
  return "output.sum()";
}

// The harness's transform steps (harness/transforms.cc), same seeds, same kernels.
std::string transformLines(const std::vector<TransformSpec>& transforms) {
  std::ostringstream cpp;
  for (const TransformSpec& t : transforms) {
    const std::string key = "std::string(" + text::quoted(t.tensor) + ")";
    const std::string x = "batch.at(" + key + ").toTensor()";
    auto p = [&](const char* k) { return t.params.at(k); };
    const std::string gen = "at::make_generator<at::CPUGeneratorImpl>(" + std::to_string(t.seed.value_or(0)) + "ULL)";
    std::string value;
    if (t.type == "normalize") value = "(" + x + " - " + p("mean") + ") / " + p("std");
    if (t.type == "noise")
      value = x + " + (at::randn(" + x + ".sizes(), " + gen + ", at::TensorOptions().dtype(at::kFloat)) * " + p("std") +
              ").to(" + x + ".scalar_type())";
    if (t.type == "cast") value = x + ".to(dtypeNamed(" + text::quoted(p("dtype")) + "))";
    if (t.type == "pad") value = "padTo(" + x + ", " + p("axis") + ", " + p("length") + ", " + p("value") + ")";
    if (t.type == "crop") value = "randomCrop(" + x + ", " + p("axis") + ", " + p("length") + ", " + gen + ")";
    cpp << "    batch.insert_or_assign(" << key << ", " << value << ");  // transform " << t.name << "\n";
  }
  return cpp.str();
}

const char* kTransformHelpers = R"(
static at::Tensor padTo(const at::Tensor& x, int64_t axis, int64_t length, double value) {
  if (axis < 0) axis += x.dim();
  if (x.size(axis) >= length) return x.narrow(axis, 0, length);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[axis] = length - x.size(axis);
  return at::cat({x, at::full(sizes, value, x.options())}, axis);
}

static at::Tensor randomCrop(const at::Tensor& x, int64_t axis, int64_t length, at::Generator gen) {
  if (axis < 0) axis += x.dim();
  if (x.size(axis) <= length) return x;
  const int64_t start = at::randint(x.size(axis) - length + 1, {1}, gen).item<int64_t>();
  return x.narrow(axis, start, length);
}

static at::ScalarType dtypeNamed(const std::string& name) {
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float32") return at::kFloat;
  if (name == "float64") return at::kDouble;
  if (name == "int8") return at::kChar;
  if (name == "uint8") return at::kByte;
  if (name == "int16") return at::kShort;
  if (name == "int32") return at::kInt;
  if (name == "bool") return at::kBool;
  return at::kLong;
}
)";

std::string reproCpp(const HarnessTrial& h, const FailureSignature& signature) {
  const bool with_target = !h.target.empty() && h.loss != "none";
  std::ostringstream cpp;
  cpp << "// Reproduces: " << signature.summary() << "\n"
      << "// Made by minrepro; needs only LibTorch (add -DCMAKE_PREFIX_PATH=/path/to/libtorch if CMake\n"
      << "// does not find it):\n"
      << "//   cmake -S . -B build && cmake --build build && ./build/repro [BATCH]\n"
      << "// BATCH defaults to batch.pt beside this file; the neighbour cases are neighbours/*.pt.\n"
      << (h.transforms.empty() ? "" : "#include <ATen/CPUGeneratorImpl.h>\n") << "#include <c10/util/Type.h>\n"
      << "#include <torch/csrc/jit/serialization/pickle.h>\n"
      << "#include <torch/script.h>\n\n"
      << "#include <cstdlib>\n#include <fstream>\n#include <iostream>\n#include <iterator>\n#include <string>\n"
      << "#include <typeinfo>\n#include <vector>\n\n"
      << "#ifndef REPRO_DIR\n#define REPRO_DIR \".\"\n#endif\n\n"
      << "static std::vector<char> readAll(const std::string& path) {\n"
      << "  std::ifstream in(path, std::ios::binary);\n"
      << "  if (!in) {\n"
      << "    std::cerr << \"cannot read \" << path << \"\\n\";\n"
      << "    std::exit(2);\n"
      << "  }\n"
      << "  return std::vector<char>(std::istreambuf_iterator<char>(in), {});\n"
      << "}\n"
      << (h.transforms.empty() ? "" : kTransformHelpers) << "\n"
      << "int main(int argc, char** argv) {\n"
      << "  const std::string dir = REPRO_DIR;\n"
      << "  const std::string batch_path = argc > 1 ? argv[1] : dir + \"/batch.pt\";\n"
      << "  try {\n"
      << "    c10::impl::GenericDict batch = torch::jit::pickle_load(readAll(batch_path)).toGenericDict();\n"
      << transformLines(h.transforms) << "    for (const auto& entry : batch) {\n"
      << "      const at::Tensor t = entry.value().toTensor();\n"
      << "      std::cerr << entry.key().toStringRef() << \": \" << t.scalar_type() << \" shape \" << t.sizes()\n"
      << "                << \" strides \" << t.strides() << \"\\n\";\n"
      << "    }\n"
      << "    torch::jit::Module model = torch::jit::load(dir + \"/model.pt\");\n"
      << "    model.eval();\n"
      << "    torch::NoGradGuard no_grad;\n"
      << "    const at::Tensor output = model.forward({batch.at(std::string(" << text::quoted(h.input)
      << ")).toTensor()}).toTensor();\n";
  if (with_target)
    cpp << "    const at::Tensor target = batch.at(std::string(" << text::quoted(h.target) << ")).toTensor();\n";
  cpp << "    const at::Tensor loss = " << lossExpression(h) << ";\n";
  if (with_target)
    cpp << "    const long processed = (target != " << h.ignore_index << ").sum().item<long>();\n"
        << "    std::cout << \"minrepro-result: processed=\" << processed << \" loss=\" << loss.item<double>() << "
           "\"\\n\";\n";
  else
    cpp << "    std::cout << \"minrepro-result: loss=\" << loss.item<double>() << \"\\n\";\n";
  cpp << "    return 0;\n"
      << "  } catch (const c10::Error& e) {\n"
      << "    // The c10 error class (c10::IndexError, ...) and its message, as Python shows them.\n"
      << "    std::cerr << c10::demangle(typeid(e).name()) << \": \" << e.what_without_backtrace() << \"\\n\";\n"
      << "    // Then end as the trial did: an uncaught c10 error terminates the program (SIGABRT).\n"
      << "    std::abort();\n"
      << "  }\n"
      << "}\n";
  return cpp.str();
}

const char* kCMakeLists = R"(# Made by minrepro: builds repro.cpp against LibTorch.
#   cmake -S . -B build [-DCMAKE_PREFIX_PATH=/path/to/libtorch] && cmake --build build && ./build/repro
cmake_minimum_required(VERSION 3.18)
project(minrepro_repro LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
find_package(Torch REQUIRED)
add_executable(repro repro.cpp)
target_link_libraries(repro PRIVATE ${TORCH_LIBRARIES})
# batch.pt and model.pt are found beside this file, wherever repro is run from.
target_compile_definitions(repro PRIVATE REPRO_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
)";

}  // namespace

std::vector<ArchiveEntry> reproCppEntries(const HarnessTrial& harness, const FailureSignature& signature) {
  return {{"repro.cpp", reproCpp(harness, signature)}, {"CMakeLists.txt", kCMakeLists}};
}

}  // namespace minrepro
