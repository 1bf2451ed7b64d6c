// repro.cpp and CMakeLists.txt for archives of the built-in harness: the
// same forward and loss with LibTorch alone (issue 5, docs/method.md, "A request for deeper analysis"), for
// maintainers who work in C++. Generated text; the engine does not link it.
#pragma once

#include <vector>

#include "core/case_config.h"
#include "core/failure_signature.h"
#include "engine/archive/tar_gz.h"

namespace minrepro {

// {"repro.cpp", "CMakeLists.txt"}: `cmake -S . -B build && cmake --build
// build && ./build/repro [BATCH]` loads batch.pt (or BATCH) with
// torch::jit::pickle_load and model.pt with torch::jit::load, runs forward
// and the loss with ignore_index, prints the c10 error and exits 1; after a
// fix it prints "minrepro-result: processed=N loss=X" like repro.py.
std::vector<ArchiveEntry> reproCppEntries(const HarnessTrial& harness, const FailureSignature& signature);

}  // namespace minrepro
