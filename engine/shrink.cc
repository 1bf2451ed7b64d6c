#include "engine/shrink.h"

#include <future>

#include "core/disk_space.h"
#include "core/process/containment.h"
#include "core/process/process.h"
#include "engine/archive/output_guard.h"
#include "engine/archive/report_html.h"
#include "engine/archive/reproducer.h"
#include "engine/archive/scrub.h"
#include "engine/case_check.h"
#include "engine/diagnostics.h"
#include "engine/executors/fork_server.h"
#include "engine/op_step/op_step.h"
#include "engine/oracle.h"
#include "engine/original_check.h"
#include "engine/pipeline.h"
#include "engine/plain_process_check.h"
#include "engine/run_settings.h"
#include "engine/start_probe.h"
#include "engine/stop_signals.h"
#include "engine/trial_executors.h"
#include "engine/trial_spec.h"
#include "engine/work_dir.h"
#include "harness/case_inference.h"

namespace fs = std::filesystem;

namespace minrepro {

ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor,
                           const ForkServerExecutor* forked);

ExitStatus runShrink(const ShrinkOptions& options, Executor* executor) {
  CaseConfig config = loadCase(options.config, options.case_dir);
  completeCase(config);  // no samples section: inferred from the batch, as init does
  useThisMachinesPython(options, config);
  if (options.output) config.output = fs::absolute(*options.output);
  if (options.work_dir) config.work_dir = fs::absolute(*options.work_dir);
  if (options.materialize_best) return materializeBest(config, options.quiet);
  // Local processes (fork servers, a device each) or Slurm jobs, checked
  // before anything runs: engine/trial_executors.h.
  const auto stack =
      executor ? nullptr
               : makeTrialExecutors(config, options.executor,
                                    options.trial_binary.empty() ? defaultTrialBinary() : options.trial_binary,
                                    options.jobs);
  if (stack && options.slots) stack->push(std::make_unique<SlotExecutor>(stack->top(), *options.slots));
  // An executor given (the op step's warm Python) shares the slots too.
  std::optional<SlotExecutor> slotted;
  if (executor && options.slots) slotted.emplace(*executor, *options.slots);
  Executor& chosen = slotted ? *slotted : executor ? *executor : stack->top();
  return runShrinkLoaded(options, config, chosen, stack ? stack->forkServers() : nullptr);
}

namespace {

constexpr double kLiveReportSeconds = 5;

// The case file as the user would type it from here (minrepro-work/case.yaml
// in a zero-config run), its full path when it lies elsewhere.
std::string shownPath(const fs::path& file) {
  std::error_code ec;
  const fs::path relative = fs::absolute(file, ec).lexically_relative(fs::current_path(ec));
  return !ec && !relative.empty() && *relative.begin() != ".." ? relative.string() : file.string();
}

// What the steps of one run share (runShrinkLoaded below), in the order
// they come to exist: the checked case, the claimed work directory, the
// log and journal, the oracle; then what the search found.
struct Run {
  Run(const ShrinkOptions& o, CaseConfig& c, Executor& e, const ForkServerExecutor* f)
      : options(o), config(c), executor(e), forked(f), log(o.quiet) {}

  const ShrinkOptions& options;
  CaseConfig& config;
  Executor& executor;
  const ForkServerExecutor* forked;
  std::unique_ptr<BatchStore> batch;
  DiagnosticPlan diagnostic;
  std::optional<WorkDirLock> lock;
  Log log;
  std::optional<Journal> journal;
  std::shared_future<KeyValues> environment;
  std::optional<TrialOracle> oracle;
  Timeline timeline;  // every answer, for REPORT.html (live while the run goes on)
  Selection all, best;
  // What the search found, for REPORT.md.
  ExitStatus status = ExitStatus::Reduced;
  std::string incomplete;  // why the run stopped before its end ("" when it did not)
  bool confirmed = false;
  bool searched_forked = false;  // the search's trials were forked children (a plain re-search may follow)
  std::string processes = "plain processes (no fork server applies to this trial)";
  FreshMinimality fresh_minimality;
  std::size_t plain_passes = 0;  // of the original, run as plain processes (the self-check's evidence)
  double live_report_at = -1e9;  // when REPORT.html was last written live (the first round writes it)
  // The torch versions that differ from the captured ones, said once the
  // original reproduces (not after an overnight search), for REPORT.md too.
  std::optional<std::vector<std::string>> torch_warnings;

  std::string trialBinary() const { return options.trial_binary.empty() ? defaultTrialBinary() : options.trial_binary; }
};

// Everything about the case that can be wrong, before anything is written;
// then the work directory claimed (lock, leftovers of a killed run), the
// log and the journal opened.
void openRun(Run& r) {
  checkPassNames(r.config);
  r.batch = BatchStore::open(r.config);
  checkWorkDirAndModel(r.config);
  checkHarnessKeys(r.config, *r.batch);
  r.diagnostic = planDiagnostics(r.config);  // trial.diagnostic: on without a backend is bad input
  makeWorkDir(r.config.work_dir);
  checkArchiveOutput(r.config, r.options.force);  // after the work directory is made: the archive may go into it
  r.lock.emplace(r.config.work_dir);              // before the journal and the log are touched
  const std::size_t leftovers = cleanUpAfterKilledRun(r.config.work_dir);
  removePlantedLinks(r.config.work_dir);
  removeStalePartials(r.config);
  checkRoomForTheRun(r.config, r.options.jobs);
  r.log.setProgress(r.options.progress, r.options.progress_seconds);
  r.log.setScreenFilter(terminalScrubber(r.config));
  r.log.openFile(r.config.work_dir / "minrepro.log");
  r.journal.emplace(r.config.work_dir, runIdentity(r.config), r.options.resume);
  if (r.journal->movedEarlierAside())
    r.log.info("an earlier run's journal in " + r.config.work_dir.string() +
               " was moved to journal.txt.old: this run starts afresh (--resume would have gone on from it)");
  for (const std::string& note : r.config.inference_notes) r.log.info("inferred from the batch: " + note);
  if (leftovers > 0)
    r.log.info("killed " + std::to_string(leftovers) +
               " process(es) that the trials of a run killed before its "
               "end had left running");
}

// The environment record imports torch in a Python process (~2 s here):
// started now, it runs beside the trials instead of after them.
void startEnvironmentRecord(Run& r) {
  r.environment = std::async(r.options.archive ? std::launch::async : std::launch::deferred, [options = r.options,
                                                                                              config = r.config] {
                    return probeEnvironment(options, config);
                  }).share();
}

// The work directory's REPORT.html while the run goes on, at most every
// few seconds (rendering reads only the timeline): where the run stands, the
// reduction drawn so far, and the pass's own estimate of what it has left,
// said to be an estimate.
void writeLiveReport(Run& r) {
  const double now = r.log.elapsedSeconds();
  if (now - r.live_report_at < kLiveReportSeconds) return;
  r.live_report_at = now;
  const Timeline& t = r.timeline;
  const OracleStats& s = r.oracle->stats();
  const std::int64_t samples = t.steps().empty() ? r.batch->sampleCount() : t.steps().back().samples;
  const std::string status =
      liveStatus(samples, r.batch->sampleCount(), s.trials, s.trials + s.replayed, now, t.estimate());
  writeFileAtomically(r.config.work_dir / "REPORT.html", renderReportHtml(r.config, {nullptr, &t, {}, "", status}));
}

// The oracle, with the run's budget, and the best case it has seen.
void makeOracle(Run& r) {
  std::string reducers;
  for (const auto& name : r.config.reducers) reducers += " " + name;
  r.log.info(
      "case " + shownPath(r.config.case_file) + ": " + std::to_string(r.batch->sampleCount()) +
      " samples; reducers:" + reducers +
      (r.options.resume ? "; resuming from " + std::to_string(r.journal->loadedTrials()) + " journaled trials" : ""));
  r.oracle.emplace(r.config, *r.batch, r.executor, r.trialBinary(), r.log, &*r.journal,
                   RunLimits{r.options.max_trials, r.options.max_seconds, r.options.seconds_from_search, &stopAsked()},
                   r.options.jobs);
  r.oracle->setDiagnosticEnvironment(r.diagnostic.env);
  r.oracle->setTimeline(&r.timeline);
  r.log.info("diagnostic variables for the trials: " + r.diagnostic.describe() +
             "; the final confirmation runs without them");
  r.all = r.best = fullSelection(*r.batch);
  r.oracle->onBetter([&r](const Selection& s) { r.best = s; });
  r.oracle->onRound([&r] {
    writeLiveReport(r);
    if (!takeBestAsked()) return;
    r.log.info("SIGUSR1: wrote the best case so far to " +
               writeBestSoFar(r.config, *r.batch, r.best).parent_path().string());
  });
}

// With a job slot to spare, the first plain run of the original (the
// comparison with forked runs) starts at once, beside the forked runs,
// which keep the other slots; it is judged when they have ended. One plain
// run failing alike settles the comparison with three forked failures
// (engine/plain_process_check.h), so the comparison then costs no wall
// time. Not on --resume: the journal may hold that run's result already.
ExitStatus originalBesidePlainRun(Run& r, bool forks, OriginalEstimate& original) {
  const bool beside = forks && !r.options.checked_by_caller && r.options.jobs > 1 && !r.options.resume;
  if (!beside) return originalFailsAsExpected(r.config, *r.batch, *r.oracle, r.all, r.log, original);
  r.oracle->reserveSlots(1);
  auto plain = r.oracle->startFreshOriginals(r.all, 1);
  struct Unreserve {
    TrialOracle& oracle;
    ~Unreserve() { oracle.reserveSlots(0); }
  } unreserve{*r.oracle};
  const ExitStatus s = originalFailsAsExpected(r.config, *r.batch, *r.oracle, r.all, r.log, original);
  r.oracle->finishFreshOriginals(r.all, plain.get());
  return s;
}

// The original, in forked and plain processes: Reduced when the search may
// start, else the status the run ends with.
ExitStatus checkTheOriginal(Run& r, bool forks) {
  r.timeline.startPass("original", r.log.elapsedSeconds());
  OriginalEstimate original;
  ExitStatus s = originalBesidePlainRun(r, forks, original);
  if (s == ExitStatus::Reduced && !r.options.checked_by_caller)
    s = checkDependsOnBatch(r.config, *r.batch, *r.oracle, r.executor, r.all, r.log);
  if (s != ExitStatus::Reduced) {
    if (!logTorchMismatches(r.config, r.environment.get(), r.log).empty())
      r.log.info("note: the torch versions above differ; that may be why");
    return s;
  }
  if (r.options.archive)  // the environment record runs beside the original: ready, or nearly
    r.torch_warnings = logTorchMismatches(r.config, r.environment.get(), r.log);
  if (!r.config.fork_server) r.processes = "plain processes (trial.fork_server: false)";
  r.plain_passes = original.runs - original.failures;
  if (forks && r.options.checked_by_caller)
    r.processes = "forked children of a fork server (the caller runs the result in plain processes)";
  if (!forks || r.options.checked_by_caller) return s;
  const std::size_t streak =
      r.config.flaky.enabled ? r.oracle->rate().passesToReject(r.config.flaky.alpha, r.config.flaky.max_passes) : 1;
  const ForkComparison comparison =
      compareForkedWithFresh(r.all, original, *r.oracle, streak, static_cast<double>(r.config.timeout.count()) / 1000);
  r.plain_passes = comparison.plain.runs - comparison.plain.failures;
  r.processes = comparison.describe();
  // A server that refused to fork (threads, CUDA) leaves its trials to
  // plain processes: say so rather than claim children that never were.
  if (const ForkServerCounts counts = r.forked->counts(); counts.forked == 0 && counts.plain > 0)
    r.processes = "plain processes: the fork server could not be used (" +
                  (r.config.work_dir / "fork-server.log").string() + " says why); " + comparison.counts();
  r.log.info("trial processes: " + r.processes);
  const bool fails_only_forked =
      comparison.verdict == ForkVerdict::FailsOnlyForked || comparison.verdict == ForkVerdict::PlainTimesOut;
  return fails_only_forked ? ExitStatus::DoesNotReproduce : s;
}

// The passes, the plain 1-minimality check of a forked search, and the
// confirmation; a forked result that does not fail in a plain process is
// searched again from the original, the last case confirmed in plain
// processes, with plain processes only.
void search(Run& r, bool forks) {
  const bool searched_forked = r.searched_forked = forks && !r.oracle->freshProcessesOnly();
  const bool self_check_confirms = selfCheckConfirms(r.options, r.config);
  r.best = runPipeline(r.config, *r.batch, r.all, *r.oracle, r.log, !self_check_confirms, searched_forked);
  if (r.config.flaky.enabled) r.log.info("flakiness: charged as " + r.oracle->rate().verdict());
  if (searched_forked) {
    r.timeline.startPass("plain check", r.log.elapsedSeconds());
    r.best = checkMinimalityFresh(*r.batch, *r.oracle, r.best, r.fresh_minimality);
    r.log.info("1-minimality in plain processes: " + r.fresh_minimality.describe());
  }
  if (self_check_confirms) return;  // writeResult's self-check confirms (searchAgainPlain)
  r.timeline.startPass("confirmation", r.log.elapsedSeconds());
  r.confirmed = r.options.checked_by_caller || r.oracle->confirm(r.best);
  if (!r.confirmed && searched_forked) {
    r.log.info(
        "the minimal case of the forked trials did not fail again in a plain process; searching again "
        "from the original with plain processes only, in case it fails only in the fork server's children");
    r.processes +=
        "; the forked trials' minimal case did not fail in a plain process, so the search ran again "
        "from the original with plain processes only";
    r.best = runPipeline(r.config, *r.batch, r.all, *r.oracle, r.log);
    r.confirmed = r.oracle->confirm(r.best);
  }
  if (!r.confirmed) r.log.info("warning: " + notConfirmedWhy(*r.oracle, "when confirmed in fresh processes"));
}

// REPORT.md's account of the run, beside the archive's files.
ReductionSummary summaryOf(Run& r, const fs::path& minimal_batch, const NeighbourPlan& neighbours) {
  ReductionSummary summary =
      summarize(r.environment.get(), r.config, *r.batch, *r.oracle, r.best, minimal_batch, neighbours, r.log);
  summary.warnings = r.torch_warnings ? *r.torch_warnings : logTorchMismatches(r.config, summary.environment, r.log);
  if (r.incomplete.empty())
    if (const auto none_went = noSampleWentWarning(*r.batch, r.best.samples.size(), r.oracle->stats())) {
      r.log.info("warning: " + *none_went);
      summary.warnings.push_back(*none_went);
    }
  summary.confirmed = r.confirmed;
  summary.diagnostic = r.diagnostic.describe();
  summary.incomplete = r.incomplete;
  summary.processes = r.processes;
  summary.fresh_minimality = r.fresh_minimality.describe();
  summary.timeline = &r.timeline;
  return summary;
}

// The op step's own reduction may take half the time the run had taken
// when it began (so the op step stays within about a third of the whole),
// but never less than this: a reduction of a few forked trials.
constexpr double kMinOpReductionSeconds = 5;
// The failing call's inputs (`case_file`, written by the op step) reduced
// by a nested run of this conductor (opReductionOptions says how).
OpReduction reduceOpInputs(const ShrinkOptions& outer, const fs::path& case_file, const OpStep& step) {
  ShrinkTally tally;
  const ShrinkOptions inner = opReductionOptions(outer, case_file, step, &tally);
  // The nested run tags its trials with its own work directory; the outer
  // run's tags resume afterwards.
  const std::string scope = trialScope();
  OpReduction reduction;
  try {
    reduction = opReductionOutcome(runShrink(inner, step.warm), case_file);
  } catch (const std::exception& e) {
    reduction.why_not = e.what();
  }
  setTrialScope(scope);
  reduction.trials = tally.trials;
  return reduction;
}

// The op step (engine/op_step/op_step.h) on the archive just written, with
// the run's Python, failure and self-check plan; the call's inputs reduced
// within half the time the run had taken so far; the run's fork servers
// (a Python server starts on its first run when the trials ran none) serve
// its Python runs warm.
OpStepResult runOpStep(Run& r, const OpStart& start, const SelfCheckPlan& plan) {
  OpStep step;
  step.archive = start.archive;
  step.work = r.config.work_dir;
  step.python = trialPython(r.options, r.config);
  step.signature = r.oracle->reference();
  step.message_regex = r.config.expected.message_regex;
  step.plan = plan;
  step.timeout = r.config.timeout;
  step.stop = &stopAsked();
  step.env = start.env;
  step.reduction_seconds = std::max(kMinOpReductionSeconds, r.log.elapsedSeconds() / 2);
  step.recorded = start.recorded;
  step.slots = start.slots;
  step.warm = r.forked && r.config.fork_server ? &r.executor : nullptr;
  OpStepRun op(step, r.log, &r.timeline);
  if (const auto inputs = op.locate()) op.reduced(reduceOpInputs(r.options, *inputs, op.step()));
  return op.finish();
}

// The best case written, then the archive (engine/archive/reproducer.h),
// its self-check and, beside it, the op step.
ExitStatus writeResult(Run& r) {
  const fs::path minimal_batch = writeBestSoFar(r.config, *r.batch, r.best);
  if (!r.options.archive) {
    r.log.info("best case written to " + minimal_batch.string() + " (no archive asked for)");
    return r.status;
  }
  const NeighbourPlan neighbours = writeNeighbours(r.config, *r.batch, r.best);
  ReductionSummary summary = summaryOf(r, minimal_batch, neighbours);
  ArchiveJob job;
  job.minimal_batch = minimal_batch;
  job.neighbours = neighbours;
  job.plain_passes = r.plain_passes;
  job.python = trialPython(r.options, r.config);
  job.skip_self_check = selfCheckSkipped(r.options, r.config);
  job.stop = &stopAsked();
  job.skip_op_step = opStepSkipped(r.options, r.config);
  if (job.skip_op_step.empty()) job.recorder = recorderRide(r.config, r.oracle->reference().family);
  job.jobs = r.options.jobs;
  job.force = r.options.force;
  job.confirmation_is_self_check = selfCheckConfirms(r.options, r.config);
  job.timeline = &r.timeline;
  const SelfCheckPlan plan = planSelfCheck(r.oracle->rate(), r.config.flaky, r.plain_passes, r.best.samples.size());
  if (!plan.require_every_run) summary.flaky_rate = r.oracle->rate().estimate();
  ArchiveStep archive(r.config, *r.oracle, r.best, job, summary, r.log);
  archive.write(r.status);
  if (const auto start = archive.opStart()) archive.opStepDone(runOpStep(r, *start, plan));
  const ExitStatus status = archive.finish();
  r.confirmed = summary.confirmed;
  return status;
}

// The self-check is the confirmation (selfCheckConfirms): when the minimal
// case of forked trials does not fail on its own as a plain process, the
// search runs again from the original with plain processes only, in case it
// fails only in the fork server's children, and the archive is written anew.
ExitStatus searchAgainPlain(Run& r) {
  r.log.info(
      "the minimal case of the forked trials did not fail again in the self-check's plain processes; searching "
      "again from the original with plain processes only, in case it fails only in the fork server's children");
  r.processes +=
      "; the forked trials' minimal case did not fail in a plain process, so the search ran again "
      "from the original with plain processes only";
  r.searched_forked = false;
  const double from = r.log.elapsedSeconds();
  try {
    r.best = runPipeline(r.config, *r.batch, r.all, *r.oracle, r.log, false);
    r.timeline.addPhase({"search again in plain processes", from, r.log.elapsedSeconds()});
  } catch (const RunStopped& e) {
    r.status = e.reason == RunStopped::Reason::Interrupted ? ExitStatus::Interrupted : ExitStatus::BudgetSpent;
    r.incomplete = e.what();
  }
  const ExitStatus status = writeResult(r);
  if (!r.confirmed) r.log.info("warning: " + notConfirmedWhy(*r.oracle, "in fresh processes"));
  return status;
}

// The run, step by step: the case checked and the work directory claimed,
// the oracle, the original, the search, the result written.
ExitStatus runSteps(Run& r) {
  const ShrinkOptions& options = r.options;
  CaseConfig& config = r.config;
  const ForkServerExecutor* forked = r.forked;
  openRun(r);
  StopOnSignals stop_on_signals;
  startEnvironmentRecord(r);
  makeOracle(r);
  // The trials a caller that runs shrink itself is told of, however the run ends.
  struct TallyOnReturn {
    const Run& r;
    ~TallyOnReturn() {
      if (r.options.tally) r.options.tally->trials = r.oracle->stats().trials + r.oracle->stats().replayed;
    }
  } tally_on_return{r};
  // Forked or not is decided from the trial itself, not from what ran, so
  // that a resumed run (whose first results are replayed) checks exactly
  // what the interrupted one did.
  const bool forks = forked && forked->routes(r.oracle->specFor(r.all, config.work_dir / "trials" / "preview"));
  // A memory limit too low for the program to start is not the bug (exit 4).
  if (auto why = memoryLimitStopsStart(config, r.trialBinary(), config.work_dir / "trials" / "start-probe"))
    throw TrialStartError(*why);
  try {
    const double original_from = r.log.elapsedSeconds();
    const ExitStatus s = checkTheOriginal(r, forks);
    r.timeline.addPhase({"original", original_from, r.log.elapsedSeconds()});
    if (s != ExitStatus::Reduced) return s;
    if (!options.checked_by_caller) {
      const std::vector<Speculated> first = openingCandidates(config, *r.batch, r.all, 1);
      checkHalves(*r.batch, *r.oracle, r.all, first.empty() ? r.all : first.front().selection, r.log);
    }
    const double search_from = r.log.elapsedSeconds();
    r.oracle->startSearchClock();
    search(r, forks);
    r.timeline.addPhase({"search", search_from, r.log.elapsedSeconds()});
  } catch (const DoesNotReproduceError& e) {  // the case is wrong (engine/case_check.h)
    r.log.info("error: " + std::string(e.what()));
    return ExitStatus::DoesNotReproduce;
  } catch (const RunStopped& e) {
    r.status = e.reason == RunStopped::Reason::Interrupted ? ExitStatus::Interrupted : ExitStatus::BudgetSpent;
    r.incomplete = e.what();
    if (!r.oracle->reference().failed()) {  // nothing failed yet: nothing to write
      r.log.info("stopping: " + r.incomplete + " before the original failed: no archive written");
      r.log.info(goOnLine(config, options.case_dir, options.zero_config_command, options.repeated_options));
      return r.status;
    }
    r.log.info("stopping: " + r.incomplete + "; writing the best case so far (possibly not minimal) to " +
               config.output.string());
  }
  const ExitStatus status = writeResult(r);
  if (status == ExitStatus::Interrupted || status == ExitStatus::BudgetSpent)
    r.log.info(goOnLine(config, options.case_dir, options.zero_config_command, options.repeated_options));
  const bool not_confirmed = status == ExitStatus::ArchiveDoesNotReproduce && !r.confirmed;
  if (not_confirmed && r.searched_forked && selfCheckConfirms(options, config)) return searchAgainPlain(r);
  return status;
}

}  // namespace

// A file system that fills up during the run ends it (exit 4) with the
// command that goes on once there is room: the journal keeps the trials.
ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor,
                           const ForkServerExecutor* forked) {
  Run r(options, config, executor, forked);
  try {
    return runSteps(r);
  } catch (const DiskFullError& e) {
    if (!r.journal) throw;
    throw Error(e.status(),
                std::string(e.what()) + "; then " +
                    goOnLine(config, options.case_dir, options.zero_config_command, options.repeated_options));
  }
}

}  // namespace minrepro
