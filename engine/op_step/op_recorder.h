// The op recorder (harness/python/op_recorder): a TorchDispatchMode loaded
// into every Python process of a run through PYTHONPATH's sitecustomize,
// which writes each failing call (call.txt and inputs.pt) to a directory.
// What a process is given to load it, and which failures it can explain.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/failure_signature.h"

namespace minrepro {

// The op recorder's directory (harness/python/op_recorder, copied beside the
// binaries by the build); "" when neither copy exists.
std::string opRecorderDir();

// What a Python process is given to load the op recorder: its directory
// first on PYTHONPATH (`pythonpath` after it: the trial's own, else this
// process's), where to write, whether to note each call before it runs
// (only a fatal signal needs it: a write per call), and whether to look
// for the first call that makes a NaN or an inf (a non-finite failure: a
// check of every call's outputs).
std::map<std::string, std::string> recorderEnvironment(const std::filesystem::path& record_dir, bool note_calls,
                                                       const std::optional<std::string>& pythonpath = std::nullopt,
                                                       bool first_non_finite = false);

// Why no single operator call explains a failure of this family (a
// timeout, an exit status of the program's own), or "" when one can.
std::string callOutOfReach(FailureFamily family);

// Whether the recorder can find the call of a failure of this family from
// a run that carried it (a fatal signal needs a second run of its own).
bool recorderCanRide(FailureFamily family);

}  // namespace minrepro
