// Reading, checking and subsetting failing batches (LibTorch inside).
#include "harness/batch_store.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

#include "harness/batch_io.h"

namespace fs = std::filesystem;

namespace minrepro {

const at::Tensor* NamedTensors::find(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return &tensors[i];
  return nullptr;
}

std::string dtypeName(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kLong: return "int64";
    case c10::kInt: return "int32";
    case c10::kShort: return "int16";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kBool: return "bool";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    default: return c10::toString(type);
  }
}

std::string layoutName(const at::Tensor& t) {
  if (t.dim() <= 1 || t.is_contiguous()) return "contiguous";
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) return "channels_last";
  std::vector<int64_t> reversed(static_cast<std::size_t>(t.dim()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  if (t.permute(reversed).is_contiguous()) return "transposed";
  return "strided";
}

namespace {

std::vector<char> readBytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw CaseError(file.string() + ": cannot read the batch file (does it exist, is it readable?)");
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// LibTorch 1.13's unpickler cannot read a dict with exactly one entry, which
// Python writes with a different opcode; say so instead of "Unknown opcode".
std::string explainUnpickleError(const std::string& what) {
  if (what.find("Unknown opcode") != std::string::npos)
    return " (LibTorch 1.13 cannot read a dict with exactly one entry, nor numpy arrays, "
           "torch.Size or nn.Parameter values: save a dict of two or more plain tensors)";
  return " (save it with torch.save(dict_of_tensors, path))";
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

NamedTensors readBatchFile(const fs::path& file) {
  const std::vector<char> bytes = readBytes(file);
  c10::IValue value;
  try {
    value = torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    const std::string what = firstLine(e.what());
    throw CaseError(file.string() + ": not a readable torch.save file: " + what + explainUnpickleError(what));
  }
  if (!value.isGenericDict())
    throw CaseError(file.string() + ": expected a dict of named tensors, found " + value.tagKind());
  NamedTensors batch;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString())
      throw CaseError(file.string() + ": batch dict keys must be strings, found " + entry.key().tagKind());
    const std::string name = entry.key().toStringRef();
    if (!entry.value().isTensor())
      throw CaseError(file.string() + ": entry '" + name + "' is a " + entry.value().tagKind() +
                      ", expected a tensor (store ids and lengths as tensors too)");
    batch.names.push_back(name);
    batch.tensors.push_back(entry.value().toTensor());
  }
  return batch;
}

at::Tensor copyWithStrideOrder(const at::Tensor& values, const at::Tensor& layout_of) {
  if (values.dim() == 0) return values.clone();
  // Order dimensions from the largest stride to the smallest (ties keep
  // their order), allocate contiguously in that order and permute back.
  std::vector<int64_t> order(static_cast<std::size_t>(layout_of.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return layout_of.stride(a) > layout_of.stride(b); });
  std::vector<int64_t> sizes, inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    sizes.push_back(values.size(order[i]));
    inverse[static_cast<std::size_t>(order[i])] = static_cast<int64_t>(i);
  }
  at::Tensor out = at::empty(sizes, values.options()).permute(inverse);
  out.copy_(values);
  return out;
}

at::Tensor cloneKeepingLayout(const at::Tensor& t) { return copyWithStrideOrder(t, t); }

void writeBatchFile(const NamedTensors& batch, const fs::path& file) {
  c10::Dict<std::string, at::Tensor> dict;
  for (std::size_t i = 0; i < batch.names.size(); ++i) dict.insert(batch.names[i], batch.tensors[i]);
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  const fs::path tmp = file.string() + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, file);
}

namespace {

class TorchBatchStore : public BatchStore {
 public:
  TorchBatchStore(const CaseConfig& config, NamedTensors batch) : config_(config), batch_(std::move(batch)) {
    checkSampleAxes();
  }

  std::int64_t sampleCount() const override { return samples_; }

  std::vector<TensorInfo> describe() const override {
    std::vector<TensorInfo> infos;
    for (std::size_t i = 0; i < batch_.names.size(); ++i) {
      const at::Tensor& t = batch_.tensors[i];
      TensorInfo info{batch_.names[i], dtypeName(t.scalar_type()), t.sizes().vec(), t.strides().vec(), layoutName(t)};
      if (auto axis = sampleAxisOf(batch_.names[i])) {
        info.has_sample_axis = true;
        info.sample_axis = *axis;
      }
      infos.push_back(std::move(info));
    }
    return infos;
  }

  std::vector<std::int64_t> sampleIds() const override {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(samples_));
    std::iota(ids.begin(), ids.end(), 0);
    if (config_.sample_ids.empty()) return ids;
    const at::Tensor t = batch_.find(config_.sample_ids)->to(at::kLong).contiguous();
    return std::vector<std::int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
  }

  std::vector<std::int64_t> integerValues(const std::string& name, std::size_t max_values) const override {
    const at::Tensor* t = batch_.find(name);
    if (!t || at::isFloatingType(t->scalar_type()) || at::isComplexType(t->scalar_type())) return {};
    const at::Tensor flat = t->flatten().slice(0, 0, static_cast<int64_t>(max_values)).to(at::kLong).contiguous();
    return std::vector<std::int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  }

  void writeSubset(const std::vector<std::int64_t>& keep, const fs::path& out) const override {
    const at::Tensor index = at::tensor(keep, at::kLong);
    NamedTensors subset;
    for (std::size_t i = 0; i < batch_.names.size(); ++i) {
      const at::Tensor& t = batch_.tensors[i];
      auto axis = sampleAxisOf(batch_.names[i]);
      // index_select returns a fresh contiguous tensor: restore the layout.
      at::Tensor piece = axis ? copyWithStrideOrder(t.index_select(*axis, index), t) : cloneKeepingLayout(t);
      subset.names.push_back(batch_.names[i]);
      subset.tensors.push_back(piece);
    }
    writeBatchFile(subset, out);
  }

 private:
  std::optional<int> sampleAxisOf(const std::string& name) const {
    for (std::size_t i = 0; i < config_.sample_axes.size(); ++i)
      if (config_.sample_axes[i].tensor == name) return normalized_axes_[i];
    if (!config_.sample_ids.empty() && name == config_.sample_ids) return 0;
    return std::nullopt;
  }

  void checkSampleAxes();

  const CaseConfig& config_;
  NamedTensors batch_;
  std::vector<int> normalized_axes_;
  std::int64_t samples_ = 0;
};

void TorchBatchStore::checkSampleAxes() {
  const std::string file = config_.batch.string();
  std::string first;
  for (const SampleAxis& spec : config_.sample_axes) {
    const at::Tensor* t = batch_.find(spec.tensor);
    if (!t) {
      std::ostringstream names;
      for (const auto& n : batch_.names) names << (names.tellp() ? ", " : "") << n;
      throw CaseError(config_.case_file.string() + ": samples.tensors names '" + spec.tensor + "', but " + file +
                      " has no such tensor (it has: " + names.str() + ")");
    }
    const int64_t dim = t->dim();
    if (spec.axis >= dim || spec.axis < -dim || dim == 0)
      throw CaseError(config_.case_file.string() + ": samples.tensors." + spec.tensor + ": axis " +
                      std::to_string(spec.axis) + " is out of range for a tensor with " + std::to_string(dim) +
                      " dimension(s) (shape " + c10::str(t->sizes()) + ")");
    const int axis = static_cast<int>(spec.axis < 0 ? spec.axis + dim : spec.axis);
    normalized_axes_.push_back(axis);
    const int64_t n = t->size(axis);
    if (first.empty()) {
      first = spec.tensor;
      samples_ = n;
    } else if (n != samples_) {
      throw CaseError(file + ": sample dimensions disagree: '" + first + "' has " + std::to_string(samples_) +
                      " samples but '" + spec.tensor + "' has " + std::to_string(n) + " on axis " +
                      std::to_string(axis) + " (check samples.tensors in " + config_.case_file.string() + ")");
    }
  }
  if (!config_.sample_ids.empty()) {
    const at::Tensor* ids = batch_.find(config_.sample_ids);
    if (!ids || ids->dim() != 1 || ids->size(0) != samples_ || at::isFloatingType(ids->scalar_type()))
      throw CaseError(file + ": samples.ids names '" + config_.sample_ids + "', which must be a 1-D integer tensor with " +
                      std::to_string(samples_) + " entries" + (ids ? ", found shape " + c10::str(ids->sizes()) : ", found none"));
  }
  if (samples_ == 0) throw CaseError(file + ": the batch has no samples: nothing to reduce");
}

}  // namespace

std::unique_ptr<BatchStore> BatchStore::open(const CaseConfig& config) {
  return std::make_unique<TorchBatchStore>(config, readBatchFile(config.batch));
}

}  // namespace minrepro

#include <torch/csrc/api/include/torch/version.h>

namespace minrepro {

std::vector<std::pair<std::string, std::string>> libtorchEnvironment() {
  return {
      {"LibTorch", TORCH_VERSION},
      {"LibTorch CUDA build", at::hasCUDA() ? "yes" : "no"},
      {"LibTorch HIP build", at::hasHIP() ? "yes" : "no"},
      {"Compiler", std::string("g++ ") + __VERSION__},
  };
}

}  // namespace minrepro
