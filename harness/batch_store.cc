// Reading, checking and cutting failing batches (LibTorch inside).
#include "harness/batch_store.h"

#include "core/build_info.h"

#include <ATen/ATen.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "harness/batch_io.h"
#include "harness/shared_storage.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// Samples [first, last) of `samples` (ascending) along `axis` of `t`: a view
// when they are consecutive in the original (no copy), else a copy by index.
at::Tensor selectSamples(const at::Tensor& t, int axis, const std::vector<std::int64_t>& samples, std::size_t first,
                         std::size_t last) {
  const auto count = static_cast<int64_t>(last - first);
  if (count > 0 && samples[last - 1] - samples[first] == count - 1) return t.narrow(axis, samples[first], count);
  return t.index_select(axis, at::tensor(std::vector<std::int64_t>(samples.begin() + static_cast<std::ptrdiff_t>(first),
                                                                   samples.begin() + static_cast<std::ptrdiff_t>(last)),
                                         at::kLong));
}

// One tensor of a candidate on its way to the trial: its values, and where
// they came from (flat indices in the original) when the values pass needs it.
struct CandidateTensor {
  at::Tensor values;
  at::Tensor origin;   // int64 flat index in the original tensor; undefined when not tracked
  at::Tensor padding;  // bool, true where a per-sample length cut put padding; undefined if none
  at::Tensor edited;   // bool, true where the values differ from the original's by an edit; undefined if none
};

// A candidate ready to be written: tensors the selection leaves alone are
// the original's own; tensors it only cuts (samples, the window) have no
// data, their storages are produced a slab at a time as the file is
// written, so a candidate of any size is never whole in memory; the others
// (value and length edits, which the passes make once the case is small)
// hold their values.
struct CandidatePlan {
  NamedTensors tensors;
  StorageProducers producers;
  // For each produced tensor, its values in memory instead (inMemory).
  std::map<std::size_t, std::function<at::Tensor()>> materializers;
};

class TorchBatchStore : public BatchStore {
 public:
  TorchBatchStore(const CaseConfig& config, NamedTensors batch) : config_(config), batch_(std::move(batch)) {
    if (config_.infer_samples) throw std::logic_error("BatchStore::open before completeCase");
    markSampleLists();
    checkSampleAxes();
    checkSequence();
    if (!config_.sequence.lengths.empty()) sample_lengths_ = toVector(*batch_.find(config_.sequence.lengths));
    if (!config_.sequence.mask.empty()) sample_lengths_ = toVector(batch_.find(config_.sequence.mask)->ne(0).sum(1));
    padded_to_longest_ = !sample_lengths_.empty() && sequence_length_ > 0 &&
                         *std::max_element(sample_lengths_.begin(), sample_lengths_.end()) == sequence_length_;
    for (const at::Tensor& t : batch_.tensors) trivial_.push_back(defaultTrivial(t));
    storage_groups_ = storageGroups(batch_.tensors);
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
    if (entryPath(config_.sample_ids, 0).empty()) return toVector(*batch_.find(config_.sample_ids));
    for (std::int64_t i = 0; i < samples_; ++i)  // a field of the records (checked when opened)
      ids[static_cast<std::size_t>(i)] = batch_.find(entryPath(config_.sample_ids, i))->item<std::int64_t>();
    return ids;
  }

  std::vector<std::int64_t> integerValues(const std::string& name, std::size_t max_values) const override {
    const at::Tensor* t = batch_.find(name);
    if (!t || at::isFloatingType(t->scalar_type()) || at::isComplexType(t->scalar_type())) return {};
    return toVector(t->flatten().slice(0, 0, static_cast<int64_t>(max_values)));
  }

  std::vector<double> sampleValues(const std::string& name, std::int64_t sample,
                                   std::size_t max_values) const override {
    const at::Tensor* t = batch_.find(name);
    if (t && ownerOf(name) >= 0) {  // the entry of one sample in a per-sample list
      if (ownerOf(name) != sample || at::isComplexType(t->scalar_type())) return {};
      const at::Tensor values = t->flatten().slice(0, 0, static_cast<int64_t>(max_values)).to(at::kDouble).contiguous();
      return {values.data_ptr<double>(), values.data_ptr<double>() + values.numel()};
    }
    const auto axis = sampleAxisOf(name);
    if (!t || !axis || sample < 0 || sample >= t->size(*axis) || at::isComplexType(t->scalar_type())) return {};
    const at::Tensor one = t->select(*axis, sample).flatten().slice(0, 0, static_cast<int64_t>(max_values));
    const at::Tensor values = one.to(at::kDouble).contiguous();
    return {values.data_ptr<double>(), values.data_ptr<double>() + values.numel()};
  }

  ValueRange restRange(const std::string& name, const std::vector<std::int64_t>& except,
                       bool per_position) const override {
    const at::Tensor* t = batch_.find(name);
    const auto axis = sampleAxisOf(name);
    if (!t || !axis || t->numel() > (int64_t{1} << 26) || at::isComplexType(t->scalar_type())) return {};
    std::vector<bool> cut(static_cast<std::size_t>(t->size(*axis)), true);
    for (std::int64_t s : except)
      if (s >= 0 && s < t->size(*axis)) cut[static_cast<std::size_t>(s)] = false;
    // Slab by slab over the runs of cut samples: memory stays that of one
    // slab, not copies of the whole batch (a 200 MB batch is common).
    constexpr std::int64_t kSlabSamples = 4096;
    std::optional<at::Tensor> lo, hi;
    const auto fold = [&](std::int64_t begin, std::int64_t length) {
      at::Tensor r = t->narrow(*axis, begin, length).movedim(*axis, 0);
      if (r.scalar_type() == at::kBool) r = r.to(at::kByte);
      r = r.reshape({length, -1});
      if (r.size(1) == 0) return;
      // The range of the finite values (a NaN in the rest would make it NaN).
      at::Tensor low = r, high = r;
      if (at::isFloatingType(r.scalar_type())) {
        const at::Tensor finite = r.isfinite();
        low = r.masked_fill(finite.logical_not(), std::numeric_limits<double>::infinity());
        high = r.masked_fill(finite.logical_not(), -std::numeric_limits<double>::infinity());
      }
      const at::Tensor l = (per_position ? low.amin(0) : low.min().reshape({1})).to(at::kDouble);
      const at::Tensor h = (per_position ? high.amax(0) : high.max().reshape({1})).to(at::kDouble);
      lo = lo ? at::minimum(*lo, l) : l;
      hi = hi ? at::maximum(*hi, h) : h;
    };
    const auto n = static_cast<std::int64_t>(cut.size());
    for (std::int64_t s = 0; s < n;) {
      if (!cut[static_cast<std::size_t>(s)]) {
        ++s;
        continue;
      }
      std::int64_t e = s;
      while (e < n && e - s < kSlabSamples && cut[static_cast<std::size_t>(e)]) ++e;
      fold(s, e - s);
      s = e;
    }
    if (!lo) return {};
    const at::Tensor low = lo->contiguous(), high = hi->contiguous();
    return {{low.data_ptr<double>(), low.data_ptr<double>() + low.numel()},
            {high.data_ptr<double>(), high.data_ptr<double>() + high.numel()}};
  }

  std::vector<std::pair<std::string, std::string>> sampleEntries(std::int64_t sample,
                                                                 std::size_t max_chars) const override {
    if (!batch_.tree) return {};
    return sampleEntryTexts(*batch_.tree, batch_.tensors, sample, max_chars);
  }

  std::vector<NonFinite> nonFiniteValues(const std::vector<std::int64_t>& samples) const override {
    std::vector<NonFinite> found;
    for (std::size_t i = 0; i < batch_.names.size(); ++i) {
      const at::Tensor& t = batch_.tensors[i];
      if (!at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
      const auto axis = sampleAxisOf(batch_.names[i]);
      const auto count = [&](const at::Tensor& part, std::int64_t sample) {
        const auto nans = part.isnan().sum().item<std::int64_t>(), infs = part.isinf().sum().item<std::int64_t>();
        if (nans + infs > 0) found.push_back({batch_.names[i], sample, nans, infs});
      };
      if (owners_[i] >= 0 && std::binary_search(samples.begin(), samples.end(), owners_[i]))
        count(t, owners_[i]);
      else if (owners_[i] >= 0)
        continue;
      else if (!axis)
        count(t, -1);
      else
        for (std::int64_t s : samples)
          if (s < t.size(*axis)) count(t.select(*axis, s), s);
    }
    return found;
  }

  // The samples `keep` with every value as it is: the candidate of that
  // selection, so that a neighbour is written as the search's files are (a
  // dropped list entry's bytes in a shared storage are zeros there too).
  void writeSubset(const std::vector<std::int64_t>& keep, const fs::path& out) const override {
    Selection subset;
    subset.samples = keep;
    writeCandidate(subset, out);
  }

  std::uint64_t writeCandidate(const Selection& selection, const fs::path& out) const override {
    const CandidatePlan p = plan(selection);
    return writeBatchFile(p.tensors, out, p.producers);
  }

  std::vector<TensorInfo> describeCandidate(const Selection& selection) const override {
    return describeTensors(plan(selection).tensors);
  }

  std::int64_t nonTrivialValueCount(const Selection& selection) const override;

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
      if (!t.defined()) continue;  // the entry of a sample the candidate cut
      TensorInfo info{batch.names[i],
                      dtypeName(t.scalar_type()),
                      t.sizes().vec(),
                      t.strides().vec(),
                      layoutName(t),
                      false,
                      0,
                      0,
                      {}};
      if (auto axis = sampleAxisOf(batch.names[i])) {
        info.has_sample_axis = true;
        info.sample_axis = *axis;
      }
      info.storage_offset = t.storage_offset();
      info.in_sample_list = owners_[i] >= 0;
      info.list_sample = owners_[i];
      for (std::size_t j = 0; j < batch.names.size(); ++j)
        if (j != i && batch.tensors[j].defined() && batch.tensors[j].storage().is_alias_of(t.storage()))
          info.shares_storage_with.push_back(batch.names[j]);
      infos.push_back(std::move(info));
    }
    return infos;
  }

  // Floats 0, masks true, integers 0 or, when 0 is outside the values the
  // original holds (1-based ids), the nearest value it holds; but when
  // only one element holds that value, the tensor's median instead. A rare value may be the bug's own (a
  // length 0, an id past a table): made the trivial value, the values pass
  // would plant it in every kept sample, and the next samples pass would
  // drop the sample that held it first and keep an innocent one.
  static double defaultTrivial(const at::Tensor& t) {
    if (t.scalar_type() == at::kBool) return 1;
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()) || t.numel() == 0) return 0;
    const auto lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>();
    const int64_t nearest = std::clamp<int64_t>(0, lo, hi);
    const int64_t held = t.eq(nearest).sum().item<int64_t>();
    if (held >= 2) return static_cast<double>(nearest);
    return static_cast<double>(t.flatten().median().item<int64_t>());
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

  // Entries of per-sample lists (a detection target's boxes and labels) keep
  // their values: they are the annotations a maintainer reads, and zeros
  // make other boxes degenerate, a new instance of the same failure.
  bool valueReducible(std::size_t i) const {
    const std::string& name = batch_.names[i];
    const auto& ex = config_.values.exclude;
    if (owners_[i] >= 0) return false;
    return name != config_.sample_ids && name != config_.sequence.lengths && name != config_.sequence.mask &&
           std::find(ex.begin(), ex.end(), name) == ex.end();
  }

  // The sample whose entry of a per-sample list holds the tensor; -1: none.
  std::int64_t ownerOf(const std::string& name) const {
    for (std::size_t i = 0; i < batch_.names.size(); ++i)
      if (batch_.names[i] == name) return owners_[i];
    return -1;
  }
  // Whether the candidate keeping `samples` (ascending) holds tensor i.
  bool kept(std::size_t i, const std::vector<std::int64_t>& samples) const {
    return owners_[i] < 0 || std::binary_search(samples.begin(), samples.end(), owners_[i]);
  }
  // An empty batch in the original's containers, keeping `samples`.
  NamedTensors withTree(const std::vector<std::int64_t>& samples) const {
    NamedTensors out;
    out.tree = batch_.tree;
    if (static_cast<std::int64_t>(samples.size()) != samples_) out.kept = samples;
    return out;
  }
  void markSampleLists();

  CandidateTensor cut(std::size_t tensor, const Selection& selection, bool track) const;
  at::Tensor originOf(std::size_t tensor, const Selection& selection) const;
  at::Tensor slabOf(std::size_t tensor, const Selection& selection, int outer, int64_t begin, int64_t end) const;
  bool cutAsIs(std::size_t tensor, const Selection& selection) const;
  bool shapeKept(std::size_t tensor, const Selection& selection) const;
  void planAlone(std::size_t tensor, const Selection& selection, CandidatePlan& p) const;
  // `dropped`: the group's tensors the candidate leaves out (entries of
  // per-sample lists of dropped samples), whose bytes become zeros.
  bool planShared(const std::vector<std::size_t>& group, const std::vector<std::size_t>& dropped,
                  const Selection& selection, CandidatePlan& p) const;
  CandidatePlan plan(const Selection& selection) const;

 public:
  NamedTensors inMemory(const Selection& selection) const;
  void shareWithForkedChildren();

 private:
  std::int64_t nonTrivialCount(std::size_t tensor, const Selection& selection,
                               std::vector<std::int32_t>* per_sample) const;
  bool samplesWhole(std::size_t tensor, const Selection& selection) const;
  std::int64_t samplesPerSlab(std::size_t tensor) const;
  Selection collated(const Selection& selection) const;
  void applyLengths(std::size_t tensor, const Selection& selection, CandidateTensor& c) const;
  at::Tensor lengthsFor(const Selection& selection) const;
  bool unchanged(std::size_t tensor, const Selection& selection) const;

  void checkSampleAxes();
  void checkIdsInRecords() const;
  void checkSequence();
  void checkMask(const at::Tensor& mask) const;
  template <typename Require>
  void checkTransforms(const Require& require) const;

  const CaseConfig& config_;
  NamedTensors batch_;
  std::vector<int> normalized_axes_;
  std::vector<int> sequence_axes_;
  std::vector<double> trivial_;                           // per tensor
  std::vector<std::vector<std::size_t>> storage_groups_;  // tensors sharing a storage
  std::vector<std::int64_t> owners_;                      // per tensor: its sample in a per-sample list, or -1
  std::vector<std::int64_t> sample_lengths_;              // of the original samples; empty without sequence.lengths
  bool padded_to_longest_ = false;                        // the sequence axes as long as the longest sample
  std::int64_t samples_ = 0;
  std::int64_t sequence_length_ = 0;
  // Per tensor, each original sample's non-trivial values (whole samples):
  // counted once, so that the size logged at each step costs O(samples).
  mutable std::mutex per_sample_mutex_;
  mutable std::map<std::size_t, std::vector<std::int32_t>> per_sample_open_;
};

// Samples, window and values of one tensor (before per-sample lengths).
CandidateTensor TorchBatchStore::cut(std::size_t i, const Selection& selection, bool track) const {
  const at::Tensor& t = batch_.tensors[i];
  const bool values = selection.values_kept.count(batch_.names[i]) > 0;
  CandidateTensor c{t, track || values ? originOf(i, selection) : at::Tensor(), {}, {}};
  if (auto axis = sampleAxisOf(batch_.names[i]))
    c.values = selectSamples(c.values, *axis, selection.samples, 0, selection.samples.size());
  if (auto seq = sequenceOf(i); seq && selection.seq_end > 0)
    c.values = c.values.narrow(seq->axis, selection.seq_begin, selection.seq_end - selection.seq_begin);
  c.values = c.values.clone(at::MemoryFormat::Contiguous);
  if (values) {
    const auto& list = selection.values_kept.at(batch_.names[i]);
    const at::Tensor keep = at::isin(c.origin, at::tensor(list, at::kLong));
    c.edited = keep.logical_not();
    c.values.masked_fill_(c.edited, trivial_[i]);
  }
  if (batch_.names[i] == config_.sequence.lengths && sequence_length_ > 0) {
    c.values = lengthsFor(selection).to(t.scalar_type());
    c.edited = at::ones(c.values.sizes(), at::kBool);
  }
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
  if (!seq || !axis || sample_lengths_.empty()) return;
  const std::vector<std::int64_t> lengths = toVector(lengthsFor(selection));
  const int64_t window = selection.seq_end - selection.seq_begin;
  c.padding = at::zeros(c.values.sizes(), at::kBool);
  if (!selection.lengths.empty() && !c.edited.defined()) c.edited = at::zeros(c.values.sizes(), at::kBool);
  for (std::size_t j = 0; j < selection.samples.size(); ++j) {
    const int64_t keep = lengths[j];
    c.padding.narrow(*axis, static_cast<int64_t>(j), 1).narrow(seq->axis, keep, window - keep).fill_(true);
    if (!selection.lengths.count(selection.samples[j])) continue;
    c.values.narrow(*axis, static_cast<int64_t>(j), 1).narrow(seq->axis, keep, window - keep).fill_(seq->pad);
    c.edited.narrow(*axis, static_cast<int64_t>(j), 1).narrow(seq->axis, keep, window - keep).fill_(true);
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

// Flat indices in the original of the candidate's elements (samples and
// window cut, row-major), built from per-dimension coordinates: as large as
// the candidate, not as the original.
at::Tensor TorchBatchStore::originOf(std::size_t i, const Selection& selection) const {
  const at::Tensor& t = batch_.tensors[i];
  const auto axis = sampleAxisOf(batch_.names[i]);
  const auto seq = selection.seq_end > 0 ? sequenceOf(i) : std::nullopt;
  at::Tensor origin = at::zeros({}, at::kLong);
  int64_t row_major = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    at::Tensor coord = axis && d == *axis      ? at::tensor(selection.samples, at::kLong)
                       : seq && d == seq->axis ? at::arange(selection.seq_begin, selection.seq_end, at::kLong)
                                               : at::arange(t.size(d), at::kLong);
    std::vector<int64_t> shape(static_cast<std::size_t>(t.dim()), 1);
    shape[static_cast<std::size_t>(d)] = -1;
    origin = origin + coord.mul(row_major).view(shape);
    row_major *= t.size(d);
  }
  return origin;
}

// Whether tensor i of the candidate is the original's cut by samples and
// window only (no value or length edit): then it can be produced a slab at
// a time, and an originally broadcast dimension stays one.
bool TorchBatchStore::cutAsIs(std::size_t i, const Selection& selection) const {
  const std::string& name = batch_.names[i];
  if (selection.values_kept.count(name)) return false;
  if (name == config_.sequence.lengths && sequence_length_ > 0) return false;
  return !(sequenceOf(i) && sampleAxisOf(name) && !selection.lengths.empty());
}

// Slices [begin, end) of the candidate's tensor i along dimension `outer`
// (all of it when outer < 0): the outer range is cut from the original
// first, so only the slab's samples are copied.
at::Tensor TorchBatchStore::slabOf(std::size_t i, const Selection& selection, int outer, int64_t begin,
                                   int64_t end) const {
  at::Tensor t = batch_.tensors[i];
  const auto axis = sampleAxisOf(batch_.names[i]);
  const auto seq = selection.seq_end > 0 ? sequenceOf(i) : std::nullopt;
  std::size_t first = 0, last = selection.samples.size();
  if (outer >= 0 && axis && outer == *axis) {
    first = static_cast<std::size_t>(begin);
    last = static_cast<std::size_t>(end);
  } else if (outer >= 0 && seq && outer == seq->axis) {
    t = t.narrow(outer, selection.seq_begin + begin, end - begin);
  } else if (outer >= 0) {
    t = t.narrow(outer, begin, end - begin);
  }
  if (seq && outer != seq->axis) t = t.narrow(seq->axis, selection.seq_begin, selection.seq_end - selection.seq_begin);
  return axis ? selectSamples(t, *axis, selection.samples, first, last) : t;
}

// Tensor i alone on its storage in the candidate.
void TorchBatchStore::planAlone(std::size_t i, const Selection& selection, CandidatePlan& p) const {
  const at::Tensor& original = batch_.tensors[i];
  if (unchanged(i, selection)) {
    p.tensors.tensors[i] = original;
  } else if (cutAsIs(i, selection)) {
    std::vector<int64_t> sizes = original.sizes().vec();
    if (auto axis = sampleAxisOf(batch_.names[i]))
      sizes[static_cast<std::size_t>(*axis)] = static_cast<int64_t>(selection.samples.size());
    if (auto seq = sequenceOf(i); seq && selection.seq_end > 0)
      sizes[static_cast<std::size_t>(seq->axis)] = selection.seq_end - selection.seq_begin;
    const StridePattern pattern = stridePatternFor(sizes, original, [](int64_t) { return true; });
    p.tensors.tensors[i] = tensorWithoutData(original.scalar_type(), sizes, pattern);
    auto slab = [this, i, selection, outer = pattern.outer](int64_t begin, int64_t end) {
      return slabOf(i, selection, outer, begin, end);
    };
    p.producers[i] = [slab, pattern, sizes, dtype = original.scalar_type()](const ByteSink& sink) {
      produceInSlabs(pattern, sizes, dtype, slab, sink);
    };
    p.materializers[i] = [slab, pattern, sizes, dtype = original.scalar_type()] {
      return materializeInSlabs(pattern, sizes, dtype, slab);
    };
  } else {
    CandidateTensor c = cut(i, selection, false);
    applyLengths(i, selection, c);
    p.tensors.tensors[i] = copyWithStridePattern(c.values, original);
  }
}

// Whether the candidate gives tensor i its original shape (no sample or
// window cut), whatever its values.
bool TorchBatchStore::shapeKept(std::size_t i, const Selection& selection) const {
  if (sampleAxisOf(batch_.names[i]) && static_cast<std::int64_t>(selection.samples.size()) != samples_) return false;
  const bool window = selection.seq_end > 0 && (selection.seq_begin != 0 || selection.seq_end != sequence_length_);
  return !(window && sequenceOf(i));
}

// The tensors of one original storage in one candidate storage
// (shared_storage.h), their edits written in place; false when the cut
// cannot keep the storage whole.
bool TorchBatchStore::planShared(const std::vector<std::size_t>& group, const std::vector<std::size_t>& dropped,
                                 const Selection& selection, CandidatePlan& p) const {
  std::vector<at::Tensor> views;
  std::vector<ViewCut> cuts;
  for (std::size_t i : group) {
    views.push_back(batch_.tensors[i]);
    ViewCut cut{sampleAxisOf(batch_.names[i]), std::nullopt, selection.seq_begin, selection.seq_end};
    if (auto seq = sequenceOf(i); seq && selection.seq_end > 0) cut.sequence_axis = seq->axis;
    cuts.push_back(cut);
  }
  auto cut_views = cutSharedStorage(views, cuts, selection.samples, samples_);
  if (!cut_views) return false;
  const bool same_layout = std::none_of(cuts.begin(), cuts.end(), [&](const ViewCut& c) {
    return c.sample_axis && static_cast<std::int64_t>(selection.samples.size()) != samples_;
  });
  if (same_layout && !dropped.empty()) {
    // The storage copied whole: what the views of dropped samples held
    // (other utterances' labels split from one tensor) becomes zeros, as in
    // a cut's gaps; then the kept views get their own values back, where
    // they overlap a dropped one.
    const c10::Storage& copy = (*cut_views)[0].storage();
    for (std::size_t d : dropped) {
      const at::Tensor& t = batch_.tensors[d];
      at::empty({0}, t.options()).set_(copy, t.storage_offset(), t.sizes(), t.strides()).zero_();
    }
    for (std::size_t v = 0; v < group.size(); ++v) (*cut_views)[v].copy_(batch_.tensors[group[v]]);
  }
  for (std::size_t v = 0; v < group.size(); ++v) {
    const std::size_t i = group[v];
    at::Tensor& view = (*cut_views)[v];
    if (!unchanged(i, selection)) {
      CandidateTensor c = cut(i, selection, false);
      applyLengths(i, selection, c);
      if (c.edited.defined()) view.copy_(at::where(c.edited, c.values, view));
    }
    p.tensors.tensors[i] = view;
  }
  return true;
}

// A batch padded to its longest sample (a collate that pads each batch as
// far as it needs) stays so: a candidate's sequence axes end where its
// longest kept sample does, as the collate would have made that batch.
// Else a failure of the padded width alone (a position embedding one too
// short) held in every subset of samples, and the search kept an arbitrary
// one, not the long sample. A batch padded to a fixed width (a tokenizer's
// max_length, longer than every sample) keeps its width.
Selection TorchBatchStore::collated(const Selection& selection) const {
  if (!padded_to_longest_ || selection.samples.empty()) return selection;
  std::int64_t longest = 0;
  for (std::int64_t s : selection.samples) {
    std::int64_t length = sample_lengths_[static_cast<std::size_t>(s)];
    if (auto it = selection.lengths.find(s); it != selection.lengths.end()) length = std::min(length, it->second);
    longest = std::max(longest, length);
  }
  Selection out = selection;
  const std::int64_t end = selection.seq_end > 0 ? selection.seq_end : sequence_length_;
  out.seq_end = std::max(std::min(end, longest), out.seq_begin + 1);
  return out;
}

// A storage shared by several tensors of the original stays one storage;
// a tensor alone on its storage is cut a slab at a time, or, when only its
// values change, edited in a copy of its storage.
CandidatePlan TorchBatchStore::plan(const Selection& given) const {
  const Selection selection = collated(given);  // the file, the fork server's child and the checks alike
  CandidatePlan p;
  p.tensors = withTree(selection.samples);
  p.tensors.names = batch_.names;
  p.tensors.tensors.resize(batch_.tensors.size());  // undefined: left out with its sample
  for (std::vector<std::size_t> group : storage_groups_) {
    std::vector<std::size_t> dropped;
    for (std::size_t i : group)
      if (!kept(i, selection.samples)) dropped.push_back(i);
    group.erase(std::remove_if(group.begin(), group.end(), [&](std::size_t i) { return !kept(i, selection.samples); }),
                group.end());
    if (group.empty()) continue;
    const bool changed = !dropped.empty() || std::any_of(group.begin(), group.end(),
                                                         [&](std::size_t i) { return !unchanged(i, selection); });
    const bool shared = group.size() > 1 || shapeKept(group.front(), selection);
    if (changed && shared && planShared(group, dropped, selection, p)) continue;
    for (std::size_t i : group) planAlone(i, selection, p);
  }
  return p;
}

// The plan's tensors in new memory: produced ones filled as the file would
// be, those made for the candidate as they are, unchanged ones copied once
// per storage (the views that share one in the original share the copy),
// as torch.load gives each storage of a file its own allocation.
NamedTensors TorchBatchStore::inMemory(const Selection& selection) const {
  CandidatePlan p = plan(selection);
  std::map<const c10::StorageImpl*, c10::Storage> copies;
  for (std::size_t i = 0; i < p.tensors.tensors.size(); ++i) {
    at::Tensor& t = p.tensors.tensors[i];
    if (!t.defined()) continue;
    if (auto it = p.materializers.find(i); it != p.materializers.end()) {
      t = it->second();
      continue;
    }
    if (p.producers.count(i)) throw std::logic_error("a produced tensor without a materializer");
    const bool original = std::any_of(batch_.tensors.begin(), batch_.tensors.end(),
                                      [&](const at::Tensor& o) { return o.storage().is_alias_of(t.storage()); });
    if (!original) continue;  // made for this candidate: new memory already
    auto [copy, fresh] = copies.try_emplace(t.storage().unsafeGetStorageImpl());
    if (fresh) {
      const std::size_t nbytes = t.storage().nbytes();
      at::Tensor bytes = at::empty({static_cast<int64_t>(nbytes)}, at::kByte);
      if (nbytes > 0) std::memcpy(bytes.data_ptr(), t.storage().data(), nbytes);
      copy->second = bytes.storage();
    }
    t = at::empty({0}, t.options()).set_(copy->second, t.storage_offset(), t.sizes(), t.strides());
  }
  return std::move(p.tensors);
}

// How many samples of tensor i make about one slab.
std::int64_t TorchBatchStore::samplesPerSlab(std::size_t i) const {
  const at::Tensor& t = batch_.tensors[i];
  const auto axis = sampleAxisOf(batch_.names[i]);
  if (!axis || t.numel() == 0) return std::max<std::int64_t>(samples_, 1);
  const int64_t per_sample = t.numel() / std::max<int64_t>(t.size(*axis), 1) * static_cast<int64_t>(t.element_size());
  return std::max<int64_t>(1, slabBytes() / std::max<int64_t>(per_sample, 1));
}

// The non-trivial values of tensor i in the candidate, counted a slab of
// samples at a time (the size a run logs at each step, for any batch);
// `per_sample` (when given) receives each sample's count.
std::int64_t TorchBatchStore::nonTrivialCount(std::size_t i, const Selection& selection,
                                              std::vector<std::int32_t>* per_sample) const {
  const std::int64_t per_slab = samplesPerSlab(i);
  const auto axis = sampleAxisOf(batch_.names[i]);
  Selection part = selection;
  std::int64_t count = 0;
  for (std::size_t begin = 0; begin < selection.samples.size(); begin += static_cast<std::size_t>(per_slab)) {
    const std::size_t end = std::min(selection.samples.size(), begin + static_cast<std::size_t>(per_slab));
    part.samples.assign(selection.samples.begin() + static_cast<std::ptrdiff_t>(begin),
                        selection.samples.begin() + static_cast<std::ptrdiff_t>(end));
    CandidateTensor c = cut(i, part, false);
    applyLengths(i, part, c);
    at::Tensor open = c.values.ne(trivial_[i]);
    if (c.padding.defined()) open.logical_and_(c.padding.logical_not());
    if (per_sample && axis) {
      const at::Tensor counts = open.movedim(*axis, 0).reshape({open.size(*axis), -1}).sum(1).to(at::kInt).contiguous();
      per_sample->insert(per_sample->end(), counts.data_ptr<int32_t>(), counts.data_ptr<int32_t>() + counts.numel());
    }
    count += open.sum().item<int64_t>();
    if (!axis) break;  // one piece: the whole tensor
  }
  return count;
}

// Whether tensor i of the candidate is its samples of the original, whole:
// then its count is the sum of theirs, counted once per run.
bool TorchBatchStore::samplesWhole(std::size_t i, const Selection& selection) const {
  const bool full_window =
      selection.seq_end == 0 || (selection.seq_begin == 0 && selection.seq_end == sequence_length_);
  return sampleAxisOf(batch_.names[i]) && full_window && selection.lengths.empty() &&
         !selection.values_kept.count(batch_.names[i]);
}

std::int64_t TorchBatchStore::nonTrivialValueCount(const Selection& given) const {
  const Selection selection = collated(given);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < batch_.names.size(); ++i) {
    if (!valueReducible(i) || !kept(i, selection.samples)) continue;
    if (!samplesWhole(i, selection)) {
      count += nonTrivialCount(i, selection, nullptr);
      continue;
    }
    std::lock_guard lock(per_sample_mutex_);
    std::vector<std::int32_t>& per_sample = per_sample_open_[i];
    if (per_sample.empty()) nonTrivialCount(i, fullSelection(*this), &per_sample);
    for (std::int64_t s : selection.samples) count += per_sample[static_cast<std::size_t>(s)];
  }
  return count;
}

std::vector<ValueUnit> TorchBatchStore::nonTrivialValues(const Selection& selection) const {
  std::vector<ValueUnit> units;
  for (std::size_t i = 0; i < batch_.names.size(); ++i) {
    if (!valueReducible(i) || !kept(i, selection.samples)) continue;
    CandidateTensor c = cut(i, selection, true);
    applyLengths(i, selection, c);
    at::Tensor open = c.values.ne(trivial_[i]);
    if (c.padding.defined()) open.logical_and_(c.padding.logical_not());
    for (int64_t index : toVector(c.origin.masked_select(open))) units.push_back({batch_.names[i], index});
  }
  return units;
}

// samples.lists: each a list or tuple of the batch, whose entries go with
// their samples (a copy of the tree, marked; the owners of its tensors).
void TorchBatchStore::markSampleLists() {
  if (!batch_.tree) batch_.tree = std::make_shared<const BatchNode>();
  auto tree = std::make_shared<BatchNode>(*batch_.tree);
  for (const std::string& path : config_.sample_lists) {
    BatchNode* node = findNode(*tree, path);
    if (!node || (node->kind != BatchNode::Kind::List && node->kind != BatchNode::Kind::Tuple))
      throw BadInputError(config_.case_file.string() + ": samples.lists names '" + path + "', but " +
                          config_.batch.string() +
                          (node ? " holds a " + kindName(node->kind) + " there" : " has nothing at that path") +
                          " (a list or tuple with one entry per sample is expected)");
    node->per_sample = true;
  }
  owners_ = tensorOwners(*tree, batch_.tensors.size());
  batch_.tree = std::move(tree);
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
  if (!config_.sample_ids.empty() && entryPath(config_.sample_ids, 0).empty()) {
    const at::Tensor* ids = batch_.find(config_.sample_ids);
    if (!ids || ids->dim() != 1 || ids->size(0) != samples_ || at::isFloatingType(ids->scalar_type()))
      throw BadInputError(
          file + ": samples.ids names '" + config_.sample_ids + "', which must be a 1-D integer tensor with " +
          std::to_string(samples_) + " entries" +
          (ids ? ", found " + dtypeName(ids->scalar_type()) + " of shape " + c10::str(ids->sizes()) : ", found none"));
  }
  for (const std::string& path : config_.sample_lists) {
    const auto n = static_cast<std::int64_t>(findNode(*batch_.tree, path)->children.size());
    if (first.empty()) {
      first = path;
      samples_ = n;
    } else if (n != samples_) {
      throw BadInputError(file + ": sample counts disagree: '" + first + "' has " + std::to_string(samples_) +
                          " samples but the list '" + path + "' has " + std::to_string(n) + " entries (check " +
                          "samples.lists in " + config_.case_file.string() + ")");
    }
  }
  for (std::size_t i = 0; i < batch_.names.size(); ++i)
    if (owners_[i] >= 0 && sampleAxisOf(batch_.names[i]))
      throw BadInputError(config_.case_file.string() + ": '" + batch_.names[i] +
                          "' lies in a per-sample list (samples.lists) and cannot have a sample axis of its own; "
                          "remove it from samples.tensors");
  if (samples_ == 0) throw BadInputError(file + ": the batch has no samples: nothing to reduce");
  if (const std::string what = samplesPastTheirData(samples_, batch_); !what.empty())
    throw BadInputError(file + ": " + what);
  if (!entryPath(config_.sample_ids, 0).empty()) checkIdsInRecords();
}

// samples.ids naming a field of a per-sample list's records
// ("[1][*].image_id"): one integer in each entry, the list one of
// samples.lists.
void TorchBatchStore::checkIdsInRecords() const {
  const std::string& pattern = config_.sample_ids;
  const std::string list = pattern.substr(0, pattern.find("[*]"));
  const bool listed = std::find(config_.sample_lists.begin(), config_.sample_lists.end(),
                                list.empty() ? std::string(kRootPath) : list) != config_.sample_lists.end();
  if (!listed)
    throw BadInputError(config_.case_file.string() + ": samples.ids names '" + pattern + "', but '" +
                        (list.empty() ? std::string(kRootPath) : list) + "' is not a per-sample list (samples.lists)");
  for (std::int64_t i = 0; i < samples_; ++i) {
    const at::Tensor* id = batch_.find(entryPath(pattern, i));
    if (!id || id->numel() != 1 || at::isFloatingType(id->scalar_type()) || at::isComplexType(id->scalar_type()))
      throw BadInputError(config_.batch.string() + ": samples.ids names '" + pattern +
                          "', which must be one integer in "
                          "every entry of the list; entry " +
                          std::to_string(i) +
                          (id ? " holds a " + dtypeName(id->scalar_type()) + " tensor of shape " + c10::str(id->sizes())
                              : " has none"));
  }
}

// A transform that cannot apply to the batch is the case's mistake: say so
// before any trial, instead of reducing the error it would raise.
template <typename Require>
void TorchBatchStore::checkTransforms(const Require& require) const {
  for (const TransformSpec& t : config_.harness->transforms) {
    const at::Tensor& x = require("trial.harness.transforms (" + t.name + ")", t.tensor);
    const std::string where = config_.case_file.string() + ": trial.harness.transforms (" + t.name + "): ";
    if ((t.type == "normalize" || t.type == "noise") && !at::isFloatingType(x.scalar_type()))
      throw BadInputError(where + t.type + " needs a floating-point tensor, '" + t.tensor + "' is " +
                          dtypeName(x.scalar_type()));
    if (auto axis = t.params.find("axis"); axis != t.params.end()) {
      const auto a = static_cast<int64_t>(std::stod(axis->second));
      if (a >= x.dim() || a < -x.dim())
        throw BadInputError(where + "axis " + std::to_string(a) + " is out of range for '" + t.tensor + "' of shape " +
                            c10::str(x.sizes()));
    }
  }
}

// sequence.mask: [samples, length] of 0/1, a sequence tensor padded with 0,
// each row a prefix of ones (a right-padded attention mask): the lengths
// are its rows' counts, and cutting a length pads the mask with 0 past it.
void TorchBatchStore::checkMask(const at::Tensor& m) const {
  const std::string where = config_.case_file.string() + ": sequence.mask names '" + config_.sequence.mask + "', ";
  const auto seq = std::find_if(config_.sequence.tensors.begin(), config_.sequence.tensors.end(),
                                [&](const SequenceTensor& t) { return t.tensor == config_.sequence.mask; });
  if (m.dim() != 2 || m.size(0) != samples_ || m.size(1) != sequence_length_ || seq == config_.sequence.tensors.end() ||
      seq->pad != 0)
    throw BadInputError(
        where + "which must be a [" + std::to_string(samples_) + ", " + std::to_string(sequence_length_) +
        "] tensor named under sequence.tensors with axis 1 and padding 0, found shape " + c10::str(m.sizes()));
  const at::Tensor on = m.ne(0);
  const at::Tensor prefix = at::arange(m.size(1), at::kLong).unsqueeze(0) < on.sum(1, true);
  if (!at::isIntegralType(m.scalar_type(), /*includeBool=*/true) || !at::equal(on, prefix) ||
      !at::logical_or(m.eq(0), m.eq(1)).all().item<bool>())
    throw BadInputError(where +
                        "whose rows must each be a prefix of ones then zeros (a right-padded attention mask); "
                        "a left-padded or other mask cannot give the samples' lengths: leave sequence.mask out");
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
      throw BadInputError(file + ": sequence lengths disagree: '" + first + "' has " +
                          std::to_string(sequence_length_) + " positions but '" + spec.tensor + "' has " +
                          std::to_string(t.size(axis)) + " (check sequence.tensors in " + config_.case_file.string() +
                          ")");
    }
  }
  if (!config_.sequence.lengths.empty()) {
    const at::Tensor& l = require("sequence.lengths", config_.sequence.lengths);
    if (l.dim() != 1 || l.size(0) != samples_ || at::isFloatingType(l.scalar_type()) || l.scalar_type() == at::kBool)
      throw BadInputError(where + "sequence.lengths names '" + config_.sequence.lengths +
                          "', which must be a 1-D integer tensor with one entry per sample (" +
                          std::to_string(samples_) + "), found " + dtypeName(l.scalar_type()) + " of shape " +
                          c10::str(l.sizes()));
    if (l.numel() && (l.min().item<int64_t>() < 0 || l.max().item<int64_t>() > sequence_length_))
      throw BadInputError(file + ": '" + config_.sequence.lengths + "' holds lengths outside [0, " +
                          std::to_string(sequence_length_) + "], the length of the sequence axes");
  }
  if (!config_.sequence.mask.empty()) checkMask(require("sequence.mask", config_.sequence.mask));
  for (const auto& name : config_.values.exclude) require("values.exclude", name);
  if (config_.harness) checkTransforms(require);
  for (const auto& [name, value] : config_.values.trivial) require("values.trivial", name);
}

}  // namespace

NamedTensors candidateTensors(const BatchStore& store, const Selection& selection) {
  return dynamic_cast<const TorchBatchStore&>(store).inMemory(selection);
}

namespace {

struct SharedMapping {
  void* at;
  std::size_t bytes;
};

void unmapShared(void* context) {
  auto* mapping = static_cast<SharedMapping*>(context);
  ::munmap(mapping->at, mapping->bytes);
  delete mapping;
}

// `bytes` of a fresh memfd, mapped shared and filled with `from`, then made
// read-only; nullptr when the system cannot.
void* sharedCopy(const void* from, std::size_t bytes) {
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, "minrepro-batch", 1u /* MFD_CLOEXEC */));
  if (fd < 0) return nullptr;
  void* at = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                 : MAP_FAILED;
  ::close(fd);
  if (at == MAP_FAILED) return nullptr;
  std::memcpy(at, from, bytes);
  ::mprotect(at, bytes, PROT_READ);
  return at;
}

}  // namespace

// Fork copies the page tables of private memory: a forked child's resident
// size counts the whole batch its server holds before it reads a byte, and
// then the candidate it copies out of it (a 272 MB batch of 1M samples made
// the largest child 749 MB). A shared mapping is mapped into a child only
// where it reads. Read-only: a child that wrote into it would change every
// later child's batch, so it crashes instead.
void TorchBatchStore::shareWithForkedChildren() {
  std::set<const c10::StorageImpl*> moved;
  for (at::Tensor& t : batch_.tensors) {
    if (!t.defined() || !t.has_storage() || t.device().type() != at::kCPU) continue;
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const std::size_t bytes = storage->nbytes();
    if (bytes < (std::size_t{1} << 20) || !moved.insert(storage).second) continue;
    void* at = sharedCopy(t.storage().data_ptr().get(), bytes);
    if (!at) return;  // as it was: private memory
    storage->set_data_ptr_noswap(at::DataPtr(at, new SharedMapping{at, bytes}, &unmapShared, at::Device(at::kCPU)));
  }
}

void shareWithForkedChildren(BatchStore& store) { dynamic_cast<TorchBatchStore&>(store).shareWithForkedChildren(); }

std::unique_ptr<BatchStore> BatchStore::open(const CaseConfig& config) {
  NamedTensors batch = readBatchFile(config.batch);
  if (batch.tensors.empty())
    throw BadInputError(config.batch.string() +
                        ": the batch holds no tensor; save the batch your step is given, with its tensors");
  return std::make_unique<TorchBatchStore>(config, std::move(batch));
}

}  // namespace minrepro

#include <torch/csrc/api/include/torch/version.h>

namespace minrepro {

void writeEmptyBatch(const std::filesystem::path& file) { writeBatchFile(NamedTensors{}, file); }

std::vector<std::pair<std::string, std::string>> libtorchEnvironment() {
  return {
      {"LibTorch", TORCH_VERSION},
      {"LibTorch from", kTorchSource},
      {"LibTorch CUDA build", at::hasCUDA() ? "yes" : "no"},
      {"LibTorch HIP build", at::hasHIP() ? "yes" : "no"},
      {"Compiler", std::string("g++ ") + __VERSION__},
  };
}

}  // namespace minrepro
