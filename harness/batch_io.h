// Batch files as LibTorch sees them. This header includes LibTorch: only
// harness/*.cc files that already need tensors may include it.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>

#include <filesystem>
#include <string>
#include <vector>

namespace minrepro {

// Named tensors in the order the file has them.
struct NamedTensors {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
  const at::Tensor* find(const std::string& name) const;
};

// Reads a torch.save'd dict of tensors (Python's zip format). Tensors that
// share a storage in the file share one storage here too (and so when
// written again). Throws BadInputError naming the file when it is unreadable or
// not a dict of tensors.
NamedTensors readBatchFile(const std::filesystem::path& file);

// Writes in the format Python's torch.load reads, to a temp file then renamed.
void writeBatchFile(const NamedTensors& batch, const std::filesystem::path& file);

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

std::string dtypeName(c10::ScalarType type);
std::string layoutName(const at::Tensor& t);

}  // namespace minrepro
