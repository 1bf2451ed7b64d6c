#include "engine/shrink.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <future>
#include <fstream>
#include <iomanip>

#include <iostream>
#include <set>
#include <sstream>

#include "engine/apart.h"
#include "engine/archive.h"
#include "engine/branches.h"
#include "engine/bundle.h"
#include "engine/fresh_check.h"
#include "engine/diagnostics.h"
#include "engine/pipeline.h"
#include "engine/journal.h"
#include "engine/neighbours.h"
#include "engine/executor_stack.h"
#include "engine/fork_server.h"
#include "engine/oracle.h"
#include "engine/report.h"
#include "engine/repro_cpp.h"
#include "engine/self_check.h"
#include "engine/verify.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string defaultTrialBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return (self.parent_path() / "minrepro-trial").string();
  return "minrepro-trial";
}

namespace {

// The original must fail, and fail as the user expects when they said how.
// A pass of a flaky original is not "does not reproduce": it runs until
// enough failures are seen or the budget of runs is spent.
ExitStatus checkOriginal(const CaseConfig& config, const CaseView& view, TrialOracle& oracle, const Selection& all,
                         Log& log, OriginalEstimate& estimate) {
  // Free job slots already try what the search will ask first.
  estimate = oracle.estimateOriginal(
      all, [&](std::size_t max, bool) { return openingCandidates(config, view, all, max); });
  if (estimate.failures == 0) {
    const auto& others = oracle.stats().other_bugs;
    std::string why = "the original case does not reproduce: " + std::to_string(estimate.runs) + " run(s), none failed";
    if (!others.empty())
      why = "the original fails, but not as case.yaml's failure section expects (it failed with: " +
            others.begin()->first + "). Fix the failure section or remove it";
    else
      why += " (check that the batch is the failing one and that the trial runs the code that failed)";
    log.info("error: " + why);
    return ExitStatus::DoesNotReproduce;
  }
  log.info("original reproduces: " + oracle.reference().summary() + " (" + oracle.firstFailureExit() + "); " +
           std::to_string(estimate.failures) + " of " + std::to_string(estimate.runs) + " runs failed the same way");
  return ExitStatus::Reduced;
}

KeyValues smallIntegerValues(const BatchStore& batch, const std::vector<TensorInfo>& tensors) {
  KeyValues values;
  for (const auto& t : tensors) {
    std::int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    if (numel > 0 && numel <= 64 && t.dtype.rfind("int", 0) == 0)
      values.emplace_back(t.name, formatList(batch.integerValues(t.name, 64)));
  }
  return values;
}

// 1-D integer tensors with a sample axis (one value per sample), not the ids.
std::vector<SampleValues> perSampleIntegers(const CaseConfig& config, const BatchStore& batch,
                                            const std::vector<TensorInfo>& tensors) {
  std::vector<SampleValues> out;
  for (const auto& t : tensors) {
    const bool integral = t.dtype.rfind("int", 0) == 0 || t.dtype.rfind("uint", 0) == 0 || t.dtype == "bool";
    if (!integral || !t.has_sample_axis || t.shape.size() != 1 || t.name == config.sample_ids) continue;
    out.push_back({t.name, batch.integerValues(t.name, static_cast<std::size_t>(batch.sampleCount()))});
  }
  return out;
}

KeyValues probeEnvironment(const ShrinkOptions& options, const CaseConfig& config) {
  KeyValues env = libtorchEnvironment();
  TrialSpec spec;
  spec.argv = {options.python, "-c",
               "import sys, platform, torch\n"
               "print('Python', platform.python_version())\n"
               "print('PyTorch', torch.__version__)\n"
               "print('PyTorch CUDA', torch.version.cuda or 'none')\n"
               "print('PyTorch HIP (ROCm)', torch.version.hip or 'none')\n"};
  spec.work_dir = config.work_dir / "probe";
  spec.timeout = std::chrono::seconds(60);
  const TrialOutcome out = LocalExecutor().run(spec);
  std::istringstream lines(out.stdout_text);
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.rfind(' ');
    if (space != std::string::npos) env.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  env.emplace_back("Backend of the trials", "CPU");
  std::error_code ec;
  fs::remove_all(spec.work_dir, ec);
  return env;
}

// The neighbour batches (GUIDE.md §6), written beside the minimal batch in
// the work directory, with their ids and expected counts.
NeighbourPlan writeNeighbours(const CaseConfig& config, const BatchStore& batch, const Selection& minimal) {
  const std::vector<std::int64_t> lengths = batch.sampleLengths();
  NeighbourPlan plan = planNeighbours(batch.sampleCount(), minimal.samples, lengths.empty() ? nullptr : &lengths);
  const auto ids = batch.sampleIds();
  for (auto& n : plan.cases) {
    const fs::path file = config.work_dir / n.file;
    fs::create_directories(file.parent_path());
    batch.writeSubset(n.samples, file);
    for (auto i : n.samples) n.ids.push_back(ids[static_cast<std::size_t>(i)]);
    n.processed = expectedProcessed(config, file);
  }
  return plan;
}

std::vector<ArchiveEntry> archiveEntries(const CaseConfig& config, const fs::path& minimal_batch,
                                         const ReductionSummary& summary, const NeighbourPlan& neighbours,
                                         const BundlePlan& bundle) {
  std::vector<ArchiveEntry> entries;
  entries.push_back({"REPORT.md", renderReport(config, summary)});
  entries.push_back({"repro.py", renderReproPy(config, summary.signature), true});
  entries.push_back({"case.yaml", renderCase(config, config.base_dir, "batch.pt", "model.pt")});
  entries.push_back(manifestEntry(config, minimal_batch, summary.signature, neighbours));  // for minrepro verify
  entries.push_back({"batch.pt", readFileBytes(minimal_batch)});
  for (const auto& n : neighbours.cases) entries.push_back({n.file, readFileBytes(config.work_dir / n.file)});
  if (config.harness) {
    entries.push_back({"model.pt", readFileBytes(config.harness->model)});
    for (auto& e : reproCppEntries(*config.harness, summary.signature)) entries.push_back(std::move(e));
  }
  // The command's own files and those the trial reads (engine/bundle.h);
  // a script the command runs directly keeps its executable bit. A user's
  // file named like one of the archive's own (repro.py) cannot travel: the
  // self-check then tells.
  std::set<std::string> names;
  for (const auto& e : entries) names.insert(e.name);
  for (const auto& f : bundle.files) {
    if (!names.insert(f.archive_name).second) continue;
    std::error_code ec;
    const bool executable = (fs::status(f.source, ec).permissions() & fs::perms::owner_exec) != fs::perms::none;
    entries.push_back({f.archive_name, readFileBytes(f.source), executable});
  }
  return entries;
}

// One plain run of the minimal case with the file tracer preloaded: the
// files the trial reads (engine/bundle.h). Command trials only: the
// built-in harness reads the batch and the model, which the archive has.
BundlePlan traceBundleOrThrow(const CaseConfig& config, TrialOracle& oracle, const Selection& best, Log& log) {
  std::vector<fs::path> traced;
  const std::string library = fileTraceLibrary();
  if (config.command && library.empty())
    log.info("warning: libminrepro_filetrace.so not found beside minrepro: files the trial reads are not traced; "
             "only trial.files and the command's own files are bundled");
  if (config.command && !library.empty()) {
    const fs::path trace = config.work_dir / "file-trace.txt", dir = config.work_dir / "trace";
    std::error_code ec;
    fs::remove(trace, ec);
    // The tracer goes last: a library the trial preloads itself (an
    // allocator, a sanitizer's runtime, which must come first) stays first.
    std::string preload;
    if (const auto own = config.command->env.find("LD_PRELOAD"); own != config.command->env.end()) preload = own->second;
    else if (const char* inherited = std::getenv("LD_PRELOAD")) preload = inherited;
    preload += (preload.empty() ? "" : ":") + library;
    const TrialOutcome outcome = oracle.runUncounted(best, {{"LD_PRELOAD", preload}, {kFileTraceVariable, trace.string()}}, dir);
    traced = readTrace(trace);
    fs::remove_all(dir, ec);
    fs::remove(trace, ec);
    log.detail("file trace of the minimal case (" + describe(outcome) + "): " + std::to_string(traced.size()) +
               " file(s) read");
  }
  BundlePlan plan = planBundle(config, traced);
  std::string names;
  for (const auto& f : plan.files) names += (names.empty() ? "" : ", ") + f.archive_name;
  if (!plan.files.empty()) log.info("bundled with the archive, read by the trial: " + names);
  return plan;
}

BundlePlan traceBundle(const CaseConfig& config, TrialOracle& oracle, const Selection& best, Log& log) {
  try {
    return traceBundleOrThrow(config, oracle, best, log);
  } catch (const std::exception& e) {
    // The trace is a help, not the run's result: without it the command's own files still travel.
    log.info(std::string("warning: the files the trial reads could not be traced (") + e.what() +
             "); only trial.files and the command's own files are bundled");
    return planBundle(config, {});
  }
}

// Why the archive is not checked on its own, or "" when it is.
std::string selfCheckSkipped(const ShrinkOptions& options, const CaseConfig& config, ExitStatus status) {
  if (status == ExitStatus::Interrupted) return "the run was interrupted";
  if (status == ExitStatus::BudgetSpent) return "the budget was spent";
  if (!options.self_check) return "--no-self-check";
  if (effectiveExecutor(config, options.executor).kind == ExecutorKind::Slurm)
    return "the trials ran as Slurm jobs; repro.py may need the nodes' devices";
  return "";
}

}  // namespace

namespace {

std::atomic<bool> g_stop{false};

extern "C" void requestStop(int) { g_stop.store(true); }
extern "C" void carryOn(int) {}

// SIGINT, SIGTERM and SIGHUP (the terminal of an overnight run went away):
// stop launching, kill running trials (their groups), write the best so far.
// SIGPIPE (stdout or stderr closed under us: `| tee` gone) must not end the
// run either way: writes then fail and the log file keeps everything. Both
// are handlers, not SIG_IGN, so that trials start with the default
// dispositions (exec resets handled signals; ignored ones would stay
// ignored). Restores the previous handlers when the run ends.
class StopOnSignals {
 public:
  StopOnSignals() {
    g_stop.store(false);
    struct sigaction stop{}, carry_on{};
    stop.sa_handler = requestStop;
    carry_on.sa_handler = carryOn;
    sigemptyset(&stop.sa_mask);
    sigemptyset(&carry_on.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i)
      ::sigaction(kSignals[i], kSignals[i] == SIGPIPE ? &carry_on : &stop, &old_[i]);
  }
  ~StopOnSignals() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr std::array<int, 4> kSignals{SIGINT, SIGTERM, SIGHUP, SIGPIPE};
  std::array<struct sigaction, 4> old_{};
};

// What identifies a run for --resume: the case file, the batch and the
// settings that change which trials are run.
std::string runIdentity(const CaseConfig& config) {
  std::ostringstream id;
  id << "case=" << contentHash(readFileBytes(config.case_file)) << " batch=" << contentHash(readFileBytes(config.batch))
     << " flaky=" << config.flaky.enabled << "/" << config.flaky.alpha;
  return id.str();
}

// The best case so far, always valid on disk: batch and case file each
// written to a temp file and renamed.
void writeBestSoFar(const CaseConfig& config, const BatchStore& batch, const Selection& best) {
  const fs::path dir = config.work_dir / "best";
  fs::create_directories(dir);
  batch.writeCandidate(best, dir / "batch.pt");
  const fs::path tmp = dir / "case.yaml.partial";
  {
    std::ofstream out(tmp);
    out << renderCase(bakeBranches(config, best.branches_off), config.base_dir, "batch.pt",
                      config.harness ? config.harness->model.string() : "");
  }
  fs::rename(tmp, dir / "case.yaml");
}

ReductionSummary summarize(KeyValues environment, const CaseConfig& config, const BatchStore& batch,
                           const TrialOracle& oracle, const Selection& minimal, const fs::path& minimal_batch) {
  ReductionSummary summary;
  summary.signature = oracle.reference();
  summary.exit_description = oracle.firstFailureExit();
  summary.original_samples = batch.sampleCount();
  summary.original_tensors = batch.describe();
  CaseConfig minimal_config = config;
  minimal_config.batch = minimal_batch;
  const auto reduced = BatchStore::open(minimal_config);
  summary.minimal_tensors = reduced->describe();
  summary.small_values = smallIntegerValues(*reduced, summary.minimal_tensors);
  const auto ids = batch.sampleIds();
  for (auto i : minimal.samples) summary.kept_ids.push_back(ids[static_cast<std::size_t>(i)]);
  summary.apart = describeApart(batch.sampleCount(), minimal.samples, summary.kept_ids,
                                perSampleIntegers(config, batch, summary.original_tensors));
  for (auto& line : describeReduction(batch, minimal, ids)) summary.apart.push_back(std::move(line));
  summary.stats = oracle.stats();
  summary.rate = oracle.rate();
  summary.flaky = config.flaky;
  summary.seed = config.seed;
  summary.environment = std::move(environment);
  summary.environment.emplace_back("Trial determinism", "MINREPRO_SEED=PYTHONHASHSEED=" + std::to_string(config.seed) +
                                                            ", MINREPRO_TRIAL=<trial number>, deterministic algorithms " +
                                                            (config.deterministic ? "on" : "off"));
  return summary;
}

// The archive, with the files the trial reads, then checked on its own as
// the maintainer will run it before the run says it is done; REPORT.md (the
// archive's first entry) records the outcome. Returns the run's status.
ExitStatus writeAndCheckArchive(const ShrinkOptions& options, const CaseConfig& config, TrialOracle& oracle,
                                const Selection& best, const fs::path& minimal_batch, const NeighbourPlan& neighbours,
                                std::size_t plain_passes, ReductionSummary& summary, ExitStatus status, Log& log) {
  const BundlePlan bundle = status == ExitStatus::Interrupted ? planBundle(config, {})
                                                              : traceBundle(config, oracle, best, log);
  if (g_stop.load() && status != ExitStatus::Interrupted) {
    status = ExitStatus::Interrupted;  // during the file trace: its list may be short
    log.info("stopping: interrupted while tracing the files the trial reads");
  }
  summary.bundled_from_outside = bundle.from_outside;
  summary.left_out = bundle.left_out;
  for (const auto& f : bundle.files) summary.bundled.push_back(f.archive_name);
  summary.self_check.skipped = selfCheckSkipped(options, config, status);
  summary.seconds = log.elapsedSeconds();
  const CaseConfig archived = withBundledPaths(bakeBranches(config, best.branches_off), bundle);
  std::vector<ArchiveEntry> entries = archiveEntries(archived, minimal_batch, summary, neighbours, bundle);
  writeTarGz(config.output, entries);
  log.info(std::string(summary.incomplete.empty() ? "reduced " : "stopped at ") + std::to_string(summary.original_samples) +
           " -> " + std::to_string(best.samples.size()) + " samples (ids " + formatList(summary.kept_ids) + ") in " +
           std::to_string(summary.stats.trials + summary.stats.replayed) + " trials; archive: " + config.output.string());
  if (summary.self_check.skipped.empty()) {
    log.info("checking the archive on its own: repro.py in plain processes, extracted into an empty directory");
    summary.self_check = checkArchiveAlone(
        config.output, planSelfCheck(oracle.rate(), config.flaky, plain_passes, best.samples.size()), options.python,
        config.timeout, &g_stop);
    if (g_stop.load()) status = ExitStatus::Interrupted;
    summary.seconds = log.elapsedSeconds();
    entries.front() = {"REPORT.md", renderReport(archived, summary)};
    writeTarGz(config.output, entries);
  }
  log.info("self-check: the archive " + summary.self_check.describe());
  if (summary.self_check.failed() && status == ExitStatus::Reduced) status = ExitStatus::ArchiveDoesNotReproduce;
  return status;
}

}  // namespace

ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor,
                           const ForkServerExecutor* forked);

ExitStatus runShrink(const ShrinkOptions& options, Executor* executor) {
  try {
    CaseConfig config = loadCase(options.config);
    if (options.output) config.output = fs::absolute(*options.output);
    if (options.work_dir) config.work_dir = fs::absolute(*options.work_dir);
    // Local processes (fork servers, a device each) or Slurm jobs, checked
    // before anything runs: engine/executor_stack.h.
    const auto stack = executor ? nullptr
                                : makeTrialExecutors(config, options.executor, options.trial_binary.empty()
                                                         ? defaultTrialBinary() : options.trial_binary, options.jobs);
    Executor& chosen = executor ? *executor : stack->top();
    return runShrinkLoaded(options, config, chosen, stack ? stack->forkServers() : nullptr);
  } catch (const CaseError& e) {
    std::cerr << "minrepro: error: " << e.what() << "\n";
    return ExitStatus::BadInput;
  } catch (const JournalError& e) {
    std::cerr << "minrepro: error: " << e.what() << "\n";
    return ExitStatus::BadInput;
  } catch (const TrialStartError& e) {
    std::cerr << "minrepro: error: " << e.what() << "\n";
    return ExitStatus::TrialsCannotStart;
  } catch (const std::exception& e) {
    std::cerr << "minrepro: internal error: " << e.what() << "\n";
    return ExitStatus::InternalError;
  }
}

ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor,
                           const ForkServerExecutor* forked) {
  const auto batch = BatchStore::open(config);
  // Before anything is written: trial.diagnostic: on without a backend is bad input.
  const DiagnosticPlan diagnostic = planDiagnostics(config);
  fs::create_directories(config.work_dir);
  const WorkDirLock lock(config.work_dir);  // before the journal and the log are touched
  Log log(options.quiet);
  log.openFile(config.work_dir / "minrepro.log");
  Journal journal(config.work_dir, runIdentity(config), options.resume);
  StopOnSignals stop_on_signals;
  // The environment record imports torch in a Python process (~2 s here):
  // started now, it runs beside the trials instead of after them.
  std::future<KeyValues> environment =
      std::async(std::launch::async, [options, config] { return probeEnvironment(options, config); });
  log.info("case " + config.case_file.filename().string() + ": " + std::to_string(batch->sampleCount()) +
           " samples; reducers:" + [&] { std::string r; for (auto& n : config.reducers) r += " " + n; return r; }() +
           (options.resume ? "; resuming from " + std::to_string(journal.loadedTrials()) + " journaled trials" : ""));
  TrialOracle oracle(config, *batch, executor, options.trial_binary.empty() ? defaultTrialBinary() : options.trial_binary,
                     log, &journal, RunLimits{options.max_trials, options.max_seconds, &g_stop}, options.jobs);
  oracle.setDiagnosticEnvironment(diagnostic.env);
  log.info("diagnostic variables for the trials: " + diagnostic.describe() +
           "; the final confirmation runs without them");
  const Selection all = fullSelection(*batch);
  Selection best = all;
  oracle.onBetter([&](const Selection& s) {
    best = s;
    writeBestSoFar(config, *batch, s);
  });

  ExitStatus status = ExitStatus::Reduced;
  std::string incomplete;
  bool confirmed = false;
  // Whether the trials run in fork servers: decided from the trial itself,
  // not from what ran, so that a resumed run (whose first results are
  // replayed) checks exactly what the interrupted one did.
  const bool forks = forked && forked->routes(oracle.specFor(all, config.work_dir / "trials" / "preview"));
  std::string processes = "plain processes (no fork server applies to this trial)";
  FreshMinimality fresh_minimality;
  std::size_t plain_passes = 0;  // of the original, run as plain processes (the self-check's evidence)
  try {
    OriginalEstimate original;
    if (ExitStatus s = checkOriginal(config, *batch, oracle, all, log, original); s != ExitStatus::Reduced) return s;
    if (!config.fork_server) processes = "plain processes (trial.fork_server: false)";
    plain_passes = original.runs - original.failures;
    if (forks) {
      const std::size_t streak =
          config.flaky.enabled ? oracle.rate().passesToReject(config.flaky.alpha, config.flaky.max_passes) : 1;
      const ForkComparison comparison = compareForkedWithFresh(all, original, oracle, streak);
      plain_passes = comparison.plain.runs - comparison.plain.failures;
      processes = comparison.describe();
      log.info("trial processes: " + processes);
      if (comparison.verdict == ForkVerdict::FailsOnlyForked) return ExitStatus::DoesNotReproduce;
    }
    best = runPipeline(config, *batch, all, oracle, log);
    if (forks && !oracle.freshProcessesOnly()) {
      best = checkMinimalityFresh(*batch, oracle, best, fresh_minimality);
      log.info("1-minimality in plain processes: " + fresh_minimality.describe());
    }
    confirmed = oracle.confirm(best);
    if (!confirmed) log.info("warning: the minimal case did not fail again when confirmed in fresh processes");
  } catch (const RunStopped& e) {
    status = e.reason == RunStopped::Reason::Interrupted ? ExitStatus::Interrupted : ExitStatus::BudgetSpent;
    incomplete = e.what();
    log.info("stopping: " + incomplete + "; writing the best case so far (possibly not minimal)");
    if (!oracle.reference().failed()) return status;  // nothing failed yet: nothing to write
  }

  const fs::path minimal_batch = config.work_dir / "minimal-batch.pt";
  // Nothing reduced: the archive carries the user's own file, the bytes its trials ran.
  if (selectionKey(best) == selectionKey(all)) fs::copy_file(config.batch, minimal_batch, fs::copy_options::overwrite_existing);
  else batch->writeCandidate(best, minimal_batch);
  const NeighbourPlan neighbours = writeNeighbours(config, *batch, best);
  ReductionSummary summary = summarize(environment.get(), config, *batch, oracle, best, minimal_batch);
  for (const auto& n : neighbours.cases)
    summary.neighbours.push_back("`" + n.file + "`: sample ids " + formatList(n.ids, 16) +
                                 (n.processed ? ", a correct run processes " + std::to_string(*n.processed) : ""));
  for (const auto& why : neighbours.skipped) summary.neighbours.push_back("not made: " + why);
  summary.confirmed = confirmed;
  summary.diagnostic = diagnostic.describe();
  summary.incomplete = incomplete;
  summary.processes = processes;
  summary.fresh_minimality = fresh_minimality.describe();
  return writeAndCheckArchive(options, config, oracle, best, minimal_batch, neighbours, plain_passes, summary, status,
                              log);
}

}  // namespace minrepro
