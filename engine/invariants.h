// Invariants a candidate must keep before a trial is spent on it (case.yaml
// `invariants`): a smaller batch that changed a dtype, lost its memory layout
// or disagrees on the sample count may stop failing, or fail as another bug,
// so it is rejected without running. LibTorch-free: works on TensorInfo.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "harness/batch_store.h"

namespace minrepro {

// Why the candidate breaks an invariant ("input: layout transposed became
// contiguous"), or nothing when it keeps them all.
std::optional<std::string> brokenInvariant(const Invariants& invariants, const std::vector<TensorInfo>& original,
                                           const std::vector<TensorInfo>& candidate);

}  // namespace minrepro
