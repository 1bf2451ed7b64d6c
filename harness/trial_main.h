// minrepro-trial: the built-in harness. Loads a candidate batch and a
// TorchScript model slice, runs forward and the configured loss, and fails
// the way the real program would (an uncaught c10 error: its type, its
// message and the operator that raised it on stderr, then SIGABRT).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engine/case_config.h"

namespace minrepro {

int trialMain(int argc, char** argv);

// For a fork server's parent (harness/fork_server_main.cc): reads the model
// file's bytes once; trialMain in its children then loads the model from
// those bytes (same bytes, same loader) instead of reading the file again.
// The file is read from disk after all when its size or mtime changed.
void preloadModelFile(const std::string& path);

// The built-in harness's model must load as TorchScript: a file that does
// not is bad input (BadInputError naming it and what to give instead), never
// a failure to reduce. Checked by shrink before any trial.
void checkModelLoads(const std::filesystem::path& model);

// The command line that runs the built-in harness on a batch.
std::vector<std::string> harnessArgv(const std::string& trial_binary, const HarnessTrial& harness,
                                     const std::string& batch_path);

}  // namespace minrepro
