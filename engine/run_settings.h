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
#include "engine/shrink_options.h"

namespace minrepro {

// The Python that runs the archive's repro.py in the self-check, the op
// step and the environment record: --python when given, else the trial
// command's own interpreter when its program is a Python that exists (the
// user's venv, with the user's packages: repro.py runs the command with
// whatever Python runs it), else the build's default.
std::string trialPython(const ShrinkOptions& options, const CaseConfig& config);

// The case's trial command names a Python that is not on this machine (an
// archive's case names the Python its trials ran with, the reporter's
// venv): --python runs the trials instead; without it, BadInputError
// naming the program, before anything runs, rather than trials that
// "could not start".
void useThisMachinesPython(const ShrinkOptions& options, CaseConfig& config);

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
