// Unit tier: the oracle and the search with a fake executor.
#include "engine/oracle.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "core/delta.h"
#include "tests/fake_trials.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

using testing::FakeBatchStore;
using testing::FakeExecutor;
using testing::indexError;

bool has(const std::vector<std::int64_t>& v, std::int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

struct OracleFixture : ::testing::Test {
  testing::TempDir dir;
  CaseConfig config;
  Log log{true};
  void SetUp() override {
    config.work_dir = dir.path();
    config.batch = dir.path() / "user-batch.pt";
    config.base_dir = "/cases/here";
    config.command =
        CommandTrial{{"/usr/bin/python3", "-u", "{case_dir}/step.py", "{batch}", "--out={workdir}/o"}, {}, {}};
    config.flaky.enabled = false;  // one trial decides, unless a test says otherwise
  }
  Selection all(std::int64_t n) {
    Selection s;
    for (std::int64_t i = 0; i < n; ++i) s.samples.push_back(i);
    return s;
  }
  static Selection keeping(std::vector<std::int64_t> samples) {
    Selection s;
    s.samples = std::move(samples);
    return s;
  }
};

TEST_F(OracleFixture, SubstitutesPlaceholdersWithoutAShell) {
  FakeBatchStore batch(4, config.batch);
  FakeExecutor exec([](const auto&) { return indexError(4); });
  TrialOracle oracle(config, batch, exec, "unused", log);
  oracle.run(all(4));
  oracle.run(all(3));
  ASSERT_EQ(exec.specs.size(), 2u);
  const auto& argv = exec.specs[1].argv;
  EXPECT_EQ(argv[0], "/usr/bin/python3");
  EXPECT_EQ(argv[2], "/cases/here/step.py");
  EXPECT_TRUE(argv[3].ends_with("/trial-000002/batch.pt")) << argv[3];
  EXPECT_TRUE(argv[4].starts_with("--out=" + dir.path().string())) << argv[4];
  // The original runs on a copy of the user's own batch file, never on a
  // rewrite of it, at the same place as a candidate's.
  EXPECT_TRUE(exec.specs[0].argv[3].ends_with("/trial-000001/batch.pt")) << exec.specs[0].argv[3];
  EXPECT_EQ(exec.batches_read[0], testing::readFile(config.batch));
}

TEST_F(OracleFixture, TrialsGetTheSeedTheirNumberAndTheDeterminismSwitch) {
  FakeBatchStore batch(4, config.batch);
  FakeExecutor exec([](const auto&) { return indexError(4); });
  config.seed = 42;
  config.deterministic = true;
  TrialOracle oracle(config, batch, exec, "unused", log);
  oracle.run(all(4));
  oracle.run(all(3));
  ASSERT_EQ(exec.specs.size(), 2u);
  EXPECT_EQ(exec.specs[0].env_set.at("MINREPRO_SEED"), "42");
  EXPECT_EQ(exec.specs[0].env_set.at("PYTHONHASHSEED"), "42");
  EXPECT_EQ(exec.specs[0].env_set.at("MINREPRO_TRIAL"), "1");
  EXPECT_EQ(exec.specs[1].env_set.at("MINREPRO_TRIAL"), "2");
  EXPECT_EQ(exec.specs[1].env_set.at("MINREPRO_DETERMINISTIC"), "1");
  EXPECT_EQ(exec.specs[1].env_set.at("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
}

TEST_F(OracleFixture, DifferentFailureIsNeverAccepted) {
  FakeBatchStore batch(8, config.batch);
  // Sample 5 triggers the bug; without it, sample 2 triggers a different bug.
  FakeExecutor exec([](const std::vector<std::int64_t>& kept) {
    if (has(kept, 5)) return indexError(4);
    if (has(kept, 2)) return testing::exitedWith(1, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
    return testing::exitedWith(0, "");
  });
  TrialOracle oracle(config, batch, exec, "unused", log);
  ASSERT_EQ(oracle.estimateOriginal(all(8)).failures, 1u);
  const Selection only2 = keeping({2}), only5 = keeping({5}), none = keeping({0, 1});
  EXPECT_FALSE(oracle.interesting(only2));
  EXPECT_TRUE(oracle.interesting(only5));
  EXPECT_FALSE(oracle.interesting(none));
  EXPECT_EQ(oracle.stats().different_failure, 1u);
  EXPECT_EQ(oracle.stats().passed, 1u);
  EXPECT_EQ(oracle.stats().same_failure, 2u);  // the original and {5}
  ASSERT_EQ(oracle.stats().other_bugs.size(), 1u);
  EXPECT_NE(oracle.stats().other_bugs.begin()->first.find("out-of-memory"), std::string::npos);
}

// Candidates failing another way with messages that differ only in their
// numbers (a cat of the sizes each candidate has) are one other bug, counted
// under the first message, with how many messages it had. Before, each size
// was its own "1x" line in the log and REPORT.md.
TEST_F(OracleFixture, OtherFailuresThatDifferOnlyInNumbersAreOneEntry) {
  FakeBatchStore batch(8, config.batch);
  FakeExecutor exec([](const std::vector<std::int64_t>& kept) {
    if (has(kept, 5)) return indexError(4);
    return testing::exitedWith(1, "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size " +
                                      std::to_string(16 * kept.size()) + " but got size 128\n");
  });
  TrialOracle oracle(config, batch, exec, "unused", log);
  ASSERT_EQ(oracle.estimateOriginal(all(8)).failures, 1u);
  EXPECT_FALSE(oracle.interesting(keeping({0, 1})));
  EXPECT_FALSE(oracle.interesting(keeping({0, 1, 2})));
  EXPECT_FALSE(oracle.interesting(keeping({3})));
  ASSERT_EQ(oracle.stats().other_bugs.size(), 1u);
  EXPECT_NE(oracle.stats().other_bugs.begin()->first.find("Expected size 32 but got size 128"), std::string::npos);
  EXPECT_EQ(oracle.stats().other_bugs.begin()->second, 3u);
  EXPECT_EQ(oracle.stats().other_bug_variants.at(oracle.stats().other_bugs.begin()->first), 3u);
}

// A flaky case whose smaller candidate fails two ways: the recorded
// failure in some runs and a second error (reached only once the case is
// cut) in others. That candidate has slipped to a second bug and is
// rejected; one whose other runs only passed is accepted.
TEST_F(OracleFixture, FlakyCandidateThatAlsoFailsAnotherWayIsRejected) {
  config.flaky.enabled = true;
  config.flaky.initial_failures = 1;
  FakeBatchStore batch(8, config.batch);
  std::map<std::size_t, int> runs;  // by kept count
  FakeExecutor exec([&](const std::vector<std::int64_t>& kept) {
    const int run = runs[kept.size()]++;
    if (run % 2 == 1) return indexError(4);  // the original too passes, then fails: flaky from the start
    if (kept.size() == 1)
      return testing::exitedWith(1,
                                 "ValueError: Input and output sizes should be greater than 0, but got input "
                                 "(W: 1) and output (W: 0)\n");
    return testing::exitedWith(0, "");
  });
  TrialOracle oracle(config, batch, exec, "unused", log);
  ASSERT_EQ(oracle.estimateOriginal(all(8)).failures, 1u);
  EXPECT_TRUE(oracle.interesting(keeping({4, 5})));  // passed, then failed the recorded way
  EXPECT_FALSE(oracle.interesting(keeping({5})));    // failed another way, then the recorded way
  EXPECT_EQ(oracle.stats().slipped, 1u);
  EXPECT_FALSE(oracle.confirm(keeping({5})));
}

// With free job slots the original's check runs the search's first
// candidates beside it, and never more copies of the original than the
// failures it still wants.
TEST_F(OracleFixture, OriginalsCheckRunsTheFirstCandidatesBesideItWithinTheFailuresWanted) {
  config.flaky.enabled = true;
  config.flaky.initial_failures = 2;
  FakeBatchStore batch(8, config.batch);
  std::size_t originals = 0;
  FakeExecutor exec([&](const std::vector<std::int64_t>& kept) {
    originals += kept.size() == 8 ? 1 : 0;
    return has(kept, 5) ? indexError(4) : testing::exitedWith(0, "");
  });
  TrialOracle oracle(config, batch, exec, "unused", log, nullptr, {}, 4);
  const std::vector<Selection> first = {keeping({0, 1, 2, 3}), keeping({4, 5, 6, 7})};
  auto next = [&](std::size_t, bool) {
    std::vector<Speculated> out;
    for (const Selection& s : first) out.push_back({s, false});
    return out;
  };
  const OriginalEstimate estimate = oracle.estimateOriginal(all(8), next);
  EXPECT_EQ(estimate.failures, 2u);
  EXPECT_EQ(estimate.runs, 2u) << "two failures wanted: two copies of the original, not four";
  EXPECT_EQ(oracle.stats().rounds, 1u);
  EXPECT_EQ(oracle.stats().speculative, 2u);
  EXPECT_EQ(exec.specs.size(), 4u);
  EXPECT_EQ(originals, 2u);
  // A candidate's run ahead is its first result: the one that failed is
  // accepted without a trial of its own.
  const std::size_t trials = oracle.stats().trials;
  EXPECT_TRUE(oracle.interesting(first[1]));
  EXPECT_EQ(oracle.stats().trials, trials);
}

// A candidate run ahead beside an original that has not failed yet (a flaky
// original's first run passed) means nothing: it is not counted, and its
// failure, of another kind, can never become the reference.
TEST_F(OracleFixture, TrialRunAheadBeforeTheOriginalFailedIsNotUsedNorTheReference) {
  config.flaky.enabled = true;
  config.flaky.initial_failures = 1;
  log.openFile(dir.path() / "oracle.log");
  FakeBatchStore batch(8, config.batch);
  int original_runs = 0;
  FakeExecutor exec([&](const std::vector<std::int64_t>& kept) {
    if (kept.size() == 8) return ++original_runs == 1 ? testing::exitedWith(0, "") : indexError(4);
    return testing::exitedWith(1, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n");
  });
  TrialOracle oracle(config, batch, exec, "unused", log, nullptr, {}, 2);
  auto next = [&](std::size_t, bool) { return std::vector<Speculated>{{keeping({0}), false}}; };
  const OriginalEstimate estimate = oracle.estimateOriginal(all(8), next);
  EXPECT_EQ(estimate.runs, 2u);
  EXPECT_EQ(estimate.failures, 1u);
  EXPECT_EQ(oracle.reference().family, FailureFamily::IndexError) << oracle.reference().summary();
  EXPECT_EQ(oracle.stats().rounds, 2u);
  EXPECT_EQ(oracle.stats().speculative, 2u) << "run ahead in both rounds: the first run was not kept";
  EXPECT_EQ(oracle.stats().different_failure, 1u) << "only the run after the reference existed counts";
  std::ifstream in(dir.path() / "oracle.log");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("run ahead before the original failed; not used"), std::string::npos) << text;
  EXPECT_FALSE(oracle.interesting(keeping({0})));
}

// A plain run of the original started before any forked run failed is
// judged once the reference exists, counted as a plain run of the original,
// and the forked runs meanwhile used only the slots left to them.
TEST_F(OracleFixture, PlainRunStartedBesideTheForkedOnesIsJudgedAgainstTheirReference) {
  config.flaky.enabled = true;
  FakeBatchStore batch(8, config.batch);
  FakeExecutor exec([&](const std::vector<std::int64_t>&) { return indexError(4); });
  TrialOracle oracle(config, batch, exec, "unused", log, nullptr, {}, 2);
  oracle.reserveSlots(1);
  auto plain = oracle.startFreshOriginals(all(8), 1);
  const OriginalEstimate forked = oracle.estimateOriginal(all(8));
  oracle.reserveSlots(0);
  oracle.finishFreshOriginals(all(8), plain.get());
  EXPECT_EQ(forked.failures, 3u);
  EXPECT_EQ(oracle.stats().rounds, 3u) << "the forked runs one at a time: the other slot was the plain run's";
  EXPECT_EQ(oracle.freshOriginalRuns(all(8)), 1u);
  const OriginalEstimate again = oracle.runOriginalFresh(all(8), 1);
  EXPECT_EQ(again.failures, 1u) << "the plain run failed like the reference";
  EXPECT_EQ(oracle.stats().trials, 4u) << "and was not run again";
}

TEST_F(OracleFixture, SameBugWithOtherNumbersMatchesUnlessThePatternSaysOtherwise) {
  FakeBatchStore batch(8, config.batch);
  FakeExecutor exec([](const std::vector<std::int64_t>& kept) { return indexError(has(kept, 7) ? 7 : 4); });
  TrialOracle oracle(config, batch, exec, "unused", log);
  oracle.setReference(oracle.run(all(8)).signature);
  EXPECT_TRUE(oracle.interesting(keeping({1})));
  config.expected.message_regex = "Target 7 ";
  EXPECT_FALSE(oracle.interesting(keeping({2})));
  EXPECT_TRUE(oracle.interesting(keeping({7})));
}

TEST_F(OracleFixture, SearchWithOracleFindsTheCulpritsAndCleansTrialDirs) {
  FakeBatchStore batch(100, config.batch);
  FakeExecutor exec([](const std::vector<std::int64_t>& kept) {
    return has(kept, 13) && has(kept, 88) ? indexError(4) : testing::exitedWith(0, "");
  });
  TrialOracle oracle(config, batch, exec, "unused", log);
  oracle.setReference(oracle.run(all(100)).signature);
  auto keep = minimizeUnits(100, [&](const std::vector<std::size_t>& k) {
    Selection s;
    for (auto i : k) s.samples.push_back(static_cast<std::int64_t>(i));
    return oracle.interesting(s);
  });
  EXPECT_EQ(keep, (std::vector<std::size_t>{13, 88}));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "trials"));
}

TEST_F(OracleFixture, TrialThatCannotStartStopsTheRun) {
  FakeBatchStore batch(4, config.batch);
  FakeExecutor exec([](const auto&) {
    TrialOutcome o;
    o.end = TrialEnd::FailedToStart;
    o.start_error = "program 'x' not found on PATH";
    return o;
  });
  TrialOracle oracle(config, batch, exec, "unused", log);
  EXPECT_THROW(oracle.interesting(all(4)), TrialStartError);
}

}  // namespace
}  // namespace minrepro
