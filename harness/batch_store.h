// A failing batch on disk: a torch.save'd dict of named tensors. This header
// is LibTorch-free so the engine can use it; the implementation holds the tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "reducers/reducer.h"

namespace minrepro {

struct TensorInfo {
  std::string name;
  std::string dtype;  // "int64", "float32", ... (PyTorch's names without "torch.")
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::string layout;  // "contiguous", "channels_last", "transposed", "strided" (1-D with a stride other than 1 too)
  bool has_sample_axis = false;
  int sample_axis = 0;  // normalized (non-negative) when has_sample_axis
  std::int64_t storage_offset = 0;
  std::vector<std::string> shares_storage_with;  // other tensors of the batch on the same storage
  bool in_sample_list = false;                   // an entry of a per-sample list (samples.lists)
  std::int64_t list_sample = -1;                 // ... of that sample (its position in the batch)
};

struct ValueRange {
  std::vector<double> lo, hi;
};

class BatchStore : public CaseView {
 public:
  // Reads the batch and checks it against the case: a dict of tensors, every
  // declared tensor present, sample axes in range, sample counts agreeing.
  // Throws BadInputError naming the file and what is wrong.
  static std::unique_ptr<BatchStore> open(const CaseConfig& config);
  virtual ~BatchStore() = default;

  std::int64_t sampleCount() const override = 0;
  virtual std::vector<TensorInfo> describe() const = 0;
  // Per-sample ids from the case's ids tensor; 0..n-1 when none is declared.
  virtual std::vector<std::int64_t> sampleIds() const = 0;
  // The values of a small integer tensor, for reports (empty if not integral).
  virtual std::vector<std::int64_t> integerValues(const std::string& name, std::size_t max_values) const = 0;
  // For the reports that show samples (engine/archive/sample_panels.h): one
  // sample of a tensor with a sample axis, flattened, at most `max_values`
  // of it, as doubles (empty: no such tensor or sample).
  virtual std::vector<double> sampleValues(const std::string& name, std::int64_t sample,
                                           std::size_t max_values) const = 0;
  // What one sample holds in the per-sample lists besides tensors, as
  // Python prints it ({"meta", "{'filename': 'scene_00203.png', ...}"}), each
  // entry cut to `max_chars`; see sampleEntryTexts (batch_tree.h).
  virtual std::vector<std::pair<std::string, std::string>> sampleEntries(std::int64_t sample,
                                                                         std::size_t max_chars) const = 0;
  // The smallest and largest values of that tensor over the samples not in
  // `except`: one pair per position of a sample when `per_position`, else
  // one pair; empty when no sample is left or the tensor is too large to
  // scan here (over 64M values).
  virtual ValueRange restRange(const std::string& name, const std::vector<std::int64_t>& except,
                               bool per_position) const = 0;
  // The NaN and inf values the given samples hold in each floating-point
  // tensor, and the tensors kept whole: "'image' sample 17: 3072 NaN" (by
  // position; the caller names samples by their ids). Empty when none.
  struct NonFinite {
    std::string tensor;
    std::int64_t sample = -1;  // -1: a tensor kept whole
    std::int64_t nans = 0, infs = 0;
  };
  virtual std::vector<NonFinite> nonFiniteValues(const std::vector<std::int64_t>& samples) const = 0;

  // Writes a batch that keeps only the given samples (indices into this
  // batch, ascending) in every tensor that has the sample axis. Each piece is
  // cloned with the original's stride order (a transposed or channels-last
  // tensor stays so) and dtype. Written to a temp file, then renamed.
  virtual void writeSubset(const std::vector<std::int64_t>& keep, const std::filesystem::path& out) const = 0;

  // A candidate as its trial sees it: the kept samples, cut to the sequence
  // window, per-sample lengths applied (cut positions padded, the length
  // tensor updated), dropped values set to their tensor's trivial value.
  // A tensor the selection does not change is written as it was read: its
  // storage bytes, offset, sizes and strides, and the storage it shares with
  // other tensors. Changed views of a storage shared in the original stay
  // views of one storage, cut by whole sample blocks (shared_storage.h); a
  // tensor whose values alone change is edited in a copy of its storage.
  // Any other changed tensor keeps its dtype and stride pattern (the order
  // of dimensions in memory, the gaps between them, broadcast dimensions
  // and the storage offset) in a storage of its own. Streamed: a tensor
  // alone on its storage and only cut by samples and window is produced a
  // slab at a time, so writing holds no copy of the candidate. Returns the
  // bytes of tensor data written.
  virtual std::uint64_t writeCandidate(const Selection& selection, const std::filesystem::path& out) const = 0;
  // The tensors of that candidate, for the invariant checks (no file written).
  virtual std::vector<TensorInfo> describeCandidate(const Selection& selection) const = 0;
};

}  // namespace minrepro

namespace minrepro {

// A batch file that holds no tensor at all (an empty dict, as torch.save
// writes it): the trial that fails the same way on it does not depend on
// the batch (engine/batch_dependence.h).
void writeEmptyBatch(const std::filesystem::path& file);

// What the LibTorch build minrepro runs with: name/value pairs for reports
// ("LibTorch", "1.13.0"), ("CUDA build", "no"), ...
std::vector<std::pair<std::string, std::string>> libtorchEnvironment();

}  // namespace minrepro
