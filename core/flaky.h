// Deciding candidates when the failure is flaky.
//
// One matching failure proves a candidate interesting. A pass is only
// evidence: a candidate is rejected after n passes in a row, once the chance
// that a truly failing candidate passes n times in a row is at most alpha.
// That chance is (1-p)^n for a failure rate p; since p itself is estimated,
// minrepro uses its expectation under the posterior Beta(f + 1/2, s + 1/2)
// (Jeffreys prior; f failures and s passes among trials of candidates that
// were shown to fail), which is more cautious while little is known and
// tends to (1-p)^n as evidence accumulates.
//
// Real bugs do not fail at one rate for every subset: a heap corruption
// fails more often with fewer samples around it, a race less often. Pooled
// evidence from large early candidates would then cut the streak of a small
// late one below what its own rate needs. So the chance is also taken under
// a posterior for the candidate's own size: the pooled rate as a prior worth
// at most 10 trials, plus the evidence weighted by how near in size it is
// (a candidate of k samples counts evidence from one of k' samples with
// weight min(k, k') / max(k, k')); the larger of the two chances decides.
// Evidence about other sizes says less about this one, so a candidate far
// smaller than anything seen to fail waits longer, but a failure seen on
// every trial so far still needs only a few passes. A rate that does not
// depend on the size costs a few more passes; one that falls with the size
// is followed as it falls.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/delta.h"

namespace minrepro {

struct FlakyOptions {
  bool enabled = true;               // false: one trial decides (failure known to be deterministic)
  double alpha = 0.001;              // accepted chance of rejecting a failing candidate
  std::size_t initial_failures = 3;  // estimate p from the original until this many failures...
  std::size_t initial_runs = 30;     // ...or this many runs
  std::size_t max_passes = 200;      // never more passes than this for one candidate
};

class FailureRate {
 public:
  // Evidence from trials of a candidate of `size` samples known to fail
  // (size 0: unknown, counted at full weight for every size).
  void add(std::size_t failures, std::size_t passes, std::size_t size = 0);
  std::size_t failures() const { return failures_; }
  std::size_t passes() const { return passes_; }
  double estimate() const;  // posterior mean of the pooled evidence
  // The chance that a failing candidate of `size` samples passes n times in
  // a row: the larger of E[(1-p)^n] under the pooled posterior and under the
  // posterior of the evidence weighted by nearness in size (0: pooled only).
  double chanceOfPassStreak(std::size_t n, std::size_t size = 0) const;
  // Passes in a row after which a candidate of `size` samples is rejected.
  std::size_t passesToReject(double alpha, std::size_t cap, std::size_t size = 0) const;
  std::string describe() const;  // "0.31 (12 failures in 39 trials)"

 private:
  struct Evidence {
    std::size_t size, failures, passes;
  };
  std::size_t failures_ = 0;
  std::size_t passes_ = 0;
  std::vector<Evidence> evidence_;
};

// Search settings when failures may be flaky: a rejection costs a streak of
// passes while an acceptance costs about 1/p trials, so bisection removes a
// fifth of a group first (more likely accepted), and the result's
// 1-minimality is re-checked, which undoes any unit kept after an unlucky
// rejection (a rejection can only make the result larger, never wrong).
DeltaOptions flakyDeltaOptions();

// Runs `count` trials of one candidate (possibly at once) and returns, in
// trial order, whether each failed the same way as the original. `spare`:
// how many more trials of it could still count, which a runner may start
// now in otherwise idle job slots (their results come first next time).
using TrialBatch = std::function<std::vector<bool>(std::size_t count, std::size_t spare)>;

struct CandidateDecision {
  bool interesting = false;
  std::size_t trials_used = 0;  // trials whose result counted (later ones in a batch are ignored)
};

// Accepts at the first matching failure; rejects after the pass streak the
// failure rate asks for. Results are read in trial order and reading stops at
// the decision, so the decision is the same however many trials ran at once.
// Evidence from an accepted candidate is added to `rate`.
CandidateDecision decideCandidate(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs = 1, std::size_t size = 0);

struct OriginalEstimate {
  std::size_t runs = 0;
  std::size_t failures = 0;
};

// Runs the original until options.initial_failures matching failures or
// options.initial_runs runs (one run when flakiness handling is off), and
// adds what it saw to `rate`.
OriginalEstimate estimateOriginal(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs = 1, std::size_t size = 0);

// Two-sided p-value of Fisher's exact test on the 2x2 table
// [failures_a, runs_a - failures_a; failures_b, runs_b - failures_b]: how
// likely rates this far apart are when both sets of runs share one rate.
double fisherExactTwoSided(std::size_t failures_a, std::size_t runs_a, std::size_t failures_b, std::size_t runs_b);

}  // namespace minrepro
