// minrepro-trial: the built-in harness. Loads a candidate batch and a
// TorchScript model slice, runs forward and the configured loss, and fails
// the way the real program would (an uncaught c10 error: its type, its
// message and the operator that raised it on stderr, then SIGABRT).
#pragma once

#include <string>
#include <vector>

#include "engine/case_config.h"

namespace minrepro {

int trialMain(int argc, char** argv);

// The command line that runs the built-in harness on a batch.
std::vector<std::string> harnessArgv(const std::string& trial_binary, const HarnessTrial& harness,
                                     const std::string& batch_path);

}  // namespace minrepro
