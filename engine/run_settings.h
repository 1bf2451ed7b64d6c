// What a run's options and case say about where and how its parts run:
// the trials' backend and the environment REPORT.md records, and whether
// the self-check and the op step run (they run repro.py on this machine,
// which is the trials' configuration only when the trials ran here too:
// core/executor_kinds.def's on_this_machine). Read by the conductor
// (engine/shrink.cc), which then only conducts.
#pragma once

#include <string>

#include "core/case_config.h"
#include "engine/archive/report.h"
#include "engine/shrink.h"

namespace minrepro {

// LibTorch's and the trials' Python's versions, and the trials' backend.
KeyValues probeEnvironment(const ShrinkOptions& options, const CaseConfig& config);

// Why the archive is not checked on its own, or "" when it is (an
// interruption or a spent budget skip it too: engine/archive/reproducer.h).
std::string selfCheckSkipped(const ShrinkOptions& options, const CaseConfig& config);

// Whether the self-check's runs, from the extracted archive, are the final
// confirmation: both run the minimal case as plain processes in the normal
// configuration, so one of them is enough. Else (no archive, no self-check,
// trials off this machine) the confirmation runs on its own after the search.
bool selfCheckConfirms(const ShrinkOptions& options, const CaseConfig& config);

// Why the failing operator call is not looked for, or "" when it is.
std::string opStepSkipped(const ShrinkOptions& options, const CaseConfig& config);

}  // namespace minrepro
