// LibTorch inside: see precision.h.
#include "harness/precision.h"

#include <ATen/ATen.h>
#include <torch/script.h>

#include <map>

#include "harness/batch_io.h"

namespace minrepro {

namespace {

bool isHalf(const at::Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

}  // namespace

// Each half storage cast once, as a whole, and each tensor made again as the
// same view of the cast one: sizes, strides, offset and the sharing of one
// storage kept (the variant differs from the case in its dtype only), and
// the memory that of the storages, not of the views dense (probe 41: an
// overlapping view of 98 KB read as 1 GiB took compare to 4.3 GB).
std::vector<std::string> writeFloat32Batch(const std::filesystem::path& in, const std::filesystem::path& out) {
  NamedTensors batch = readBatchFile(in);
  std::vector<std::string> cast;
  std::map<const c10::StorageImpl*, at::Tensor> cast_storages;
  for (std::size_t i = 0; i < batch.tensors.size(); ++i) {
    at::Tensor& t = batch.tensors[i];
    if (!isHalf(t)) continue;
    cast.push_back(batch.names[i] + ": " + dtypeName(t.scalar_type()) + " -> float32");
    if (!t.has_storage() || t.storage().data() == nullptr) {
      t = copyWithStrideOrder(t.to(at::kFloat), t);
      continue;
    }
    at::Tensor& whole = cast_storages[t.storage().unsafeGetStorageImpl()];
    if (!whole.defined()) {
      const auto numel = static_cast<std::int64_t>(t.storage().nbytes() / t.element_size());
      whole = at::empty({0}, t.options()).set_(t.storage(), 0, {numel}, {1}).to(at::kFloat);
    }
    t = whole.as_strided(t.sizes(), t.strides(), t.storage_offset());
  }
  writeBatchFile(batch, out);
  return cast;
}

int castHalfModuleToFloat32(torch::jit::Module& module) {
  int cast = 0;
  // set_data keeps each parameter the object the module holds (and a
  // parameter stays a parameter); Module::to would also cast integer buffers.
  for (at::Tensor t : module.parameters(/*recurse=*/true))
    if (isHalf(t)) t.set_data(t.to(at::kFloat)), ++cast;
  for (at::Tensor t : module.buffers(/*recurse=*/true))
    if (isHalf(t)) t.set_data(t.to(at::kFloat)), ++cast;
  return cast;
}

}  // namespace minrepro
