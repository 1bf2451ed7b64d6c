#include "engine/shrink.h"

#include <unistd.h>

#include <iostream>
#include <sstream>

#include "engine/archive.h"
#include "engine/delta.h"
#include "engine/oracle.h"
#include "engine/report.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string defaultTrialBinary() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return (self.parent_path() / "minrepro-trial").string();
  return "minrepro-trial";
}

namespace {

Selection allSamples(std::int64_t n) {
  Selection s;
  for (std::int64_t i = 0; i < n; ++i) s.samples.push_back(i);
  return s;
}

// One pass of one reducer; returns the reduced selection.
Selection runPass(const Reducer& reducer, const Selection& current, TrialOracle& oracle, Log& log) {
  const std::size_t units = reducer.unitCount(current);
  if (units <= 1) return current;
  DeltaStats stats;
  const auto keep = minimizeUnits(
      units, [&](const std::vector<std::size_t>& k) { return oracle.interesting(reducer.apply(current, k)); }, &stats);
  Selection next = reducer.apply(current, keep);
  log.info("pass " + reducer.name() + ": " + std::to_string(units) + " -> " + std::to_string(keep.size()) +
           " units in " + std::to_string(stats.tests) + " trials");
  return next;
}

// Passes in the configured order, repeated until a round changes nothing.
Selection runPipeline(const CaseConfig& config, Selection current, TrialOracle& oracle, Log& log) {
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& name : config.reducers) {
      const auto reducer = findReducer(name)->create();
      Selection next = runPass(*reducer, current, oracle, log);
      if (next.samples.size() < current.samples.size()) progress = true;
      current = std::move(next);
    }
    // A round that removed something may enable more; samples alone are
    // 1-minimal after one pass, so only repeat when there are other passes.
    if (config.reducers.size() <= 1) break;
  }
  return current;
}

struct Original {
  TrialRecord record;
  ExitStatus status = ExitStatus::Reduced;
};

// The original must fail, and fail as the user expects when they said how.
Original checkOriginal(const CaseConfig& config, TrialOracle& oracle, std::int64_t n, Log& log) {
  Original o;
  o.record = oracle.run(allSamples(n));
  const FailureSignature& sig = o.record.signature;
  if (o.record.outcome.end == TrialEnd::FailedToStart) {
    log.info("error: the trial could not start: " + o.record.outcome.start_error +
             " (check trial.command or that minrepro-trial is installed next to minrepro)");
    o.status = ExitStatus::TrialsCannotStart;
    return o;
  }
  if (!sig.failed()) {
    log.info("error: the original case does not reproduce: the trial passed (" + describe(o.record.outcome) +
             "). Check that the batch is the failing one and that the trial runs the code that failed.");
    o.status = ExitStatus::DoesNotReproduce;
    return o;
  }
  const SignatureMatch m = matchSignature(sig, sig, config.expected);
  if (!m.matches) {
    log.info("error: the original fails, but not as case.yaml's failure section expects: " + m.why_not +
             "; it failed with: " + sig.summary() + ". Fix the failure section or remove it.");
    o.status = ExitStatus::DoesNotReproduce;
    return o;
  }
  log.info("original reproduces: " + sig.summary() + " (" + describe(o.record.outcome) + ")");
  return o;
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

std::vector<ArchiveEntry> archiveEntries(const CaseConfig& config, const fs::path& minimal_batch,
                                         const ReductionSummary& summary) {
  std::vector<ArchiveEntry> entries;
  entries.push_back({"REPORT.md", renderReport(config, summary)});
  entries.push_back({"repro.py", renderReproPy(config, summary.signature), true});
  entries.push_back({"case.yaml", renderCase(config, config.base_dir, "batch.pt", "model.pt")});
  entries.push_back({"batch.pt", readFileBytes(minimal_batch)});
  if (config.harness) entries.push_back({"model.pt", readFileBytes(config.harness->model)});
  // Files the command names under the case directory travel with the case.
  for (const auto& rel : commandCaseFiles(config))
    entries.push_back({rel.string(), readFileBytes(config.base_dir / rel)});
  return entries;
}

}  // namespace

ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor);

ExitStatus runShrink(const ShrinkOptions& options, Executor* executor) {
  try {
    CaseConfig config = loadCase(options.config);
    if (options.output) config.output = fs::absolute(*options.output);
    if (options.work_dir) config.work_dir = fs::absolute(*options.work_dir);
    LocalExecutor local;
    return runShrinkLoaded(options, config, executor ? *executor : local);
  } catch (const CaseError& e) {
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

ExitStatus runShrinkLoaded(const ShrinkOptions& options, CaseConfig& config, Executor& executor) {
  const auto batch = BatchStore::open(config);
  fs::create_directories(config.work_dir);
  Log log(options.quiet);
  log.openFile(config.work_dir / "minrepro.log");
  log.info("case " + config.case_file.filename().string() + ": " + std::to_string(batch->sampleCount()) +
           " samples; reducers:" + [&] { std::string r; for (auto& n : config.reducers) r += " " + n; return r; }());
  TrialOracle oracle(config, *batch, executor, options.trial_binary.empty() ? defaultTrialBinary() : options.trial_binary, log);

  const Original original = checkOriginal(config, oracle, batch->sampleCount(), log);
  if (original.status != ExitStatus::Reduced) return original.status;
  oracle.setReference(original.record.signature);

  const Selection minimal = runPipeline(config, allSamples(batch->sampleCount()), oracle, log);
  const bool confirmed = oracle.interesting(minimal);
  if (!confirmed) log.info("warning: the minimal case did not fail again when confirmed: the failure may be flaky");

  const fs::path minimal_batch = config.work_dir / "minimal-batch.pt";
  batch->writeSubset(minimal.samples, minimal_batch);
  ReductionSummary summary;
  summary.signature = original.record.signature;
  summary.exit_description = describe(original.record.outcome);
  summary.original_samples = batch->sampleCount();
  summary.original_tensors = batch->describe();
  {
    CaseConfig minimal_config = config;
    minimal_config.batch = minimal_batch;
    const auto reduced = BatchStore::open(minimal_config);
    summary.minimal_tensors = reduced->describe();
    summary.small_values = smallIntegerValues(*reduced, summary.minimal_tensors);
  }
  const auto ids = batch->sampleIds();
  for (auto i : minimal.samples) summary.kept_ids.push_back(ids[static_cast<std::size_t>(i)]);
  summary.stats = oracle.stats();
  summary.seed = config.seed;
  summary.confirmed = confirmed;
  summary.environment = probeEnvironment(options, config);
  summary.seconds = log.elapsedSeconds();

  writeTarGz(config.output, archiveEntries(config, minimal_batch, summary));
  log.info("reduced " + std::to_string(summary.original_samples) + " -> " + std::to_string(minimal.samples.size()) +
           " samples (ids " + formatList(summary.kept_ids) + ") in " + std::to_string(summary.stats.trials) +
           " trials; archive: " + config.output.string());
  return ExitStatus::Reduced;
}

}  // namespace minrepro
