// What one run of the case is, as a process: argv, environment and limits.
// Built in one place for shrink's trials (engine/oracle.h) and compare's
// variants, so that a variant differs from a trial only by its change.
#pragma once

#include <cstddef>
#include <filesystem>
#include <set>
#include <string>

#include "core/case_config.h"
#include "core/process/process.h"

namespace minrepro {

struct TrialInput {
  std::filesystem::path batch;         // the batch file the run reads ({batch})
  std::filesystem::path dir;           // its work directory ({workdir})
  std::set<std::string> branches_off;  // optional branches switched off (engine/case_branches.h)
  std::size_t number = 0;              // MINREPRO_TRIAL: a trial's own seed, if it wants one
};

// The harness's or the command's argv (branches applied, placeholders
// substituted), the command's env, the determinism switches (seed, trial
// number, deterministic algorithms) and the case's timeout and memory limit.
// Diagnostic variables are the caller's choice (engine/diagnostics.h): a
// search trial may get them, a confirmation never.
TrialSpec trialSpecFor(const CaseConfig& config, const std::string& trial_binary, const TrialInput& input);

// {batch}, {workdir} and {case_dir} in one argv element.
std::string substitutePlaceholders(std::string arg, const std::filesystem::path& batch,
                                   const std::filesystem::path& work_dir, const std::filesystem::path& case_dir);

// Whether a program (argv[0]: a name or a path) is a Python interpreter
// ("python", "python3", "/venv/bin/python3.11"): such a trial can run in
// the Python fork server, and the archive's repro.py runs it as the Python
// that runs repro.py (sys.executable), not as the reporter's path.
bool isPythonProgram(const std::string& program);

// The minrepro-trial beside the running executable.
std::string defaultTrialBinary();

}  // namespace minrepro
