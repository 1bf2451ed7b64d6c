// Forked trials checked against fresh ones.
//
// A child of a fork server is a new process, but it starts from the
// server's state: its imported modules and their globals, its random
// generators, its heap and allocator arenas. A trial whose outcome depends
// on that state (a heap corruption that a warm heap hides, a module-level
// cache, a generator a preloaded module advanced) fails differently forked
// than as the plain process a maintainer will run. Two checks keep the
// fork server's speed from changing the answer:
//   - before the reduction, the original also runs as plain processes, as
//     often as it ran forked; when plain runs never fail the same way, or
//     the two rates differ (Fisher's exact test, p < 0.01), every trial of
//     the run is a plain process;
//   - agreement on the original does not carry over to its subsets (a
//     sample may fail alone only fresh), so a result reached with forked
//     trials is checked for 1-minimality with plain processes: each kept
//     sample and each branch still on is removed once more, in a plain
//     process, with the same flaky rule as any candidate.
#pragma once

#include <string>

#include "engine/log.h"
#include "engine/oracle.h"
#include "reducers/reducer.h"

namespace minrepro {

// PlainTimesOut: every plain run ran past trial.timeout where forked ones
// failed: the timeout is shorter than a fresh process takes to start
// (Python and torch), not a failure that needs the server's state.
enum class ForkVerdict { Agree, UsePlainOnly, FailsOnlyForked, PlainTimesOut };

struct ForkComparison {
  ForkVerdict verdict = ForkVerdict::Agree;
  OriginalEstimate forked, plain;
  double p_value = 1;
  double timeout_seconds = 0;    // trial.timeout, for PlainTimesOut's advice
  std::string describe() const;  // one line for the log and REPORT.md
  std::string counts() const;    // "the original failed the same way in F of N forked runs and ..."
};

// Runs the original as plain processes (as many runs as `forked` had; when
// none fails, up to `rejection_streak` runs, the passes that would reject a
// candidate) and decides; on UsePlainOnly the oracle is switched to plain
// processes. The runs go in rounds of --jobs and stop as soon as the
// verdict is settled: once a plain run failed alike and no outcome of the
// runs left could make Fisher's test reject (3 forked failures against
// 3 plain runs never can), the answer is Agree whatever they show. Each
// plain run imports torch afresh, so the early stop is a second or more.
ForkComparison compareForkedWithFresh(const Selection& all, const OriginalEstimate& forked, TrialOracle& oracle,
                                      std::size_t rejection_streak, double timeout_seconds);

struct FreshMinimality {
  bool ran = false;
  std::size_t samples_removed = 0;
  std::size_t branches_removed = 0;
  std::size_t checked = 0;  // units tried
  std::string describe() const;
};

// The 1-minimality check with plain processes (the oracle is switched to
// them for good), each removal decided at the final check's strength
// (TrialOracle::interesting's recheck); returns the result, smaller where a
// unit was kept only because forked trials of its removal passed, or a
// pass by bad luck rejected it.
Selection checkMinimalityFresh(const CaseView& view, TrialOracle& oracle, Selection best, FreshMinimality& report);

}  // namespace minrepro
