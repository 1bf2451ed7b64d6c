// Batch files as LibTorch sees them. This header includes LibTorch: only
// harness/*.cc files that already need tensors may include it.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/batch_tree.h"
#include "harness/stored_zip.h"

namespace minrepro {

// The tensors of a batch by their paths (harness/batch_tree.h), in the order
// the file has them, and the containers around them.
struct NamedTensors {
  std::vector<std::string> names;
  // Undefined where a candidate leaves the tensor out (the entry of a cut
  // sample in a per-sample list).
  std::vector<at::Tensor> tensors;
  // The containers as read; null: a dict of the tensors by name.
  std::shared_ptr<const BatchNode> tree;
  // The samples whose entries of per-sample containers are written; nullopt: all.
  std::optional<std::vector<std::int64_t>> kept;
  // Each name's index, made when the batch is read: case inference finds
  // every tensor by name, and a search of the names made that quadratic
  // (probe 35: 40 000 entries took init 59 s). A name it does not hold, or
  // holds at another place (a copy whose names changed), is searched for.
  std::shared_ptr<const std::unordered_map<std::string, std::size_t>> index;
  const at::Tensor* find(const std::string& name) const;
};

// Reads a torch.save'd batch (Python's zip format): any nesting of dicts,
// lists and tuples around tensors, numbers, strings and None. Tensors that
// share a storage in the file share one storage here too (and so when
// written again). Throws BadInputError naming the file when it is
// unreadable, holds no tensor, or holds what cannot be written back (an
// object of the user's class, such as a named tuple).
NamedTensors readBatchFile(const std::filesystem::path& file);

// Whether the batch's data can back `samples` samples: minrepro keeps a few
// dozen bytes of bookkeeping per sample (ids, selections, their copies), so
// a tensor of shape [3e8, 0] (no data, 1.5 KB on disk) that declares 3e8
// samples took init to 2.75 GB and shrink to exit 1 (probe 42). Past
// 1 000 000 samples, at least 8 bytes of tensor data per sample. Returns
// what is wrong, "" when the count is backed.
std::string samplesPastTheirData(std::int64_t samples, const NamedTensors& batch);

// Producers of the storages of tensors without data (tensorWithoutData), by
// the tensor's index in the batch: each writes its storage's bytes.
using StorageProducers = std::map<std::size_t, std::function<void(const ByteSink&)>>;

// Writes in the format Python's torch.load reads (with weights_only=True:
// plain dicts, lists and tuples), in the containers `batch.tree` has; streamed to a temp file
// then renamed; a tensor without data gets its storage from `producers`
// (a candidate cut from the original a slab at a time, never whole in
// memory). Returns the bytes of tensor data written.
std::uint64_t writeBatchFile(const NamedTensors& batch, const std::filesystem::path& file,
                             const StorageProducers& producers = {});

// A copy with the same dtype, shape and stride order (dimension order by
// stride), owning a storage of exactly its own size.
at::Tensor cloneKeepingLayout(const at::Tensor& t);
// `values` copied into a fresh tensor whose dimensions are laid out in the
// stride order of `layout_of` (same rank): a subset of a channels-last batch
// stays channels-last.
at::Tensor copyWithStrideOrder(const at::Tensor& values, const at::Tensor& layout_of);
// `values` (a cut of `layout_of`, same rank) in a fresh storage laid out as
// `layout_of` is: the same stride order, the same gaps beyond each inner
// dimension's extent (a stride-3 view stays stride 3, a column slice of a
// wider matrix keeps its row stride), stride 0 where `layout_of` broadcasts
// and the values allow it, and the same storage offset. The elements before
// the offset and in the gaps are zeros.
at::Tensor copyWithStridePattern(const at::Tensor& values, const at::Tensor& layout_of);

// The layout copyWithStridePattern gives a tensor of `sizes` cut from
// `layout_of`; a broadcast dimension of it stays one where `stays_broadcast`
// says the values allow it.
struct StridePattern {
  std::vector<int64_t> strides;
  int64_t offset = 0;
  int64_t storage_numel = 0;  // elements of the storage, the offset's included
  // The outermost dimension with more than one element (-1 if none): each
  // of its slices lies in a block of strides[outer] elements of its own.
  int outer = -1;
};
StridePattern stridePatternFor(at::IntArrayRef sizes, const at::Tensor& layout_of,
                               const std::function<bool(int64_t)>& stays_broadcast);

// A tensor with that layout whose storage has a size but no data: what the
// pickle of a candidate needs to know, before its bytes are produced.
at::Tensor tensorWithoutData(c10::ScalarType dtype, at::IntArrayRef sizes, const StridePattern& pattern);

// How large a piece of a streamed tensor is made at once (32 MiB); tests
// make it small, to cut small tensors into many slabs.
int64_t slabBytes();
void setSlabBytes(int64_t bytes);
// Writes the storage of a tensor laid out by `pattern` slab by slab along
// its outer dimension: `slab(begin, end)` gives the values of slices
// [begin, end) of it (all of the tensor, called once, when it has no outer
// dimension); zeros before the offset and in the gaps.
void produceInSlabs(const StridePattern& pattern, at::IntArrayRef sizes, c10::ScalarType dtype,
                    const std::function<at::Tensor(int64_t begin, int64_t end)>& slab, const ByteSink& sink);
// The same tensor in memory: its storage allocated once and filled slab by
// slab (a fork server's child building its candidate).
at::Tensor materializeInSlabs(const StridePattern& pattern, at::IntArrayRef sizes, c10::ScalarType dtype,
                              const std::function<at::Tensor(int64_t begin, int64_t end)>& slab);

class BatchStore;
struct Selection;
// The candidate `selection` of the store's batch in memory, exactly as
// BatchStore::writeCandidate writes it (one plan for both: layouts,
// storages and their sharing, unchanged tensors as the original has them) and torch.load would read it back: what
// a fork server's child runs instead of reading the file.
NamedTensors candidateTensors(const BatchStore& store, const Selection& selection);

// A fork server's batch: its large storages moved into read-only shared
// memory, which a forked child maps only where it reads (batch_store.cc).
void shareWithForkedChildren(BatchStore& store);

std::string dtypeName(c10::ScalarType type);
std::string layoutName(const at::Tensor& t);

}  // namespace minrepro
