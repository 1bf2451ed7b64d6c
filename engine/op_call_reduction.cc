#include "engine/op_call_reduction.h"

#include "core/process/containment.h"
#include "engine/stop_signals.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {
constexpr std::size_t kOpReductionTrials = 300;
constexpr double kOpReductionSeconds = 600;

std::string statusName(ExitStatus status) {
  switch (status) {
    case ExitStatus::Reduced:
      return "reduced";
    case ExitStatus::DoesNotReproduce:
      return "the recorded inputs did not fail in the reduction's own check";
    case ExitStatus::BudgetSpent:
      return "the budget was spent";
    case ExitStatus::Interrupted:
      return "interrupted";
    case ExitStatus::ArchiveDoesNotReproduce:
      return "its result did not reproduce";
    case ExitStatus::InternalError:
      return "an internal error";
    case ExitStatus::BadInput:
      return "its case was refused";
    case ExitStatus::TrialsCannotStart:
      return "its trials could not start";
  }
  return "exit status " + std::to_string(static_cast<int>(status));
}
}  // namespace

std::function<OpReduction(const fs::path& case_file, const OpReductionBounds& bounds)> opReducer(
    const ShrinkOptions& outer) {
  return [outer](const fs::path& case_file, const OpReductionBounds& bounds) {
    ShrinkOptions inner;
    inner.config = case_file;
    inner.python = outer.python;
    inner.trial_binary = outer.trial_binary;
    inner.quiet = true;
    inner.self_check = false;
    inner.op_repro = false;
    inner.archive = false;           // only its best case is wanted: no trace, neighbours or archive
    inner.checked_by_caller = true;  // the op step runs the reduced call alone as often as the self-check would
    // One trial at a time: a second fork server would import torch again
    // for a reduction of a few trials, while the self-check needs the slot.
    inner.jobs = 1;
    inner.slots = bounds.slots;
    // A bound on what a help beside the archive may cost; a spent budget
    // still leaves its best case so far.
    inner.max_trials = kOpReductionTrials;
    inner.max_seconds = bounds.seconds > 0 ? bounds.seconds : kOpReductionSeconds;
    inner.seconds_from_search = true;  // its Python's start and its original's check are not the search
    ShrinkTally tally;
    inner.tally = &tally;
    // The nested run tags its trials with its own work directory; the
    // outer run's tags resume afterwards.
    const std::string scope = trialScope();
    OpReduction reduction;
    try {
      const ExitStatus status = runShrink(inner, bounds.warm);
      const fs::path best = case_file.parent_path() / "work" / "best" / "batch.pt";
      const bool ended = status == ExitStatus::Reduced || status == ExitStatus::BudgetSpent;
      if (ended && fs::exists(best))
        reduction.inputs = best;
      else
        reduction.why_not = "the reduction ended: " + statusName(status);
    } catch (const std::exception& e) {
      reduction.why_not = e.what();
    }
    setTrialScope(scope);
    reduction.trials = tally.trials;
    return reduction;
  };
}

namespace {

// The op step's own reduction may take half the time the run had taken
// when it began (so the op step stays within about a third of the whole),
// but never less than this: a reduction of a few forked trials.
constexpr double kMinOpReductionSeconds = 5;

}  // namespace

std::function<OpRepro(const OpStart&)> opStepFor(const ShrinkOptions& options, const CaseConfig& config,
                                                 const FailureSignature& signature, const SelfCheckPlan& plan,
                                                 const Log& log, Executor* warm) {
  OpStep step;
  step.work = config.work_dir;
  step.python = trialPython(options, config);
  step.signature = signature;
  step.message_regex = config.expected.message_regex;
  step.plan = plan;
  step.timeout = config.timeout;
  step.stop = &stopAsked();
  step.reduce = opReducer(options);
  return [step, &log, warm](const OpStart& start) {
    OpStep with_archive = step;
    with_archive.warm = warm;
    with_archive.archive = start.archive;
    with_archive.recorded = start.recorded;
    with_archive.slots = start.slots;
    with_archive.reduction_seconds = std::max(kMinOpReductionSeconds, log.elapsedSeconds() / 2);
    return makeOpRepro(with_archive);
  };
}

}  // namespace minrepro
