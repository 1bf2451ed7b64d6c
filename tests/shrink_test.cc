// The shrink job with a fake executor on real batch files: flaky failures,
// journal and resume, budgets, interruption, parallel trials. Trials cost
// nothing here, so these run hundreds of them in milliseconds.
#include "engine/shrink.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <mutex>

#include "engine/archive/tar_gz.h"
#include "harness/batch_io.h"
#include "tests/fake_trials.h"
#include "tests/list_problems.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

// Decides each trial from the sample ids in its batch file. Thread safe;
// counts trials; the trial index feeds the flakiness generator.
class IdExecutor : public Executor {
 public:
  using Rule = std::function<bool(const std::vector<std::int64_t>& ids, std::uint64_t trial)>;
  explicit IdExecutor(Rule fails) : fails_(std::move(fails)) {}
  TrialOutcome run(const TrialSpec& spec) override {
    std::vector<std::int64_t> ids;
    for (const auto& arg : spec.argv) {
      if (!arg.ends_with("batch.pt")) continue;
      const NamedTensors batch = readBatchFile(arg);
      const at::Tensor* found = batch.find("sample_id");
      // As a real step would: a batch without the tensor (the probe of
      // engine/batch_dependence.h) fails otherwise.
      if (!found) return testing::exitedWith(1, "KeyError: 'sample_id'");
      const at::Tensor t = found->contiguous();
      ids.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    }
    std::uint64_t trial;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      trial = trials_++;
    }
    if (on_trial) on_trial(trial);
    return fails_(ids, trial) ? testing::indexError(4) : testing::exitedWith(0, "");
  }
  std::uint64_t trials() const { return trials_; }
  std::function<void(std::uint64_t)> on_trial;

 private:
  Rule fails_;
  std::mutex mutex_;
  std::uint64_t trials_ = 0;
};

bool has(const std::vector<std::int64_t>& v, std::int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

struct ShrinkFixture : ::testing::Test {
  testing::TempDir dir;
  ShrinkOptions options;
  void makeCase(int n, const std::string& extra = "") {
    NamedTensors b;
    b.names = {"input", "sample_id"};
    b.tensors = {at::zeros({n, 2}), at::arange(n, at::kLong)};
    writeBatchFile(b, dir.path() / "batch.pt");
    testing::writeFile(dir.path() / "case.yaml",
                       "batch: batch.pt\nsamples: {tensors: {input: 0}, ids: sample_id}\n"
                       "trial: {command: [/bin/false, '{batch}']}\n" +
                           extra);
    options.config = dir.path() / "case.yaml";
    options.quiet = true;
    options.python = "/bin/true";  // no environment probe needed here
    // A fake executor scripts the trials: there is no real program for the
    // archive's repro.py to run, so the self-check (tested end to end) is off.
    options.self_check = false;
  }
  std::vector<std::int64_t> archivedIds() {
    for (const auto& e : readTarGz(dir.path() / "repro.tar.gz")) {
      if (e.name != "batch.pt") continue;
      testing::writeFile(dir.path() / "out.pt", e.contents);
      const at::Tensor t = readBatchFile(dir.path() / "out.pt").find("sample_id")->contiguous();
      return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
    }
    return {};
  }
  std::string report() {
    for (const auto& e : readTarGz(dir.path() / "repro.tar.gz"))
      if (e.name == "REPORT.md") return e.contents;
    return "";
  }
  // "N trials in R rounds" of the last run's report: R, the run's length in trial times.
  std::size_t rounds() {
    const std::string text = report();
    const auto at = text.find(" rounds (");
    const auto from = text.rfind(' ', at - 1) + 1;
    return at == std::string::npos ? 0 : std::stoul(text.substr(from, at - from));
  }
};

TEST_F(ShrinkFixture, FlakyCulpritIsFoundAndTheRateReported) {
  makeCase(1024);
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    IdExecutor exec(
        [seed](const auto& ids, std::uint64_t t) { return has(ids, 737) && testing::splitmixU01(seed, t) < 0.3; });
    ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced) << seed;
    EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{737})) << seed;
    const std::string text = report();
    EXPECT_NE(text.find("Failure rate: 0."), std::string::npos) << text;
    EXPECT_LT(exec.trials(), 400u);
  }
}

TEST_F(ShrinkFixture, DeterministicModeUsesOneTrialPerCandidate) {
  makeCase(1024, "flaky: {enabled: false}\n");
  IdExecutor exec([](const auto& ids, std::uint64_t) { return has(ids, 737); });
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{737}));
  // 12 for the search incl. the original, 1 confirmation, 1 traced run of
  // the minimal case (the files the trial reads, engine/archive/bundle.h).
  EXPECT_EQ(exec.trials(), 14u);
}

// Links planted in a work directory an earlier run left (best/ a symbolic
// link to a user's directory, original-batch.pt a second name of a user's
// file, lock a symbolic link to another, temporary names in its
// directories): the next run writes none of the user's files through them. Before, best/batch.pt and best/case.yaml
// replaced the user's, and the batch was copied into the user's file.
TEST_F(ShrinkFixture, LinksPlantedInTheWorkDirectoryAreNotWrittenThrough) {
  makeCase(64, "flaky: {enabled: false}\n");
  IdExecutor first([](const auto& ids, std::uint64_t) { return has(ids, 37); });
  ASSERT_EQ(runShrink(options, &first), ExitStatus::Reduced);
  const fs::path work = dir.path() / "minrepro-work", victim = dir.path() / "victim";
  ASSERT_TRUE(fs::exists(work / "best")) << "the work directory is not where the test looks";
  fs::create_directories(victim / "best");
  testing::writeFile(victim / "best" / "batch.pt", "USERDATA");
  testing::writeFile(victim / "best" / "case.yaml", "USERCASE");
  testing::writeFile(victim / "orig.txt", "ORIG");
  testing::writeFile(victim / "lock.txt", "LOCK");
  fs::remove_all(work / "best");
  fs::create_directory_symlink(victim / "best", work / "best");
  fs::remove(work / "original-batch.pt");
  fs::create_hard_link(victim / "orig.txt", work / "original-batch.pt");
  fs::remove(work / "lock");
  fs::create_symlink(victim / "lock.txt", work / "lock");
  // Temporary names in the directories the run writes into (probe 18).
  testing::writeFile(victim / "partial.txt", "PARTIAL");
  testing::writeFile(victim / "trace.txt", "TRACE");
  fs::create_directories(work / "neighbours");
  fs::create_directories(work / "trace");
  fs::create_symlink(victim / "partial.txt", work / "neighbours" / "plus_one.pt.partial");
  fs::create_hard_link(victim / "trace.txt", work / "trace" / "batch.pt.partial");
  fs::create_symlink(victim / "dangling-target", work / "REPORT.html.tmp");
  // The compilers' cache directory itself a link (probe 25: the trials' inductor wrote into its target).
  fs::remove_all(work / "compile-cache");
  fs::create_directories(victim / "cache");
  fs::create_directory_symlink(victim / "cache", work / "compile-cache");
  IdExecutor second([](const auto& ids, std::uint64_t) { return has(ids, 37); });
  ASSERT_EQ(runShrink(options, &second), ExitStatus::Reduced);
  EXPECT_EQ(testing::readFile(victim / "best" / "batch.pt"), "USERDATA");
  EXPECT_EQ(testing::readFile(victim / "best" / "case.yaml"), "USERCASE");
  EXPECT_EQ(testing::readFile(victim / "orig.txt"), "ORIG");
  EXPECT_EQ(testing::readFile(victim / "lock.txt"), "LOCK");
  EXPECT_EQ(testing::readFile(victim / "partial.txt"), "PARTIAL");
  EXPECT_EQ(testing::readFile(victim / "trace.txt"), "TRACE");
  EXPECT_FALSE(fs::exists(victim / "dangling-target"));
  EXPECT_FALSE(fs::is_symlink(work / "best"));
  EXPECT_FALSE(fs::is_symlink(work / "compile-cache"));
  EXPECT_TRUE(fs::exists(work / "best" / "batch.pt"));
  EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{37}));
}

// --materialize-best with best/ a link planted since the run: the link is
// removed, not written through (probe 29: the user's case.yaml and batch.pt
// in its target were replaced).
TEST_F(ShrinkFixture, MaterializeBestDoesNotWriteThroughAPlantedLink) {
  makeCase(64, "flaky: {enabled: false}\n");
  IdExecutor first([](const auto& ids, std::uint64_t) { return has(ids, 37); });
  ASSERT_EQ(runShrink(options, &first), ExitStatus::Reduced);
  const fs::path work = dir.path() / "minrepro-work", victim = dir.path() / "victim";
  fs::create_directories(victim);
  testing::writeFile(victim / "case.yaml", "USERCASE");
  testing::writeFile(victim / "batch.pt", "USERDATA");
  fs::remove_all(work / "best");
  fs::create_directory_symlink(victim, work / "best");
  options.materialize_best = true;
  options.quiet = true;
  IdExecutor none([](const auto&, std::uint64_t) { return false; });
  EXPECT_EQ(runShrink(options, &none), ExitStatus::Reduced);
  EXPECT_EQ(testing::readFile(victim / "case.yaml"), "USERCASE");
  EXPECT_EQ(testing::readFile(victim / "batch.pt"), "USERDATA");
  EXPECT_FALSE(fs::is_symlink(work / "best"));
  EXPECT_TRUE(fs::exists(work / "best" / "batch.pt"));
}

TEST_F(ShrinkFixture, ParallelTrialsGiveTheSameResult) {
  makeCase(512);
  auto rule = [](const auto& ids, std::uint64_t) { return has(ids, 100) && has(ids, 400); };
  IdExecutor one(rule), four(rule);
  ASSERT_EQ(runShrink(options, &one), ExitStatus::Reduced);
  const auto serial = archivedIds();
  options.jobs = 4;
  ASSERT_EQ(runShrink(options, &four), ExitStatus::Reduced);
  EXPECT_EQ(archivedIds(), serial);
  EXPECT_EQ(serial, (std::vector<std::int64_t>{100, 400}));
}

TEST_F(ShrinkFixture, TwoJobsTakeFewerRoundsForTheSameResult) {
  // Rounds (sets of trials run at once) are what --jobs saves: on trials
  // that take seconds, wall time follows them (bench/bench_jobs.sh).
  for (const std::string flaky : {"true", "false"}) {
    makeCase(512, "flaky: {enabled: " + flaky + "}\n");
    auto rule = [](const auto& ids, std::uint64_t) { return has(ids, 313); };
    IdExecutor one(rule), two(rule);
    options.jobs = 1;
    ASSERT_EQ(runShrink(options, &one), ExitStatus::Reduced);
    const std::size_t serial = rounds();
    EXPECT_EQ(serial + 1, one.trials()) << "one job: every trial is a round of its own (the file trace is none)";
    options.jobs = 2;
    ASSERT_EQ(runShrink(options, &two), ExitStatus::Reduced);
    EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{313})) << flaky;
    EXPECT_LE(rounds() * 10, serial * 7) << "flaky " << flaky << ": " << rounds() << " rounds against " << serial;
  }
}

TEST_F(ShrinkFixture, BudgetWritesTheBestSoFarAndResumeFinishesWithoutRepeatingTrials) {
  makeCase(1024);
  auto rule = [](const auto& ids, std::uint64_t) { return has(ids, 737); };
  IdExecutor whole(rule);
  ASSERT_EQ(runShrink(options, &whole), ExitStatus::Reduced);
  const auto expected = archivedIds();

  options.max_trials = 8;
  IdExecutor first(rule);
  ASSERT_EQ(runShrink(options, &first), ExitStatus::BudgetSpent);
  EXPECT_EQ(first.trials(), 9u);  // the budget, and the file trace of the best case
  const auto partial = archivedIds();
  EXPECT_TRUE(has(partial, 737));
  EXPECT_GT(partial.size(), 1u);
  EXPECT_NE(report().find("Stopped early"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir.path() / "minrepro-work" / "best" / "batch.pt"));

  options.max_trials = 0;
  options.resume = true;
  IdExecutor second(rule);
  ASSERT_EQ(runShrink(options, &second), ExitStatus::Reduced);
  EXPECT_EQ(archivedIds(), expected);
  // Each run traces the files its final case reads once, outside the budget.
  EXPECT_EQ(first.trials() + second.trials(), whole.trials() + 1) << "a resumed run repeats no finished trial";
}

// A journal with a line of 64 MB appended (tampered, or a disk's garbage):
// --resume reads a bounded part of each line and finishes as before (probe
// 25: a 300 MB line was read whole, 700 MB of memory).
TEST_F(ShrinkFixture, ResumeReadsAnEndlessJournalLineInBoundedParts) {
  makeCase(64);
  IdExecutor exec([](const auto& ids, std::uint64_t) { return has(ids, 7); });
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  {
    std::ofstream journal(dir.path() / "minrepro-work" / "journal.txt", std::ios::app);
    journal << "trial " << std::string(64 << 20, 'x') << "\n";
  }
  options.resume = true;
  IdExecutor again([](const auto& ids, std::uint64_t) { return has(ids, 7); });
  EXPECT_EQ(runShrink(options, &again), ExitStatus::Reduced);
  EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{7}));
}

TEST_F(ShrinkFixture, ResumeRefusesAJournalOfAnotherCase) {
  makeCase(64);
  IdExecutor exec([](const auto& ids, std::uint64_t) { return has(ids, 7); });
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  makeCase(65);
  options.resume = true;
  EXPECT_THROW(runShrink(options, &exec), BadInputError);
}

TEST_F(ShrinkFixture, InterruptWritesTheBestSoFarAndExitsWithItsOwnStatus) {
  // SIGHUP: the terminal of an overnight run went away.
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    makeCase(1024);
    IdExecutor exec([](const auto& ids, std::uint64_t) { return has(ids, 737); });
    exec.on_trial = [signal](std::uint64_t t) {
      if (t == 10) ::raise(signal);
    };
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(runShrink(options, &exec), ExitStatus::Interrupted) << strsignal(signal);
    // Said at the signal, before the trials are ended and the archive written.
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("minrepro: signal received: ending the running trials; the best case so far is written next"),
              std::string::npos)
        << said;
    // How to go on (#43.8): the same case and work directory, with --resume (the log; the run is quiet).
    const std::string log = testing::readFile(dir.path() / "minrepro-work" / "minrepro.log");
    // "minrepro" when one is on PATH, else the running program's path.
    EXPECT_NE(log.find("to go on from here (the trials so far are replayed, not run again): "), std::string::npos)
        << log;
    EXPECT_NE(log.find(" shrink --config " + options.config.string()), std::string::npos) << log;
    EXPECT_NE(log.find(" --resume\n"), std::string::npos) << log;
    EXPECT_TRUE(has(archivedIds(), 737));
    EXPECT_NE(report().find("interrupted"), std::string::npos);
    EXPECT_EQ(exec.trials(), 11u) << "no trial is launched after " << strsignal(signal);
  }
}

// Interrupted while the original is checked, before it failed: no archive
// is promised or written, and the log says how to go on.
TEST_F(ShrinkFixture, InterruptBeforeTheOriginalFailedSaysSoAndHowToGoOn) {
  makeCase(64);
  IdExecutor exec([](const auto& ids, std::uint64_t trial) { return trial > 2 && has(ids, 7); });
  exec.on_trial = [](std::uint64_t t) {
    if (t == 1) ::raise(SIGINT);
  };
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runShrink(options, &exec), ExitStatus::Interrupted);
  ::testing::internal::GetCapturedStderr();
  const std::string log = testing::readFile(dir.path() / "minrepro-work" / "minrepro.log");
  EXPECT_NE(log.find("stopping: interrupted before the original failed: no archive written"), std::string::npos) << log;
  EXPECT_EQ(log.find("writing the best case so far"), std::string::npos) << log;
  EXPECT_NE(log.find("to go on from here (the trials so far are replayed, not run again): "), std::string::npos) << log;
}

TEST_F(ShrinkFixture, SigpipeDoesNotStopTheRun) {
  // stdout or stderr closed under the run (`| tee` gone): writes fail, the run goes on.
  makeCase(1024);
  IdExecutor exec([](const auto& ids, std::uint64_t) { return has(ids, 737); });
  exec.on_trial = [](std::uint64_t t) {
    if (t == 10) ::raise(SIGPIPE);
  };
  EXPECT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  EXPECT_EQ(archivedIds(), (std::vector<std::int64_t>{737}));
}

}  // namespace
}  // namespace minrepro
