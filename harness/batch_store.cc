// Reading, checking and subsetting failing batches (LibTorch inside).
#include "harness/batch_store.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <algorithm>
#include <fstream>
#include <limits>
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
  if (t.is_contiguous()) return "contiguous";
  if (t.dim() <= 1) return "strided";  // a 1-D view with a step (x[::3])
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) return "channels_last";
  std::vector<int64_t> reversed(static_cast<std::size_t>(t.dim()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  if (t.permute(reversed).is_contiguous()) return "transposed";
  return "strided";
}

namespace {

// LibTorch 1.13's unpickler cannot read a dict with exactly one entry, which
// Python writes with a different opcode; say so instead of "Unknown opcode".
std::string explainUnpickleError(const std::string& what) {
  if (what.find("Unknown opcode") != std::string::npos)
    return " (LibTorch 1.13 cannot read a dict with exactly one entry, nor numpy arrays, "
           "torch.Size or nn.Parameter values: save a dict of two or more plain tensors)";
  return " (save it with torch.save(dict_of_tensors, path))";
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Read record by record from the file (no copy of the whole file), with a
// storage context so that tensors saved as views of one storage come back
// as views of one storage, as torch.load gives them: pickle_load would give
// each its own copy, and a kernel that reads past a view would see other
// memory than in the user's process.
c10::IValue unpickleBatch(const fs::path& file) {
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  return torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader,
                                           torch::jit::Unpickler::defaultTypeParser,
                                           std::make_shared<torch::jit::DeserializationStorageContext>());
}

}  // namespace

NamedTensors readBatchFile(const fs::path& file) {
  if (!fs::is_regular_file(file))
    throw BadInputError(file.string() + ": cannot read the batch file (does it exist, is it readable?)");
  c10::IValue value;
  try {
    value = unpickleBatch(file);
  } catch (const std::exception& e) {
    const std::string what = firstLine(e.what());
    throw BadInputError(file.string() + ": not a readable torch.save file: " + what + explainUnpickleError(what));
  }
  if (!value.isGenericDict())
    throw BadInputError(file.string() + ": expected a dict of named tensors, found " + value.tagKind());
  NamedTensors batch;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString())
      throw BadInputError(file.string() + ": batch dict keys must be strings, found " + entry.key().tagKind());
    const std::string name = entry.key().toStringRef();
    if (!entry.value().isTensor())
      throw BadInputError(file.string() + ": entry '" + name + "' is a " + entry.value().tagKind() +
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

namespace {

// Whether `values` is the same along dimension `d`, so that a broadcast
// (stride 0) dimension of the original can stay one.
bool constantAlong(const at::Tensor& values, int64_t d) {
  if (values.size(d) <= 1) return true;
  const at::Tensor first = values.narrow(d, 0, 1).expand_as(values);
  at::Tensor same = values.eq(first);
  if (at::isFloatingType(values.scalar_type()) || at::isComplexType(values.scalar_type()))
    same.logical_or_(values.isnan().logical_and(first.isnan()));  // NaN is NaN's own value here
  return same.all().item<bool>();
}

}  // namespace

at::Tensor copyWithStridePattern(const at::Tensor& values, const at::Tensor& layout_of) {
  const int64_t dims = layout_of.dim();
  // Innermost first: dimensions by stride, smallest first (ties: later
  // dimension inner); a broadcast one outermost, should it need memory.
  std::vector<int64_t> order(static_cast<std::size_t>(dims));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int64_t d) {
    return layout_of.stride(d) == 0 ? std::numeric_limits<int64_t>::max() : layout_of.stride(d);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) < key(b) || (key(a) == key(b) && a > b); });
  std::vector<int64_t> strides(static_cast<std::size_t>(dims), 0);
  int64_t dense_original = 1, dense_new = 1;  // extent of the dimensions inside the current one
  for (int64_t d : order) {
    const int64_t stride = layout_of.stride(d);
    if (stride == 0 && layout_of.size(d) > 1 && constantAlong(values, d)) continue;  // stays broadcast
    // Size-1 dimensions have no gap of their own (their stride is arbitrary).
    const int64_t gap = layout_of.size(d) > 1 ? std::max<int64_t>(stride - dense_original, 0) : 0;
    strides[static_cast<std::size_t>(d)] = dense_new + gap;
    if (layout_of.size(d) > 1 && stride > 0) dense_original = stride * layout_of.size(d);
    dense_new = strides[static_cast<std::size_t>(d)] * std::max<int64_t>(values.size(d), 1);
  }
  const int64_t offset = layout_of.storage_offset();
  int64_t span = values.numel() > 0 ? 1 : 0;
  for (int64_t d = 0; d < dims; ++d) span += (values.size(d) - 1) * strides[static_cast<std::size_t>(d)] * (values.numel() > 0);
  // Zeros before the offset and in the gaps: what the original's storage
  // held there belonged to other tensors or samples, which the reduction
  // removed (and which may be data nobody should receive).
  at::Tensor storage = at::zeros({offset + span}, values.options());
  at::Tensor out = storage.as_strided(values.sizes(), strides, offset);
  // A broadcast dimension is written once (its elements are one location).
  at::Tensor target = out, source = values;
  for (int64_t d = 0; d < dims; ++d)
    if (strides[static_cast<std::size_t>(d)] == 0 && values.size(d) > 1) {
      target = target.narrow(d, 0, 1);
      source = source.narrow(d, 0, 1);
    }
  target.copy_(source);
  return out;
}

// torch.save's zip format, written record by record to the file (no copy
// of the whole archive in memory). The dict is pickled untagged: LibTorch's
// pickle_save tags typed containers with torch.jit._pickle.restore_type_tag,
// which torch.load(..., weights_only=True) refuses. Tensors on one storage
// are written once, as views of it.
void writeBatchFile(const NamedTensors& batch, const fs::path& file) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (std::size_t i = 0; i < batch.names.size(); ++i) dict.insert(batch.names[i], batch.tensors[i]);
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  const fs::path tmp = file.string() + ".partial";
  try {
    caffe2::serialize::PyTorchStreamWriter writer(tmp.string());
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot write " + tmp.string() + ": " + e.what_without_backtrace());
  }
  fs::rename(tmp, file);
}

namespace {

// One tensor of a candidate on its way to the trial: its values, and where
// they came from (flat indices in the original) when the values pass needs it.
struct CandidateTensor {
  at::Tensor values;
  at::Tensor origin;   // int64 flat index in the original tensor; undefined when not tracked
  at::Tensor padding;  // bool, true where a per-sample length cut put padding; undefined if none
};

class TorchBatchStore : public BatchStore {
 public:
  TorchBatchStore(const CaseConfig& config, NamedTensors batch) : config_(config), batch_(std::move(batch)) {
    checkSampleAxes();
    checkSequence();
    if (!config_.sequence.lengths.empty()) sample_lengths_ = toVector(*batch_.find(config_.sequence.lengths));
    for (const at::Tensor& t : batch_.tensors) trivial_.push_back(defaultTrivial(t));
    for (std::size_t i = 0; i < batch_.names.size(); ++i)
      if (auto it = config_.values.trivial.find(batch_.names[i]); it != config_.values.trivial.end())
        trivial_[i] = it->second;
  }

  std::int64_t sampleCount() const override { return samples_; }

  std::vector<TensorInfo> describe() const override { return describeTensors(batch_); }

  std::vector<std::int64_t> sampleIds() const override {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(samples_));
    std::iota(ids.begin(), ids.end(), 0);
    if (config_.sample_ids.empty()) return ids;
    return toVector(*batch_.find(config_.sample_ids));
  }

  std::vector<std::int64_t> integerValues(const std::string& name, std::size_t max_values) const override {
    const at::Tensor* t = batch_.find(name);
    if (!t || at::isFloatingType(t->scalar_type()) || at::isComplexType(t->scalar_type())) return {};
    return toVector(t->flatten().slice(0, 0, static_cast<int64_t>(max_values)));
  }

  void writeSubset(const std::vector<std::int64_t>& keep, const fs::path& out) const override {
    const at::Tensor index = at::tensor(keep, at::kLong);
    NamedTensors subset;
    for (std::size_t i = 0; i < batch_.names.size(); ++i) {
      const at::Tensor& t = batch_.tensors[i];
      auto axis = sampleAxisOf(batch_.names[i]);
      const bool all = static_cast<std::int64_t>(keep.size()) == samples_;
      subset.names.push_back(batch_.names[i]);
      subset.tensors.push_back(axis && !all ? copyWithStridePattern(t.index_select(*axis, index), t) : t);
    }
    writeBatchFile(subset, out);
  }

  void writeCandidate(const Selection& selection, const fs::path& out) const override {
    writeBatchFile(materialize(selection), out);
  }

  std::vector<TensorInfo> describeCandidate(const Selection& selection) const override {
    return describeTensors(materialize(selection));
  }

  // ---- CaseView

  std::int64_t sequenceLength() const override { return sequence_length_; }
  std::vector<std::int64_t> sampleLengths() const override { return sample_lengths_; }
  std::int64_t minLength() const override { return config_.sequence.min_length; }
  std::vector<std::string> optionalBranches() const override {
    std::vector<std::string> names;
    if (config_.harness)
      for (const auto& t : config_.harness->transforms)
        if (t.optional) names.push_back(t.name);
    if (config_.command)
      for (const auto& s : config_.command->switches) names.push_back(s.name);
    return names;
  }
  std::vector<ValueUnit> nonTrivialValues(const Selection& selection) const override;

 private:
  static std::vector<std::int64_t> toVector(const at::Tensor& t) {
    const at::Tensor flat = t.flatten().to(at::kLong).contiguous();
    return std::vector<std::int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  }

  std::vector<TensorInfo> describeTensors(const NamedTensors& batch) const {
    std::vector<TensorInfo> infos;
    for (std::size_t i = 0; i < batch.names.size(); ++i) {
      const at::Tensor& t = batch.tensors[i];
      TensorInfo info{batch.names[i], dtypeName(t.scalar_type()), t.sizes().vec(), t.strides().vec(), layoutName(t),
                      false, 0, 0, {}};
      if (auto axis = sampleAxisOf(batch.names[i])) {
        info.has_sample_axis = true;
        info.sample_axis = *axis;
      }
      info.storage_offset = t.storage_offset();
      for (std::size_t j = 0; j < batch.names.size(); ++j)
        if (j != i && batch.tensors[j].storage().is_alias_of(t.storage())) info.shares_storage_with.push_back(batch.names[j]);
      infos.push_back(std::move(info));
    }
    return infos;
  }

  // Floats 0, masks true, integers 0 or, when 0 is outside the values the
  // original holds (1-based ids), the nearest value it holds.
  static double defaultTrivial(const at::Tensor& t) {
    if (t.scalar_type() == at::kBool) return 1;
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()) || t.numel() == 0) return 0;
    const auto lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    return static_cast<double>(std::clamp<int64_t>(0, lo, hi));
  }

  std::optional<int> sampleAxisOf(const std::string& name) const {
    for (std::size_t i = 0; i < config_.sample_axes.size(); ++i)
      if (config_.sample_axes[i].tensor == name) return normalized_axes_[i];
    if (!config_.sample_ids.empty() && name == config_.sample_ids) return 0;
    if (!config_.sequence.lengths.empty() && name == config_.sequence.lengths) return 0;
    return std::nullopt;
  }

  std::optional<SequenceTensor> sequenceOf(std::size_t tensor) const {
    for (std::size_t i = 0; i < config_.sequence.tensors.size(); ++i)
      if (config_.sequence.tensors[i].tensor == batch_.names[tensor]) {
        SequenceTensor s = config_.sequence.tensors[i];
        s.axis = sequence_axes_[i];
        return s;
      }
    return std::nullopt;
  }

  bool valueReducible(const std::string& name) const {
    const auto& ex = config_.values.exclude;
    return name != config_.sample_ids && name != config_.sequence.lengths &&
           std::find(ex.begin(), ex.end(), name) == ex.end();
  }

  CandidateTensor cut(std::size_t tensor, const Selection& selection, bool track) const;
  void applyLengths(std::size_t tensor, const Selection& selection, CandidateTensor& c) const;
  at::Tensor lengthsFor(const Selection& selection) const;
  NamedTensors materialize(const Selection& selection) const;
  bool unchanged(std::size_t tensor, const Selection& selection) const;

  void checkSampleAxes();
  void checkSequence();
  template <typename Require>
  void checkTransforms(const Require& require) const;

  const CaseConfig& config_;
  NamedTensors batch_;
  std::vector<int> normalized_axes_;
  std::vector<int> sequence_axes_;
  std::vector<double> trivial_;  // per tensor
  std::vector<std::int64_t> sample_lengths_;  // of the original samples; empty without sequence.lengths
  std::int64_t samples_ = 0;
  std::int64_t sequence_length_ = 0;
};

// Samples, window and values of one tensor (before per-sample lengths).
CandidateTensor TorchBatchStore::cut(std::size_t i, const Selection& selection, bool track) const {
  const at::Tensor& t = batch_.tensors[i];
  const bool values = selection.values_kept.count(batch_.names[i]) > 0;
  CandidateTensor c{t, track || values ? at::arange(t.numel(), at::kLong).view(t.sizes()) : at::Tensor(), {}};
  if (auto axis = sampleAxisOf(batch_.names[i])) {
    const at::Tensor index = at::tensor(selection.samples, at::kLong);
    c.values = c.values.index_select(*axis, index);
    if (c.origin.defined()) c.origin = c.origin.index_select(*axis, index);
  }
  if (auto seq = sequenceOf(i); seq && selection.seq_end > 0) {
    c.values = c.values.narrow(seq->axis, selection.seq_begin, selection.seq_end - selection.seq_begin);
    if (c.origin.defined()) c.origin = c.origin.narrow(seq->axis, selection.seq_begin, selection.seq_end - selection.seq_begin);
  }
  c.values = c.values.clone(at::MemoryFormat::Contiguous);
  if (values) {
    const auto& list = selection.values_kept.at(batch_.names[i]);
    const at::Tensor keep = at::isin(c.origin, at::tensor(list, at::kLong));
    c.values.masked_fill_(keep.logical_not(), trivial_[i]);
  }
  if (batch_.names[i] == config_.sequence.lengths && sequence_length_ > 0) c.values = lengthsFor(selection).to(t.scalar_type());
  return c;
}

// Each kept sample's length inside the window.
at::Tensor TorchBatchStore::lengthsFor(const Selection& selection) const {
  const std::vector<std::int64_t>& original = sample_lengths_;
  std::vector<std::int64_t> out;
  for (std::int64_t s : selection.samples) {
    std::int64_t length = original[static_cast<std::size_t>(s)];
    if (auto it = selection.lengths.find(s); it != selection.lengths.end()) length = std::min(length, it->second);
    out.push_back(std::clamp<std::int64_t>(length - selection.seq_begin, 0, selection.seq_end - selection.seq_begin));
  }
  return at::tensor(out, at::kLong);
}

// Positions past a sample's length are padding: the values pass never
// touches them, and those cut by a shortened length take the padding value.
void TorchBatchStore::applyLengths(std::size_t i, const Selection& selection, CandidateTensor& c) const {
  const auto seq = sequenceOf(i);
  const auto axis = sampleAxisOf(batch_.names[i]);
  if (!seq || !axis || config_.sequence.lengths.empty()) return;
  const std::vector<std::int64_t> lengths = toVector(lengthsFor(selection));
  const int64_t window = selection.seq_end - selection.seq_begin;
  c.padding = at::zeros(c.values.sizes(), at::kBool);
  for (std::size_t j = 0; j < selection.samples.size(); ++j) {
    const int64_t keep = lengths[j];
    c.padding.narrow(*axis, static_cast<int64_t>(j), 1).narrow(seq->axis, keep, window - keep).fill_(true);
    if (selection.lengths.count(selection.samples[j]))
      c.values.narrow(*axis, static_cast<int64_t>(j), 1).narrow(seq->axis, keep, window - keep).fill_(seq->pad);
  }
}

// Whether the selection leaves tensor i as the original has it (then it is
// passed on as it is, storage and all).
bool TorchBatchStore::unchanged(std::size_t i, const Selection& selection) const {
  const std::string& name = batch_.names[i];
  if (sampleAxisOf(name) && static_cast<std::int64_t>(selection.samples.size()) != samples_) return false;
  const bool window = selection.seq_end > 0 && (selection.seq_begin != 0 || selection.seq_end != sequence_length_);
  if ((sequenceOf(i) || name == config_.sequence.lengths) && (window || !selection.lengths.empty())) return false;
  return selection.values_kept.count(name) == 0;
}

NamedTensors TorchBatchStore::materialize(const Selection& selection) const {
  NamedTensors out;
  for (std::size_t i = 0; i < batch_.names.size(); ++i) {
    out.names.push_back(batch_.names[i]);
    if (unchanged(i, selection)) {
      out.tensors.push_back(batch_.tensors[i]);
      continue;
    }
    CandidateTensor c = cut(i, selection, false);
    applyLengths(i, selection, c);
    out.tensors.push_back(copyWithStridePattern(c.values, batch_.tensors[i]));
  }
  return out;
}

std::vector<ValueUnit> TorchBatchStore::nonTrivialValues(const Selection& selection) const {
  std::vector<ValueUnit> units;
  for (std::size_t i = 0; i < batch_.names.size(); ++i) {
    if (!valueReducible(batch_.names[i])) continue;
    CandidateTensor c = cut(i, selection, true);
    applyLengths(i, selection, c);
    at::Tensor open = c.values.ne(trivial_[i]);
    if (c.padding.defined()) open.logical_and_(c.padding.logical_not());
    for (int64_t index : toVector(c.origin.masked_select(open))) units.push_back({batch_.names[i], index});
  }
  return units;
}

void TorchBatchStore::checkSampleAxes() {
  const std::string file = config_.batch.string();
  std::string first;
  for (const SampleAxis& spec : config_.sample_axes) {
    const at::Tensor* t = batch_.find(spec.tensor);
    if (!t) {
      std::ostringstream names;
      for (const auto& n : batch_.names) names << (names.tellp() ? ", " : "") << n;
      throw BadInputError(config_.case_file.string() + ": samples.tensors names '" + spec.tensor + "', but " + file +
                      " has no such tensor (it has: " + names.str() + ")");
    }
    const int64_t dim = t->dim();
    if (spec.axis >= dim || spec.axis < -dim || dim == 0)
      throw BadInputError(config_.case_file.string() + ": samples.tensors." + spec.tensor + ": axis " +
                      std::to_string(spec.axis) + " is out of range for a tensor with " + std::to_string(dim) +
                      " dimension(s) (shape " + c10::str(t->sizes()) + ")");
    const int axis = static_cast<int>(spec.axis < 0 ? spec.axis + dim : spec.axis);
    normalized_axes_.push_back(axis);
    const int64_t n = t->size(axis);
    if (first.empty()) {
      first = spec.tensor;
      samples_ = n;
    } else if (n != samples_) {
      throw BadInputError(file + ": sample dimensions disagree: '" + first + "' has " + std::to_string(samples_) +
                      " samples but '" + spec.tensor + "' has " + std::to_string(n) + " on axis " +
                      std::to_string(axis) + " (check samples.tensors in " + config_.case_file.string() + ")");
    }
  }
  if (!config_.sample_ids.empty()) {
    const at::Tensor* ids = batch_.find(config_.sample_ids);
    if (!ids || ids->dim() != 1 || ids->size(0) != samples_ || at::isFloatingType(ids->scalar_type()))
      throw BadInputError(file + ": samples.ids names '" + config_.sample_ids + "', which must be a 1-D integer tensor with " +
                      std::to_string(samples_) + " entries" + (ids ? ", found shape " + c10::str(ids->sizes()) : ", found none"));
  }
  if (samples_ == 0) throw BadInputError(file + ": the batch has no samples: nothing to reduce");
}

// A transform that cannot apply to the batch is the case's mistake: say so
// before any trial, instead of reducing the error it would raise.
template <typename Require>
void TorchBatchStore::checkTransforms(const Require& require) const {
  for (const TransformSpec& t : config_.harness->transforms) {
    const at::Tensor& x = require("trial.harness.transforms (" + t.name + ")", t.tensor);
    const std::string where = config_.case_file.string() + ": trial.harness.transforms (" + t.name + "): ";
    if ((t.type == "normalize" || t.type == "noise") && !at::isFloatingType(x.scalar_type()))
      throw BadInputError(where + t.type + " needs a floating-point tensor, '" + t.tensor + "' is " + dtypeName(x.scalar_type()));
    if (auto axis = t.params.find("axis"); axis != t.params.end()) {
      const auto a = static_cast<int64_t>(std::stod(axis->second));
      if (a >= x.dim() || a < -x.dim())
        throw BadInputError(where + "axis " + std::to_string(a) + " is out of range for '" + t.tensor + "' of shape " +
                        c10::str(x.sizes()));
    }
  }
}

// sequence: every named tensor exists and agrees on the length of its
// sequence axis; the length tensor is 1-D, integral, one entry per sample,
// each within that length. values: the tensors named exist.
void TorchBatchStore::checkSequence() {
  const std::string where = config_.case_file.string() + ": ";
  const std::string file = config_.batch.string();
  auto require = [&](const std::string& key, const std::string& name) -> const at::Tensor& {
    if (const at::Tensor* t = batch_.find(name)) return *t;
    throw BadInputError(where + key + " names '" + name + "', but " + file + " has no such tensor");
  };
  std::string first;
  for (const SequenceTensor& spec : config_.sequence.tensors) {
    const at::Tensor& t = require("sequence.tensors", spec.tensor);
    const int64_t dim = t.dim();
    if (spec.axis >= dim || spec.axis < -dim)
      throw BadInputError(where + "sequence.tensors." + spec.tensor + ": axis " + std::to_string(spec.axis) +
                      " is out of range for shape " + c10::str(t.sizes()));
    const int axis = static_cast<int>(spec.axis < 0 ? spec.axis + dim : spec.axis);
    if (auto sample = sampleAxisOf(spec.tensor); sample && *sample == axis)
      throw BadInputError(where + "sequence.tensors." + spec.tensor + ": axis " + std::to_string(spec.axis) +
                      " is its sample axis; name the sequence axis (e.g. 1 for [batch, length, ...])");
    sequence_axes_.push_back(axis);
    if (first.empty()) {
      first = spec.tensor;
      sequence_length_ = t.size(axis);
    } else if (t.size(axis) != sequence_length_) {
      throw BadInputError(file + ": sequence lengths disagree: '" + first + "' has " + std::to_string(sequence_length_) +
                      " positions but '" + spec.tensor + "' has " + std::to_string(t.size(axis)) +
                      " (check sequence.tensors in " + config_.case_file.string() + ")");
    }
  }
  if (!config_.sequence.lengths.empty()) {
    const at::Tensor& l = require("sequence.lengths", config_.sequence.lengths);
    if (l.dim() != 1 || l.size(0) != samples_ || at::isFloatingType(l.scalar_type()) || l.scalar_type() == at::kBool)
      throw BadInputError(where + "sequence.lengths names '" + config_.sequence.lengths +
                      "', which must be a 1-D integer tensor with one entry per sample (" + std::to_string(samples_) +
                      "), found " + dtypeName(l.scalar_type()) + " of shape " + c10::str(l.sizes()));
    if (l.numel() && (l.min().item<int64_t>() < 0 || l.max().item<int64_t>() > sequence_length_))
      throw BadInputError(file + ": '" + config_.sequence.lengths + "' holds lengths outside [0, " +
                      std::to_string(sequence_length_) + "], the length of the sequence axes");
  }
  for (const auto& name : config_.values.exclude) require("values.exclude", name);
  if (config_.harness) checkTransforms(require);
  for (const auto& [name, value] : config_.values.trivial) require("values.trivial", name);
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
