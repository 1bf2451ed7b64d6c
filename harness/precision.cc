// LibTorch inside: see precision.h.
#include "harness/precision.h"

#include <ATen/ATen.h>
#include <torch/script.h>

#include "harness/batch_io.h"

namespace minrepro {

namespace {

bool isHalf(const at::Tensor& t) { return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16; }

}  // namespace

std::vector<std::string> writeFloat32Batch(const std::filesystem::path& in, const std::filesystem::path& out) {
  NamedTensors batch = readBatchFile(in);
  std::vector<std::string> cast;
  for (std::size_t i = 0; i < batch.tensors.size(); ++i) {
    at::Tensor& t = batch.tensors[i];
    if (!isHalf(t)) continue;
    cast.push_back(batch.names[i] + ": " + dtypeName(t.scalar_type()) + " -> float32");
    t = copyWithStrideOrder(t.to(at::kFloat), t);
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
