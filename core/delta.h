// The search that every list reducer shares (the engine owns the search; a
// reducer only says how many units it has and how to apply a selection).
//
// DeltaSearch finds a small subset of units 0..n-1 that is still
// "interesting" (fails the same way), assuming the full set is. It is an
// adaptive group-testing search (Hwang's generalized binary splitting with
// the number of culprits unknown):
//   * a group of unknown units is removed in one trial; if the failure stays,
//     the whole group is gone at the price of one trial;
//   * if the failure goes away, the group holds a needed unit, which a
//     bisection finds in about log2(group) trials, removing every part it can;
//   * after each needed unit is found, one trial asks whether the needed
//     units alone suffice; once several culprits are known, group sizes
//     follow the density of culprits seen so far.
// On the standard problems (docs/list-problems.md) this needs
// a 12, b 23, c 14, d 81, e 28 trials including the check of the full input.
//
// Every unit that is kept was shown to be needed: removing it from a
// superset of the result made the failure go away, so for failures that do
// not vanish when samples are added the result is 1-minimal. When answers
// can be wrong (a flaky failure rejected by chance), `final_check` tests the
// result without each of its units, which removes any unit kept by mistake.
//
// The search is a step machine (query / answer) so that callers can run the
// trials however they like: one by one, repeated for flaky failures, in
// parallel, or replayed from a journal.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace minrepro {

using Units = std::vector<std::size_t>;

struct DeltaOptions {
  // Fraction of a group removed first when bisecting. 0.5 is optimal when
  // every answer costs the same; when a "no" costs more trials than a "yes"
  // (flaky failures), removing a smaller part first is cheaper overall.
  double split_fraction = 0.5;
  bool final_check = false;  // re-check 1-minimality of the result at the end
};

struct DeltaStats {
  std::size_t tests = 0;       // queries answered by the caller (cache hits excluded)
  std::size_t cache_hits = 0;  // candidates asked about twice, answered from the cache
  std::size_t accepted = 0;    // candidates that stayed interesting
};

class DeltaSearch {
 public:
  DeltaSearch(std::size_t n, DeltaOptions options = {});

  bool done() const { return phase_ == Phase::Done; }
  // The candidate to test now: the units to keep, ascending. Never empty and
  // never asked twice. Valid while !done().
  const Units& query() const { return pending_; }
  void answer(bool interesting);
  // The units kept; final once done().
  const Units& result() const { return needed_; }
  // Whether query() is one of the final 1-minimality check's (the result
  // without one unit), whose answer a flaky oracle makes with full strength.
  bool checkingFinal() const { return phase_ == Phase::AwaitFinal; }
  const DeltaStats& stats() const { return stats_; }
  // About how many answers the search still needs, for progress lines: the
  // bisection under way, then the units left at the density of culprits
  // found so far (an estimate, not a bound).
  std::size_t remainingEstimate() const;

 private:
  enum class Phase { Outer, AwaitGroup, Bisect, AwaitBisect, FinalCheck, AwaitFinal, Done };
  void advance();
  bool stepOuter();
  bool stepBisect();
  bool stepFinal();
  bool propose(Units candidate, Phase awaiting);
  void apply(bool interesting);
  std::size_t groupSize() const;

  std::size_t total_;
  DeltaOptions options_;
  DeltaStats stats_;
  Phase phase_ = Phase::Outer;
  Units needed_, unknown_, group_, rest_, first_, second_, pending_;
  bool unknown_holds_culprit_ = true;
  bool needed_alone_failed_ = false;
  std::size_t final_index_ = 0;
  // Answers by candidate: its size and two independent 64-bit hashes of
  // its units (a false match needs both to collide), not the units
  // themselves, which for a batch of millions of samples would keep a
  // copy of every candidate.
  struct CandidateId {
    std::size_t size;
    std::uint64_t h1, h2;
    auto operator<=>(const CandidateId&) const = default;
  };
  static CandidateId idOf(const Units& units);
  std::map<CandidateId, bool> cache_;
};

// Answers whether a candidate keeping exactly these units is still interesting.
using UnitOracle = std::function<bool(const Units& keep)>;

// Runs a DeltaSearch to the end with a synchronous oracle.
Units minimizeUnits(std::size_t n, const UnitOracle& oracle, DeltaStats* stats = nullptr, DeltaOptions options = {});

}  // namespace minrepro
