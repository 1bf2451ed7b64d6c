// Half precision off, for `minrepro compare`'s float32 variant (docs/method.md, "One change at a time":
// "the usual precision", one change at a time). LibTorch-free: the engine
// calls the first function; the harness the second.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace torch::jit {
struct Module;
}

namespace minrepro {

// Writes a copy of the batch file `in` to `out` with every float16 and
// bfloat16 tensor cast to float32 in the same stride order (a transposed or
// channels-last tensor stays so); other tensors unchanged. Returns what was
// cast ("input: float16 -> float32"). Throws BadInputError for an unreadable batch.
std::vector<std::string> writeFloat32Batch(const std::filesystem::path& in, const std::filesystem::path& out);

// Casts the module's float16/bfloat16 parameters and buffers (all
// submodules) to float32; integer buffers stay as they are. Returns how many.
int castHalfModuleToFloat32(torch::jit::Module& module);

}  // namespace minrepro
