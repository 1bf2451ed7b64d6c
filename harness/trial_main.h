// minrepro-trial: the built-in harness. Loads a candidate batch and a
// TorchScript model slice, runs forward and the configured loss, and fails
// the way the real program would (an uncaught c10 error: its type, its
// message and the operator that raised it on stderr, then SIGABRT).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/case_config.h"

namespace minrepro {

int trialMain(int argc, char** argv);

// For a fork server's parent (harness/fork_server_main.cc): reads the model
// file's bytes once; trialMain in its children then loads the model from
// those bytes (same bytes, same loader) instead of reading the file again.
// The file is read from disk after all when its size or mtime changed.
void preloadModelFile(const std::string& path);

// For a fork server's parent started with --preload-case: reads the case's
// original batch once (as shrink does). Throws (BadInputError) when it cannot,
// and the server then does not start: its trials run as plain processes.
void preloadCaseBatch(const std::filesystem::path& case_file);
// In the server's child, before trialMain: the trial's batch is the
// candidate `selection_text` (reducers/selection_text.h) cut from that
// original in memory, laid out as shrink would write it, instead of the file
// its --batch names. Throws std::runtime_error for a malformed selection.
void useCandidateOfPreloaded(const std::string& selection_text);

// The built-in harness's model must load as TorchScript: a file that does
// not is bad input (BadInputError naming it and what to give instead), never
// a failure to reduce. Checked by shrink before any trial.
void checkModelLoads(const std::filesystem::path& model);

// The command line that runs the built-in harness on a batch.
std::vector<std::string> harnessArgv(const std::string& trial_binary, const HarnessTrial& harness,
                                     const std::string& batch_path);

}  // namespace minrepro
