// Candidates of tensors that share a storage. A batch may hold several
// views into one buffer (three stride-3 columns of a packed record, a
// tensor and its transpose); a step may read that buffer whole, as a
// kernel that ignores strides does. A candidate that gave each view its
// own storage would run a different program, so a storage shared in the
// original stays one storage in the candidate: cut by whole sample blocks
// when the views lie in per-sample blocks, copied whole when no view loses
// samples, its bytes outside the views (offset, gaps, tail) kept as the
// original has them. Value edits are then written into the views in place.
// This header includes LibTorch (harness/ only).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace minrepro {

// Indices of the tensors that share one storage, each group in batch order;
// a tensor alone on its storage is a group of one.
std::vector<std::vector<std::size_t>> storageGroups(const std::vector<at::Tensor>& tensors);

// How the candidate cuts one view of the group: its sample axis (kept
// samples `samples` of `sample_count`), and its sequence window.
struct ViewCut {
  std::optional<int> sample_axis;
  std::optional<int> sequence_axis;
  std::int64_t window_begin = 0;
  std::int64_t window_end = 0;  // 0: no window
};

// The group's views in one new storage, or nothing when the cut cannot keep
// the storage whole: samples are cut but the views do not lie in one block
// of bytes per sample (a view without a sample axis, different sample
// strides, a sample's bytes spread over another's block). Every view keeps
// its strides and offset; the storage keeps the bytes before the first
// block, the kept blocks in order and the bytes after the last block.
std::optional<std::vector<at::Tensor>> cutSharedStorage(const std::vector<at::Tensor>& views,
                                                        const std::vector<ViewCut>& cuts,
                                                        const std::vector<std::int64_t>& samples,
                                                        std::int64_t sample_count);

}  // namespace minrepro
