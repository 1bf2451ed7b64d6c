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
// at most 8 trials, plus the evidence weighted by how near in size it is
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
#include <optional>
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

// Most failures people bring are deterministic: the same input fails the
// same way every run. The model starts from that and charges for
// flakiness only on evidence of it: while every observation fits a failure
// rate of 1, one pass rejects a candidate. The first contradiction (the
// original passing, a candidate that passed failing on a rerun or the
// reverse, a superset of a failing candidate passing) moves it to the
// streaks below for the rest of the run. A rejection on one pass that was
// wrong only keeps units the failure does not need; the search's final
// 1-minimality check tests each kept unit again at the strength of `alpha`
// (a streak under a prior that gives "deterministic" half the weight and a
// spread of rates the rest), and a pass whose model became flaky during its
// search is searched again from its result with streaks.
class FailureRate {
 public:
  // Evidence from trials of a candidate of `size` samples known to fail
  // (size 0: unknown, counted at full weight for every size).
  // Evidence gathered while candidates are decided on one run is biased
  // (a failing candidate that passed its one run was rejected, unseen): it
  // counts for determinism, and is dropped when the model turns flaky.
  void add(std::size_t failures, std::size_t passes, std::size_t size = 0);
  // Whether every observation so far fits a deterministic failure.
  bool deterministic() const { return contradiction_.empty(); }
  // From now on (while deterministic) evidence comes from decisions on one run.
  void startOneRunDecisions() { one_run_decisions_ = true; }
  // The first evidence of flakiness ("the original passed in 1 of 4
  // runs"); later ones are ignored.
  void contradict(const std::string& why);
  const std::string& contradiction() const { return contradiction_; }
  // How the run was charged, for the report: "deterministic: 38 of 38
  // failing runs matched, no contradiction" or "flaky: <contradiction>".
  std::string verdict() const;
  std::size_t failures() const { return failures_; }
  std::size_t passes() const { return passes_; }
  double estimate() const;  // posterior mean of the pooled evidence
  // The chance that a failing candidate of `size` samples passes n times in
  // a row: the larger of E[(1-p)^n] under the pooled posterior and under the
  // posterior of the evidence weighted by nearness in size (0: pooled only).
  double chanceOfPassStreak(std::size_t n, std::size_t size = 0) const;
  // Passes in a row after which a candidate of `size` samples is rejected:
  // one while deterministic, unless `recheck` (the final 1-minimality
  // check), which asks for the streak the mixture prior needs.
  std::size_t passesToReject(double alpha, std::size_t cap, std::size_t size = 0, bool recheck = false) const;
  std::string describe() const;  // "0.31 (12 of 39 trials failed; ...)", "every trial failed (8 of 8)"

 private:
  struct Evidence {
    std::size_t size, failures, passes;
    bool one_run;  // from a decision on one run (see add)
  };
  bool one_run_decisions_ = false;  // candidates are being decided on one run
  // The chance under the mixture prior that a candidate which truly fails
  // passes n times in a row, while no pass has contradicted determinism.
  double mixtureChanceOfPassStreak(std::size_t n) const;
  std::size_t failures_ = 0;
  std::size_t passes_ = 0;
  std::vector<Evidence> evidence_;
  std::string contradiction_;
};

// While the failure looks deterministic: the candidates seen to pass and
// to fail, and whether a new one contradicts them. A deterministic failure
// that does not vanish when more of the input is kept never passes on a
// candidate that keeps all of one that failed; one that does is flaky (or
// at least must be searched as if it were). `contains(a, b)`: a keeps all
// of b. The most recent `kMaxKept` of each are compared.
template <typename Candidate, typename Contains>
class MonotonicityWatch {
 public:
  explicit MonotonicityWatch(Contains contains) : contains_(std::move(contains)) {}
  // Returns the contradiction, if `candidate` (which `failed` or passed) makes one.
  std::optional<std::string> add(const Candidate& candidate, bool failed) {
    auto& same = failed ? failed_ : passed_;
    const auto& other = failed ? passed_ : failed_;
    for (const Candidate& o : other)
      if (failed ? contains_(o, candidate) : contains_(candidate, o))
        return failed ? "a candidate failed while one that keeps all of it had passed"
                      : "a candidate passed while keeping all of one that had failed";
    same.push_back(candidate);
    if (same.size() > kMaxKept) same.erase(same.begin());
    return std::nullopt;
  }

 private:
  static constexpr std::size_t kMaxKept = 64;
  Contains contains_;
  std::vector<Candidate> passed_, failed_;
};

// Search settings when failures may be flaky: a rejection costs a streak of
// passes while an acceptance costs about 1/p trials, so bisection removes a
// fifth of a group first (more likely accepted), and the result's
// 1-minimality is re-checked, which undoes any unit kept after an unlucky
// rejection (a rejection can only make the result larger, never wrong).
DeltaOptions flakyDeltaOptions();
// The search's settings for a run with flakiness handling on: bisection in
// halves while the failure looks deterministic (a pass costs one trial
// then), flakyDeltaOptions once it does not; the final check either way.
DeltaOptions searchOptions(const FailureRate& rate);

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
// A pass followed by a failure of the same candidate (or the reverse)
// contradicts determinism: `rate` is told. `recheck`: the final check's
// strength (FailureRate::passesToReject).
CandidateDecision decideCandidate(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs = 1, std::size_t size = 0, bool recheck = false);

struct OriginalEstimate {
  std::size_t runs = 0;
  std::size_t failures = 0;
};

// Runs the original until options.initial_failures matching failures or
// options.initial_runs runs (one run when flakiness handling is off), and
// adds what it saw to `rate` (a pass among them contradicts determinism).
OriginalEstimate estimateOriginal(const TrialBatch& run, FailureRate& rate, const FlakyOptions& options,
                                  std::size_t jobs = 1, std::size_t size = 0);

// Two-sided p-value of Fisher's exact test on the 2x2 table
// [failures_a, runs_a - failures_a; failures_b, runs_b - failures_b]: how
// likely rates this far apart are when both sets of runs share one rate.
double fisherExactTwoSided(std::size_t failures_a, std::size_t runs_a, std::size_t failures_b, std::size_t runs_b);

}  // namespace minrepro
