// What `minrepro shrink` is asked to do: the command line's options, and
// what a caller that runs shrink itself (the op step's nested run) sets.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/build_info.h"
#include "core/case_config.h"
#include "core/errors.h"
#include "core/executor_config.h"
#include "core/process/job_slots.h"
#include "core/process/process.h"
#include "engine/log.h"

namespace minrepro {

// What a run did, for a caller that runs shrink itself (the op step).
struct ShrinkTally {
  std::size_t trials = 0;  // trials run, replayed ones included
};

struct ShrinkOptions {
  std::filesystem::path config;
  std::filesystem::path case_dir;                // the case directory when not config's own (zero-config start)
  std::vector<std::string> zero_config_command;  // a zero-config start's command after --, as typed
  // The command line's options that a resumed run repeats, as typed
  // (--no-op-repro, --jobs 4; not the case, places, --resume or budgets).
  std::vector<std::string> repeated_options;
  std::optional<std::filesystem::path> output;    // overrides case.yaml's output
  std::optional<std::filesystem::path> work_dir;  // overrides case.yaml's work_dir
  std::string trial_binary;                       // minrepro-trial; default beside minrepro
  std::string python = kDefaultPython;            // for the environment record and the self-check
  // --python was given: it runs the self-check and the op step even when the
  // trial's program is a Python of its own (else that one does: trialPython).
  bool python_given = false;
  bool quiet = false;
  bool resume = false;                         // continue from the journal in the work directory
  bool force = false;                          // --force: the archive may replace a file minrepro did not write
  ProgressMode progress = ProgressMode::Auto;  // --progress (engine/log.h)
  double progress_seconds = 30;                // --progress-every
  bool materialize_best = false;               // only write work_dir/best/ from the journal, run nothing
  bool self_check = true;            // run the archive on its own before finishing (engine/archive/self_check.h)
  std::size_t jobs = 1;              // trials at once
  std::size_t max_trials = 0;        // 0: no budget
  double max_seconds = 0;            // 0: no budget
  bool seconds_from_search = false;  // max_seconds counts from the search's start (RunLimits)
  ExecutorOverrides executor;        // --executor, --devices, --trials-per-device
  bool op_step = true;               // locate the failing operator call (engine/op_step/op_step.h); --no-op-repro
  bool archive = true;               // false: end at work_dir/best/ (the op step's reduction of a call's inputs)
  // A case minrepro wrote itself, whose result its caller runs again (the op
  // step's): no batch-dependence probe (the caller's command, on inputs it
  // just saw fail), no comparison of forked with plain runs of the original
  // and no final confirmation (the caller's own plain runs confirm).
  bool checked_by_caller = false;
  // Slots every trial holds while it runs, shared with the caller's own
  // runs (the op step's reduction beside the self-check); null: --jobs alone.
  JobSlots* slots = nullptr;
  ShrinkTally* tally = nullptr;  // set: filled when the run ends
};

}  // namespace minrepro
