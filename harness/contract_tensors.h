// The class-index contract on a batch already loaded (the built-in harness
// checks before a trial). Includes LibTorch: only for harness/*.cc.
#pragma once

#include <string>

#include "harness/batch_io.h"
#include "harness/contract.h"

namespace minrepro {

// As checkClassTargets(path, ...); `batch_name` names the file in errors.
ContractResult checkClassTargets(const NamedTensors& batch, const TargetContract& contract,
                                 const std::string& batch_name);

}  // namespace minrepro
