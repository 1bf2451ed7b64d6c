// Can a trial start at all under the case's memory limit?
//
// `memory_limit_mb: 1` made every trial die in the dynamic loader (SIGSEGV,
// or Python's "failed to map segment from shared object"), and that was
// reduced as if it were the bug. Before the original runs, when the case
// sets a limit, the trial's program starts once under it and once without
// it, doing nothing of the case: the built-in harness with no arguments,
// a Python command with `import torch`. When it ends otherwise under the
// limit, the limit stops trials from starting: the run stops (exit 4)
// saying so, instead of reducing the start-up failure. Other commands are
// not probed (minrepro cannot know what starting them means).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/case_config.h"

namespace minrepro {

// The reason to stop when the program cannot start under
// config.memory_limit_bytes but can without it; nothing when it can, when
// no limit is set, or when the trial's program is not probed. Probes run as
// plain processes in `scratch`.
std::optional<std::string> memoryLimitStopsStart(const CaseConfig& config, const std::string& trial_binary,
                                                 const std::filesystem::path& scratch);

}  // namespace minrepro
