#include "engine/flaky.h"

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

void FailureRate::add(std::size_t failures, std::size_t passes) {
  failures_ += failures;
  passes_ += passes;
}

double FailureRate::estimate() const {
  return (static_cast<double>(failures_) + 0.5) / (static_cast<double>(failures_ + passes_) + 1.0);
}

// B(a, b+n) / B(a, b) in log space: exact for any n, no overflow.
double FailureRate::chanceOfPassStreak(std::size_t n) const {
  const double a = static_cast<double>(failures_) + 0.5, b = static_cast<double>(passes_) + 0.5;
  const double m = static_cast<double>(n);
  return std::exp(std::lgamma(b + m) + std::lgamma(a + b) - std::lgamma(a + b + m) - std::lgamma(b));
}

std::size_t FailureRate::passesToReject(double alpha, std::size_t cap) const {
  std::size_t n = 1;
  while (n < cap && chanceOfPassStreak(n) > alpha) ++n;
  return n;
}

std::string FailureRate::describe() const {
  char text[96];
  std::snprintf(text, sizeof text, "%.2f (%zu failures in %zu trials)", estimate(), failures_, failures_ + passes_);
  return text;
}

CandidateDecision decideCandidate(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs) {
  const std::size_t needed = options.enabled ? rate.passesToReject(options.alpha, options.max_passes) : 1;
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
        rate.add(1, passes);
        decision.interesting = true;
        return decision;
      }
      if (++passes == needed) break;
    }
  }
  return decision;
}

OriginalEstimate estimateOriginal(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs) {
  const std::size_t max_runs = options.enabled ? options.initial_runs : 1;
  const std::size_t want = options.enabled ? options.initial_failures : 1;
  OriginalEstimate estimate;
  while (estimate.runs < max_runs && estimate.failures < want) {
    // No more runs at once than failures still wanted: other job slots go to
    // speculative trials of the search's first candidates.
    const auto results = run(std::min({std::max<std::size_t>(jobs, 1), max_runs - estimate.runs,
                                       want - estimate.failures}), 0);
    for (bool failed : results) {
      ++estimate.runs;
      estimate.failures += failed ? 1 : 0;
      if (estimate.failures == want || estimate.runs == max_runs) break;
    }
  }
  rate.add(estimate.failures, estimate.runs - estimate.failures);
  return estimate;
}

}  // namespace minrepro
