// The standard list-minimization problems of docs/list-problems.md,
// with the same definitions (and the same flakiness generator) as the
// reference list_problems.py, for tests and benchmarks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/delta.h"
#include "core/flaky.h"

namespace minrepro::testing {

// How a flaky problem's failure rate depends on the subset tried (the
// standard problems have one rate for every subset; real bugs do not: a
// heap corruption fails more often with fewer samples around it, a race
// less often).
enum class RateProfile {
  Constant,  // flaky_p for every failing subset
  Rising,    // flaky_p for the whole list, rising with log2 of the shrink to 1.0 for the culprits alone
  Falling,   // flaky_p for the whole list, falling with log2 of the shrink to falling_to for the culprits alone
};

struct ListProblem {
  std::string name;
  std::size_t n;
  std::vector<std::size_t> culprits;
  std::size_t threshold;  // interesting iff at least this many culprits are kept
  double flaky_p = 0;     // 0: deterministic
  bool force_first = false;
  RateProfile profile = RateProfile::Constant;
  double falling_to = 0;

  // The failure rate of a failing subset of `kept` elements.
  double rate(std::size_t kept) const {
    if (profile == RateProfile::Constant) return flaky_p;
    const double shrink = 1.0 - std::log2(static_cast<double>(std::max<std::size_t>(kept, 1))) /
                                    std::log2(static_cast<double>(n));  // 0 for the whole list, 1 for one element
    const double end = profile == RateProfile::Rising ? 1.0 : falling_to;
    return flaky_p + (end - flaky_p) * shrink;
  }

  bool interesting(const std::vector<std::size_t>& keep) const {
    std::size_t hit = 0;
    for (auto c : culprits) hit += std::binary_search(keep.begin(), keep.end(), c) ? 1 : 0;
    return hit >= threshold;
  }
  bool isExpected(const std::vector<std::size_t>& result) const {
    std::set<std::size_t> r(result.begin(), result.end()), c(culprits.begin(), culprits.end());
    if (threshold == culprits.size()) return r == c;
    return r.size() == threshold && std::includes(c.begin(), c.end(), r.begin(), r.end());
  }
};

inline std::map<std::string, ListProblem> listProblems() {
  return {
      {"a", {"a", 1024, {737}, 1}},
      {"b", {"b", 1024, {100, 900}, 2}},
      {"c", {"c", 4096, {3001}, 1}},
      {"d", {"d", 1024, {5, 131, 262, 390, 517, 650, 781, 1010}, 8}},
      {"e", {"e", 256, {17, 60, 128, 199, 240}, 3}},
      {"f", {"f", 1024, {737}, 1, 0.3, false}},
      {"fv", {"fv", 1024, {737}, 1, 0.3, true}},
      // The rate depends on the subset: 0.3 for the whole list rising to 1.0
      // for {737} alone; 0.6 for the whole list falling to 0.25.
      {"fr", {"fr", 1024, {737}, 1, 0.3, false, RateProfile::Rising}},
      {"ff", {"ff", 1024, {737}, 1, 0.6, false, RateProfile::Falling, 0.25}},
  };
}

// splitmix64 output #t+1 for the seed, as a double in [0, 1).
inline double splitmixU01(std::uint64_t seed, std::uint64_t t) {
  std::uint64_t x = seed + (t + 1) * 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * std::ldexp(1.0, -53);
}

// A trial counter that answers like the reference Oracle: trial t is the
// t-th call, every call counts, flakiness applied on top of the truth.
class ListOracle {
 public:
  ListOracle(ListProblem problem, std::uint64_t seed = 0) : problem_(std::move(problem)), seed_(seed) {}
  bool operator()(const std::vector<std::size_t>& keep) {
    const std::uint64_t t = calls_++;
    bool result = problem_.interesting(keep);
    if (result && problem_.flaky_p > 0) {
      const double u = (problem_.force_first && t == 0) ? 0.0 : splitmixU01(seed_, t);
      result = u < problem_.rate(keep.size());
    }
    return result;
  }
  std::uint64_t calls() const { return calls_; }
  const ListProblem& problem() const { return problem_; }

 private:
  ListProblem problem_;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
};

// Searches like the engine: estimate the original's failure rate, decide each
// candidate with the sequential rule, final 1-minimality check. *trials
// counts every call of the test, as the reference oracle does.
inline std::vector<std::size_t> solveFlaky(const std::string& name, std::uint64_t seed, std::size_t* trials) {
  ListOracle oracle(listProblems().at(name), seed);
  const std::size_t n = oracle.problem().n;
  const FlakyOptions options;
  FailureRate rate;
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  auto batchOf = [&oracle](const std::vector<std::size_t>& keep) {
    return [&oracle, keep](std::size_t count, std::size_t) {
      std::vector<bool> results;
      for (std::size_t i = 0; i < count; ++i) results.push_back(oracle(keep));
      return results;
    };
  };
  if (estimateOriginal(batchOf(all), rate, options, 1, n).failures == 0) {
    *trials = oracle.calls();
    return {};
  }
  // As engine/pipeline.cc searches a pass: one pass rejects while the failure
  // looks deterministic, the final check at full strength, and a search
  // during which it turned out flaky runs again from its result.
  std::vector<std::size_t> current = all;
  auto contains = [](const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
    return std::includes(a.begin(), a.end(), b.begin(), b.end());
  };
  MonotonicityWatch<std::vector<std::size_t>, decltype(contains)> watch(contains);
  watch.add(all, true);
  for (bool again = true; again;) {
    const bool deterministic = rate.deterministic();
    DeltaSearch search(current.size(), searchOptions(rate));
    std::vector<std::size_t> best = current;  // the last candidate that failed
    while (!search.done() && deterministic == rate.deterministic()) {
      std::vector<std::size_t> keep;
      for (std::size_t i : search.query()) keep.push_back(current[i]);
      const bool failed =
          decideCandidate(batchOf(keep), rate, options, 1, keep.size(), search.checkingFinal()).interesting;
      if (rate.deterministic())
        if (auto why = watch.add(keep, failed)) rate.contradict(*why);
      if (failed) best = keep;
      search.answer(failed);
    }
    if (!search.done()) {  // turned flaky: search again from the last failing candidate, with streaks
      current = best;
      continue;
    }
    std::vector<std::size_t> result;
    for (std::size_t i : search.result()) result.push_back(current[i]);
    again = deterministic && !rate.deterministic() && result.size() > 1;
    current = result;
  }
  *trials = oracle.calls();
  return current;
}

// The deterministic problems a-e through the same default model (flakiness
// handling on): what a deterministic failure costs when nobody told
// minrepro it is deterministic.
inline std::vector<std::size_t> solveWithDefaultModel(const std::string& name, std::size_t* trials) {
  return solveFlaky(name, 1, trials);
}

}  // namespace minrepro::testing
