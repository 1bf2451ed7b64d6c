#include "core/delta.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/setting_search.h"

#include "tests/list_problems.h"

namespace minrepro {
namespace {

using testing::ListOracle;
using testing::listProblems;

// Runs the search as the engine does: one trial for the full input, then the search.
std::size_t trialsFor(const std::string& name, std::vector<std::size_t>* result) {
  ListOracle oracle(listProblems().at(name));
  std::vector<std::size_t> all(oracle.problem().n);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_TRUE(oracle(all));
  *result = minimizeUnits(all.size(), [&](const auto& keep) { return oracle(keep); });
  return oracle.calls();
}

// Exact trial counts (deterministic): within 1.25x of the information-theoretic
// bound and below the best public reducer on every problem.
TEST(DeltaTest, StandardProblemsExactTrials) {
  const std::map<std::string, std::size_t> expected{{"a", 12}, {"b", 23}, {"c", 14}, {"d", 81}, {"e", 28}};
  for (const auto& [name, trials] : expected) {
    std::vector<std::size_t> result;
    EXPECT_EQ(trialsFor(name, &result), trials) << name;
    EXPECT_TRUE(listProblems().at(name).isExpected(result)) << name;
  }
}

TEST(DeltaTest, ResultIsOneMinimal) {
  for (const std::string name : {"a", "b", "c", "d", "e"}) {
    std::vector<std::size_t> result;
    trialsFor(name, &result);
    const auto problem = listProblems().at(name);
    ASSERT_TRUE(problem.interesting(result)) << name;
    for (std::size_t i = 0; i < result.size(); ++i) {
      auto smaller = result;
      smaller.erase(smaller.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_FALSE(problem.interesting(smaller)) << name << " without " << result[i];
    }
  }
}

TEST(DeltaTest, NeverAsksAboutEmptyOrRepeatedCandidates) {
  std::set<std::vector<std::size_t>> seen;
  DeltaStats stats;
  auto result = minimizeUnits(
      300,
      [&](const std::vector<std::size_t>& keep) {
        EXPECT_FALSE(keep.empty());
        EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
        EXPECT_TRUE(seen.insert(keep).second) << "candidate asked twice";
        return std::find(keep.begin(), keep.end(), 42) != keep.end() &&
               std::find(keep.begin(), keep.end(), 299) != keep.end();
      },
      &stats);
  EXPECT_EQ(result, (std::vector<std::size_t>{42, 299}));
  EXPECT_EQ(stats.tests, seen.size());
}

// The progress line's estimate of the answers a search still needs: zero
// exactly when it is done; for one culprit among 1024 units (a bisection)
// never short of what is left by more than the one check of the needed
// units alone, and for a setting search an upper bound.
TEST(DeltaTest, RemainingEstimateFollowsTheSearch) {
  DeltaSearch search(1024);
  std::vector<std::size_t> estimates;
  while (!search.done()) {
    estimates.push_back(search.remainingEstimate());
    const Units& q = search.query();
    search.answer(std::find(q.begin(), q.end(), 700) != q.end());
  }
  EXPECT_EQ(search.remainingEstimate(), 0u);
  for (std::size_t i = 0; i < estimates.size(); ++i) {
    EXPECT_GE(estimates[i] + 1, estimates.size() - i) << "query " << i;
    EXPECT_LE(estimates[i], estimates.size() - i + 11) << "query " << i;
  }
  SettingSearch setting(1, 1000);
  while (!setting.done()) {
    const std::size_t before = setting.remainingEstimate();
    setting.answer(setting.query() >= 300);
    EXPECT_LT(setting.remainingEstimate(), before);
  }
  EXPECT_EQ(setting.result(), 300);
  EXPECT_EQ(setting.remainingEstimate(), 0u);
}

TEST(DeltaTest, TinyInputs) {
  EXPECT_TRUE(minimizeUnits(0, [](const auto&) { return true; }).empty());
  EXPECT_EQ(minimizeUnits(1, [](const auto&) { return true; }), (std::vector<std::size_t>{0}));
  // Every unit needed: all stay.
  auto all3 = minimizeUnits(3, [](const auto& keep) { return keep.size() == 3; });
  EXPECT_EQ(all3, (std::vector<std::size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace minrepro

#include "core/flaky.h"

namespace minrepro {
namespace {

TEST(FlakyTest, SmallSeededSubsetOfTheFlakyProblemsEndsRight) {
  // fr and ff: rates that rise and fall with the subset (tests/list_problems.h).
  for (const std::string name : {"f", "fv", "fr", "ff"}) {
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      std::size_t trials = 0;
      EXPECT_EQ(testing::solveFlaky(name, seed, &trials), (std::vector<std::size_t>{737})) << name << " seed " << seed;
      EXPECT_LT(trials, 400u) << name << " seed " << seed;
    }
  }
}

TEST(FlakyTest, RejectionNeedsLongerStreaksWhenTheRateIsLow) {
  FailureRate certain, flaky;
  certain.add(20, 0);
  flaky.add(6, 14);
  EXPECT_LE(certain.passesToReject(0.001, 500), 3u);
  const std::size_t n = flaky.passesToReject(0.001, 500);
  EXPECT_GT(n, 15u);
  EXPECT_LE(flaky.chanceOfPassStreak(n), 0.001);
  EXPECT_GT(flaky.chanceOfPassStreak(n - 1), 0.001);
}

// Evidence about large candidates says less about a much smaller one: its
// streak is longer than the pooled evidence alone would ask, and as long
// as the pooled one once evidence about its own size is in.
TEST(FlakyTest, CandidateFarSmallerThanTheEvidenceWaitsLonger) {
  FailureRate rate;
  rate.add(30, 20, 1024);  // a rate near 0.6 on the whole batch
  const std::size_t pooled = rate.passesToReject(0.001, 500);
  EXPECT_EQ(rate.passesToReject(0.001, 500, 1024), pooled);
  const std::size_t small = rate.passesToReject(0.001, 500, 1);
  EXPECT_GE(2 * small, 3 * pooled) << small << " vs " << pooled;
  EXPECT_LT(small, 100u) << "the pooled rate still carries over, worth 10 trials";
  rate.add(30, 20, 1);
  EXPECT_LE(rate.passesToReject(0.001, 500, 1), pooled + 1);
}

TEST(FlakyTest, DecisionDoesNotDependOnHowManyTrialsRanAtOnce) {
  // Outcomes by trial index: pass, pass, fail, ... ; with 1 or 4 jobs the
  // decision and the trials that counted are the same.
  for (std::size_t jobs : {1u, 2u, 4u}) {
    FailureRate rate;
    rate.add(5, 5);
    std::size_t next = 0;
    const std::vector<bool> script{false, false, true, false, false, false};
    auto run = [&](std::size_t count, std::size_t) {
      std::vector<bool> r;
      for (std::size_t i = 0; i < count; ++i) r.push_back(script[next++ % script.size()]);
      return r;
    };
    const auto decision = decideCandidate(run, rate, FlakyOptions{}, jobs);
    EXPECT_TRUE(decision.interesting) << jobs;
    EXPECT_EQ(decision.trials_used, 3u) << jobs;
    EXPECT_EQ(rate.failures(), 6u);
    EXPECT_EQ(rate.passes(), 7u);
  }
}

}  // namespace
}  // namespace minrepro
