// The search that every list reducer shares (the engine owns the search; a
// reducer only says how many units it has and how to apply a selection).
//
// minimizeUnits finds a small subset of units 0..n-1 that is still
// "interesting" (fails the same way), assuming the full set is. It is an
// adaptive group-testing search (Hwang's generalized binary splitting with
// the number of culprits unknown):
//   * a group of unknown units is removed in one trial; if the failure stays,
//     the whole group is gone at the price of one trial;
//   * if the failure goes away, the group holds a needed unit, which a binary
//     search finds in log2(group) trials, removing every half it can on the way;
//   * after each needed unit is found, one trial asks whether the needed
//     units alone suffice; once several culprits are known, group sizes
//     follow the density of culprits seen so far.
// On the standard problems (shared/bench/list-problems.md) this needs
// a 12, b 23, c 14, d 81, e 28 trials including the check of the full input.
//
// Every unit that is kept was shown to be needed: removing it from a
// superset of the result made the failure go away, so for failures that do
// not vanish when samples are added the result is 1-minimal.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace minrepro {

// Answers whether a candidate keeping exactly these units (ascending) is
// still interesting. The search never asks about the empty set or the full set.
using UnitOracle = std::function<bool(const std::vector<std::size_t>& keep)>;

struct DeltaStats {
  std::size_t tests = 0;       // oracle calls (cache hits excluded)
  std::size_t cache_hits = 0;  // candidates asked about twice
  std::size_t accepted = 0;    // candidates that stayed interesting
};

std::vector<std::size_t> minimizeUnits(std::size_t n, const UnitOracle& oracle,
                                       DeltaStats* stats = nullptr);

}  // namespace minrepro
