#include "core/flaky.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace minrepro {

DeltaOptions flakyDeltaOptions() {
  DeltaOptions options;
  options.split_fraction = 0.2;
  options.final_check = true;
  return options;
}

DeltaOptions searchOptions(const FailureRate& rate) {
  if (!rate.deterministic()) return flakyDeltaOptions();
  DeltaOptions options;
  options.final_check = true;
  return options;
}

void FailureRate::contradict(const std::string& why) {
  if (!contradiction_.empty()) return;
  contradiction_ = why.empty() ? "a pass contradicted a failure" : why;
  // What one-run decisions saw only counts the candidates that failed at once.
  std::erase_if(evidence_, [](const Evidence& e) { return e.one_run; });
  failures_ = passes_ = 0;
  for (const Evidence& e : evidence_) failures_ += e.failures, passes_ += e.passes;
}

std::string FailureRate::verdict() const {
  if (!deterministic()) return "flaky: " + contradiction_;
  return "deterministic: " + std::to_string(failures_) + " of " + std::to_string(failures_) +
         " runs of failing candidates failed the same way, and no pass contradicted a failure";
}

void FailureRate::add(std::size_t failures, std::size_t passes, std::size_t size) {
  if (failures > 0 && passes > 0)
    contradict(std::to_string(passes) + " pass(es) of candidates known to fail the same way");
  failures_ += failures;
  passes_ += passes;
  evidence_.push_back({size, failures, passes, one_run_decisions_ && deterministic()});
}

double FailureRate::estimate() const {
  return (static_cast<double>(failures_) + 0.5) / (static_cast<double>(failures_ + passes_) + 1.0);
}

namespace {

constexpr double kPriorTrials = 8;

// E[(1-p)^n] under Beta(a, b): B(a, b+n) / B(a, b) in log space, exact for
// any n, no overflow.
double betaPassStreak(double a, double b, std::size_t n) {
  const double m = static_cast<double>(n);
  return std::exp(std::lgamma(b + m) + std::lgamma(a + b) - std::lgamma(a + b + m) - std::lgamma(b));
}

}  // namespace

double FailureRate::chanceOfPassStreak(std::size_t n, std::size_t size) const {
  double chance = betaPassStreak(static_cast<double>(failures_) + 0.5, static_cast<double>(passes_) + 0.5, n);
  if (size == 0) return chance;
  // The pooled rate is the prior, worth at most kPriorTrials trials: what
  // other sizes showed carries over, but cannot outweigh a few trials of
  // this size.
  const double strength = std::min(static_cast<double>(failures_ + passes_), kPriorTrials), m = estimate();
  double a = 0.5 + strength * m, b = 0.5 + strength * (1 - m);
  for (const Evidence& e : evidence_) {
    const double w =
        e.size == 0 ? 1.0 : static_cast<double>(std::min(size, e.size)) / static_cast<double>(std::max(size, e.size));
    a += w * static_cast<double>(e.failures);
    b += w * static_cast<double>(e.passes);
  }
  return std::max(chance, betaPassStreak(a, b, n));
}

// Half the prior's weight on "deterministic" (p = 1), half on Jeffreys'
// Beta(1/2, 1/2) over the rates. After f failures and no pass, the
// posterior weight of "flaky" is B(f + 1/2, 1/2) / (B(1/2, 1/2) + B(f + 1/2, 1/2)),
// and a failing candidate passes n times in a row only under "flaky".
double FailureRate::mixtureChanceOfPassStreak(std::size_t n) const {
  const double f = static_cast<double>(failures_);
  const double log_beta_f = std::lgamma(f + 0.5) + std::lgamma(0.5) - std::lgamma(f + 1);
  const double log_beta_0 = 2 * std::lgamma(0.5);  // B(1/2, 1/2) = pi
  const double flaky = 1 / (1 + std::exp(log_beta_0 - log_beta_f));
  return flaky * betaPassStreak(f + 0.5, 0.5, n);
}

std::size_t FailureRate::passesToReject(double alpha, std::size_t cap, std::size_t size, bool recheck) const {
  if (deterministic() && !recheck) return 1;
  std::size_t n = 1;
  if (deterministic()) {
    while (n < cap && mixtureChanceOfPassStreak(n) > alpha) ++n;
    return n;
  }
  while (n < cap && chanceOfPassStreak(n, size) > alpha) ++n;
  return n;
}

std::string FailureRate::describe() const {
  // The estimate leans on a prior: 8 failures in 8 runs estimate 0.94, which
  // read beside "8 in 8" looks like a miscount. Every run failing says so.
  char text[128];
  if (passes_ == 0 && failures_ > 0)
    std::snprintf(text, sizeof text, "every trial failed (%zu of %zu)", failures_, failures_);
  else
    std::snprintf(text, sizeof text, "%.2f (%zu of %zu trials failed; estimated with a prior)", estimate(), failures_,
                  failures_ + passes_);
  return text;
}

CandidateDecision decideCandidate(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs, std::size_t size, bool recheck) {
  rate.startOneRunDecisions();
  const std::size_t needed =
      options.enabled ? rate.passesToReject(options.alpha, options.max_passes, size, recheck) : 1;
  CandidateDecision decision;
  std::size_t passes = 0;
  // Trials of this candidate per round: about the number it takes to see a
  // failure (1/p), so that when failures are likely the other job slots go
  // to speculative trials of the next candidates instead.
  const auto per_round = static_cast<std::size_t>(std::lround(1.0 / std::max(rate.estimate(), 0.05)));
  const std::size_t width = std::clamp<std::size_t>(per_round, 1, std::max<std::size_t>(jobs, 1));
  while (passes < needed) {
    // After a pass, more runs of this candidate are likelier to count than
    // trials of the candidates after it (which need it accepted).
    const std::size_t count = std::min(width, needed - passes);
    const auto results = run(count, passes > 0 ? needed - passes - count : 0);
    for (bool failed : results) {
      ++decision.trials_used;
      if (failed) {
        if (passes > 0)
          rate.contradict("a candidate of " + std::to_string(size) + " samples passed " + std::to_string(passes) +
                          " time(s) before it failed the same way");
        rate.add(1, passes, size);
        decision.interesting = true;
        return decision;
      }
      if (++passes == needed) break;
    }
  }
  return decision;
}

OriginalEstimate estimateOriginal(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs, std::size_t size) {
  const std::size_t max_runs = options.enabled ? options.initial_runs : 1;
  const std::size_t want = options.enabled ? options.initial_failures : 1;
  OriginalEstimate estimate;
  while (estimate.runs < max_runs && estimate.failures < want) {
    // No more runs at once than failures still wanted: other job slots go to
    // speculative trials of the search's first candidates.
    const auto results =
        run(std::min({std::max<std::size_t>(jobs, 1), max_runs - estimate.runs, want - estimate.failures}), 0);
    if (results.empty()) break;  // the caller has seen enough (a run that timed out)
    for (bool failed : results) {
      ++estimate.runs;
      estimate.failures += failed ? 1 : 0;
      if (estimate.failures == want || estimate.runs == max_runs) break;
    }
  }
  if (estimate.failures > 0 && estimate.failures < estimate.runs)
    rate.contradict("the original passed in " + std::to_string(estimate.runs - estimate.failures) + " of " +
                    std::to_string(estimate.runs) + " runs");
  rate.add(estimate.failures, estimate.runs - estimate.failures, size);
  return estimate;
}

namespace {

double logChoose(std::size_t n, std::size_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}

}  // namespace

double fisherExactTwoSided(std::size_t failures_a, std::size_t runs_a, std::size_t failures_b, std::size_t runs_b) {
  const std::size_t failures = failures_a + failures_b, runs = runs_a + runs_b;
  if (runs_a == 0 || runs_b == 0) return 1.0;
  // Hypergeometric probability of `a` failures among the first set's runs.
  auto probability = [&](std::size_t a) {
    return std::exp(logChoose(runs_a, a) + logChoose(runs_b, failures - a) - logChoose(runs, failures));
  };
  const std::size_t lo = failures > runs_b ? failures - runs_b : 0, hi = std::min(failures, runs_a);
  const double observed = probability(failures_a);
  double p = 0;
  for (std::size_t a = lo; a <= hi; ++a)
    if (const double q = probability(a); q <= observed * (1 + 1e-7)) p += q;
  return std::min(p, 1.0);
}

}  // namespace minrepro
