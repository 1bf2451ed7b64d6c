// The original case, before the search (see the header for why).
#include "engine/original_check.h"

#include "engine/batch_dependence.h"

#include <filesystem>

#include "engine/case_check.h"
#include "engine/torch_versions.h"

namespace minrepro {

ExitStatus originalFailsAsExpected(const CaseConfig& config, const CaseView& view, TrialOracle& oracle,
                                   const Selection& all, Log& log, OriginalEstimate& estimate) {
  // Free job slots already try what the search will ask first.
  estimate =
      oracle.estimateOriginal(all, [&](std::size_t max, bool) { return openingCandidates(config, view, all, max); });
  if (estimate.failures == 0) {
    const auto& others = oracle.stats().other_bugs;
    std::string why = "the original case does not reproduce: " + std::to_string(estimate.runs) + " run(s), none failed";
    if (oracle.stats().timeouts > 0 && others.empty())
      why = "the original did not end within trial.timeout (" + formatSeconds(config.timeout) + " s" + ") in " +
            std::to_string(oracle.stats().timeouts) + " of " + std::to_string(estimate.runs) +
            " run(s). A timeout is the failure only when case.yaml says so (failure: {family: timeout}, for a step "
            "that hangs). If the step ends in your shell, it hangs only as a trial: compare how you run it with how a "
            "trial does (its own empty directory, stdin from /dev/null, TMPDIR, no terminal); if it is only slow, "
            "raise trial.timeout";
    else if (const auto advice = others.empty()
                                     ? std::nullopt
                                     : relativeFileMissing(others.begin()->first, config, FileWhereUserIs::NotRequired))
      why =
          "the original fails, but not as case.yaml's failure section expects: a file the trial needs cannot be "
          "opened (it failed with: " +
          others.begin()->first + "). " + *advice;
    else if (!others.empty())
      why = "the original fails, but not as case.yaml's failure section expects (it failed with: " +
            others.begin()->first + "). Fix the failure section or remove it";
    else
      why += " (check that the batch is the failing one and that the trial runs the code that failed)";
    log.info("error: " + why);
    return ExitStatus::DoesNotReproduce;
  }
  const std::string summary = oracle.reference().summary(), exit = oracle.firstFailureExit();
  log.info("original reproduces: " + summary +
           (summary.find("(" + exit + ")") == std::string::npos ? " (" + exit + ")" : "") + "; " +
           std::to_string(estimate.failures) + " of " + std::to_string(estimate.runs) + " runs failed the same way" +
           (!config.flaky.enabled           ? ""
            : oracle.rate().deterministic() ? "; charged as deterministic (one pass rejects a candidate) until a "
                                              "run contradicts it"
                                            : "; flaky: a candidate is rejected only after a streak of passes"));
  return ExitStatus::Reduced;
}

namespace {

// The original with none of its samples (tensors kept whole as they are),
// run once as a plain process, as the confirmation runs; whether it fails
// as the original does.
bool failsWithoutSamples(const CaseConfig& config, TrialOracle& oracle, const Selection& all) {
  Selection none = all;
  none.samples.clear();
  const std::filesystem::path dir = config.work_dir / "trials" / "no-samples";
  const TrialOutcome outcome = oracle.runUncounted(none, {}, dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return outcome.end != TrialEnd::Cancelled && oracle.sameFailure(outcome);
}

}  // namespace

ExitStatus checkDependsOnBatch(const CaseConfig& config, const BatchStore& batch, TrialOracle& oracle,
                               Executor& executor, const Selection& all, Log& log) {
  if (const std::string warning = perSampleLookingKeptWhole(batch); !warning.empty()) log.info("warning: " + warning);
  if (!config.command || oracle.reference().family == FailureFamily::Timeout) return ExitStatus::Reduced;
  if (const auto advice = relativeFileMissing(oracle.reference().message, config, FileWhereUserIs::Required)) {
    log.info("error: nothing to reduce: a file the trial needs cannot be opened (" + oracle.reference().summary() +
             "), which is where you are and not where the trial runs: reducing would only keep an arbitrary sample. " +
             *advice);
    return ExitStatus::DoesNotReproduce;
  }
  // Every switch off too: a failure that needs one of them depends on the case after all.
  Selection nothing = all;
  for (const auto& s : config.command->switches) nothing.branches_off.insert(s.name);
  const auto why = checkBatchDependence(config, oracle.specFor(nothing, config.work_dir / "trials" / "no-tensors"),
                                        oracle.reference(), executor);
  if (why) {
    log.info("error: nothing to reduce: " + *why);
    return ExitStatus::DoesNotReproduce;
  }
  log.detail(
      "the step on a batch with no tensor and every switch off does not fail this way: the failure depends on the "
      "batch");
  if (all.samples.size() < 2 || tensorsKeptWhole(batch).empty()) return ExitStatus::Reduced;
  if (failsWithoutSamples(config, oracle, all)) {
    log.info("error: nothing to reduce in the samples: " + samplesDoNotMatterMessage(batch));
    return ExitStatus::DoesNotReproduce;
  }
  log.detail("the step with none of the samples (the tensors kept whole as they are) does not fail this way");
  return ExitStatus::Reduced;
}

std::vector<std::string> logTorchMismatches(const CaseConfig& config, const KeyValues& environment, Log& log) {
  const auto mismatches = torchVersionMismatches(config.context, environment, config.harness.has_value());
  for (const auto& m : mismatches) log.info("warning: " + m);
  return mismatches;
}

std::string notConfirmedWhy(const TrialOracle& oracle, const std::string& where) {
  const auto& others = oracle.stats().other_bugs;
  if (!others.empty())
    return "the minimal case did not fail again " + where + ". Candidates failed another way during the search (" +
           others.begin()->first + ", " + std::to_string(others.begin()->second) +
           " time(s)): the case may fail that way now, a second bug the flaky failure slips to; check the "
           "self-check's runs in REPORT.md";
  return "the minimal case did not fail again " + where +
         ". Your batch file fails and the candidate files minrepro writes do not: the step may read what a tensor "
         "does not show, such as the bytes of a view's storage that no view covers (they are zeros once cut), or "
         "the storage behind views that do not lie in one block per sample (those are written apart once cut)";
}

}  // namespace minrepro
