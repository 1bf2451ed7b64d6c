#include "engine/plain_process_check.h"

#include <iomanip>
#include <sstream>

namespace minrepro {

namespace {

std::string rateOf(const OriginalEstimate& e) { return std::to_string(e.failures) + " of " + std::to_string(e.runs); }

// A plain run failed alike, and neither extreme of the `left` runs to come
// (all passing, all failing) would bring Fisher's test below 0.01.
bool agreementSettled(const OriginalEstimate& forked, const OriginalEstimate& plain, std::size_t left) {
  if (plain.failures == 0) return false;
  const std::size_t runs = plain.runs + left;
  return fisherExactTwoSided(forked.failures, forked.runs, plain.failures, runs) >= 0.01 &&
         fisherExactTwoSided(forked.failures, forked.runs, plain.failures + left, runs) >= 0.01;
}

}  // namespace

std::string ForkComparison::counts() const {
  return "the original failed the same way in " + rateOf(forked) + " forked runs and " + rateOf(plain) +
         " plain processes";
}

std::string ForkComparison::describe() const {
  std::ostringstream out;
  const std::string counts = this->counts();
  switch (verdict) {
    case ForkVerdict::Agree:
      out << "forked children of a fork server (" << counts << ")";
      break;
    case ForkVerdict::UsePlainOnly:
      out << "plain processes only: forked children do not behave as fresh processes here (" << counts
          << ", Fisher's exact test p = " << std::setprecision(2) << p_value << ")";
      break;
    case ForkVerdict::PlainTimesOut:
      out << "none: every plain process of the original ran past trial.timeout (" << timeout_seconds
          << " s), where forked runs failed (" << counts << "): a fresh process takes longer than that to start "
          << "Python and torch, before the step runs. Set trial.timeout to what `python step.py` takes in your "
          << "shell plus a margin, e.g. " << std::max(60.0, 10 * timeout_seconds) << " (a trial that fails ends "
          << "early; the timeout only bounds a hang)";
      break;
    case ForkVerdict::FailsOnlyForked:
      out << "none: " << counts << "; the failure needs the fork server's state and would not reproduce for anyone "
          << "else. Run with trial.fork_server: false to see how the original fails as a plain process";
      break;
  }
  return out.str();
}

ForkComparison compareForkedWithFresh(const Selection& all, const OriginalEstimate& forked, TrialOracle& oracle,
                                      std::size_t rejection_streak, double timeout_seconds) {
  ForkComparison c;
  c.forked = forked;
  c.timeout_seconds = timeout_seconds;
  const std::size_t timeouts_before = oracle.stats().timeouts;
  const std::size_t round = std::max<std::size_t>(oracle.jobs(), 1);
  // Runs already made beside the forked ones (startFreshOriginals) first.
  std::size_t runs = std::min(oracle.freshOriginalRuns(all), forked.runs);
  if (runs == 0) runs = std::min(round, forked.runs);
  for (;; runs = std::min(runs + round, forked.runs)) {
    c.plain = oracle.runOriginalFresh(all, runs);
    if (c.plain.runs >= forked.runs || agreementSettled(forked, c.plain, forked.runs - c.plain.runs)) break;
  }
  // None failing is a verdict only after as many passes as would reject a
  // candidate at the rate seen forked (the same alpha).
  if (c.plain.failures == 0 && rejection_streak > c.plain.runs)
    c.plain = oracle.runOriginalFresh(all, rejection_streak);
  c.p_value = fisherExactTwoSided(forked.failures, forked.runs, c.plain.failures, c.plain.runs);
  const bool all_timed_out = c.plain.runs > 0 && oracle.stats().timeouts - timeouts_before == c.plain.runs;
  if (c.plain.failures == 0)
    c.verdict = all_timed_out ? ForkVerdict::PlainTimesOut : ForkVerdict::FailsOnlyForked;
  else if (c.p_value < 0.01)
    c.verdict = ForkVerdict::UsePlainOnly;
  if (c.verdict != ForkVerdict::Agree) oracle.useFreshProcessesOnly();
  if (c.verdict == ForkVerdict::UsePlainOnly) oracle.rateFromFreshOriginalOnly(all);
  return c;
}

std::string FreshMinimality::describe() const {
  if (!ran) return "not needed (no trial was forked)";
  return std::to_string(checked) + " unit(s) removed once more in plain processes; " + std::to_string(samples_removed) +
         " sample(s) and " + std::to_string(branches_removed) +
         " branch(es) turned out not to be needed (kept only because forked trials of their removal passed)";
}

Selection checkMinimalityFresh(const CaseView& view, TrialOracle& oracle, Selection best, FreshMinimality& report) {
  oracle.useFreshProcessesOnly();
  report.ran = true;
  for (const std::int64_t sample : std::vector<std::int64_t>(best.samples)) {
    if (best.samples.size() <= 1) break;
    Selection candidate = best;
    std::erase(candidate.samples, sample);
    ++report.checked;
    if (oracle.interesting(candidate, {}, /*recheck=*/true)) {
      best = std::move(candidate);
      ++report.samples_removed;
    }
  }
  for (const std::string& branch : view.optionalBranches()) {
    if (best.branches_off.count(branch)) continue;
    Selection candidate = best;
    candidate.branches_off.insert(branch);
    ++report.checked;
    if (oracle.interesting(candidate, {}, /*recheck=*/true)) {
      best = std::move(candidate);
      ++report.branches_removed;
    }
  }
  return best;
}

}  // namespace minrepro
