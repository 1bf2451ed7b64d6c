// `minrepro shrink`: check that the original reproduces, run the reducer
// passes until none makes progress, confirm, and write the archive.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "engine/executor_config.h"
#include "engine/process.h"

namespace minrepro {

enum class ExitStatus : int {
  Reduced = 0,           // archive written
  InternalError = 1,
  BadInput = 2,          // case.yaml, batch or files wrong: nothing was run
  DoesNotReproduce = 3,  // the original does not fail (or not as expected)
  TrialsCannotStart = 4, // the trial program could not be started
  BudgetSpent = 5,       // --max-trials or --max-time ended the run; archive of the best so far written
  ArchiveDoesNotReproduce = 6,  // archive written, but repro.py did not fail the same way on its own (REPORT.md says how)
  Interrupted = 130,     // SIGINT, SIGTERM or SIGHUP; archive of the best so far written when there was one
};

struct ShrinkOptions {
  std::filesystem::path config;
  std::optional<std::filesystem::path> output;    // overrides case.yaml's output
  std::optional<std::filesystem::path> work_dir;  // overrides case.yaml's work_dir
  std::string trial_binary;                       // minrepro-trial; default beside minrepro
  std::string python = "/usr/bin/python3";        // for the environment record
  bool quiet = false;
  bool resume = false;           // continue from the journal in the work directory
  bool self_check = true;        // run the archive on its own before finishing (engine/self_check.h)
  std::size_t jobs = 1;          // trials at once
  std::size_t max_trials = 0;    // 0: no budget
  double max_seconds = 0;        // 0: no budget
  ExecutorOverrides executor;    // --executor, --devices, --trials-per-device
};

// Runs the whole job. `executor` null: a LocalExecutor.
ExitStatus runShrink(const ShrinkOptions& options, Executor* executor = nullptr);

// The minrepro-trial next to the running executable.
std::string defaultTrialBinary();

}  // namespace minrepro
