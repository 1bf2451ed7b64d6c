#include "core/process/process.h"

#include "core/failure_signature.h"
#include "core/process/job_slots.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TrialSpec shell(const std::string& script, const fs::path& dir) {
  TrialSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.work_dir = dir;
  spec.timeout = 10s;
  return spec;
}

// A killed process stays a zombie until its new parent (init) reaps it:
// only a process that is still running counts as alive.
bool pidAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// The fixed runs around the search share --jobs: never more at once than
// the slots, all of them run, two callers on one JobSlots add up to its size.
TEST(JobSlotsTest, RunsAtMostTheSlotsAtOnceAndEveryRun) {
  for (std::size_t slots : {1u, 2u, 3u}) {
    JobSlots shared(slots);
    std::atomic<int> running{0}, most{0}, done{0};
    auto work = [&](std::size_t) {
      const int now = ++running;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(20ms);
      --running;
      ++done;
    };
    // Two callers at once, as the self-check and the op step are.
    std::thread other([&] { runInSlots(5, shared, work); });
    runInSlots(7, shared, work);
    other.join();
    EXPECT_EQ(done.load(), 12);
    EXPECT_EQ(most.load(), static_cast<int>(slots)) << slots << " slots";
  }
}

TEST(JobSlotsTest, RunsNotStartedWhenStoppedAreSkippedAndSaidSo) {
  JobSlots one(1);
  std::atomic<int> done{0};
  std::vector<bool> ran;
  runInSlots(
      6, one, [&](std::size_t) { ++done; }, [&] { return done.load() >= 2; }, &ran);
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(ran, (std::vector<bool>{true, true, false, false, false, false}));
}

// A run that throws (a Python that cannot start) reaches the caller, as
// it did when the runs went one after another; later runs do not start.
TEST(JobSlotsTest, AnExceptionOfARunIsThrownToTheCaller) {
  JobSlots one(1);
  std::atomic<int> done{0};
  EXPECT_THROW(runInSlots(4, one,
                          [&](std::size_t i) {
                            ++done;
                            if (i == 1) throw std::runtime_error("cannot start");
                          }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 2);
}

TEST(LocalExecutorTest, ExitStatusAndOutput) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("echo out; echo err >&2; exit 3", dir.path()));
  EXPECT_EQ(outcome.end, TrialEnd::Exited);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.stdout_text, "out\n");
  EXPECT_EQ(outcome.stderr_text, "err\n");
  EXPECT_FALSE(outcome.passed());
}

// A flood of warnings before the error (#14, item 4): the first error comes
// after the first MiB, and is still read, with the cut said.
TEST(LocalExecutorTest, AnErrorAfterAFloodOfOutputIsReadFromTheTail) {
  testing::TempDir dir;
  TrialSpec spec = shell(
      "i=0; while [ $i -lt 60000 ]; do echo 'UserWarning: this overload is deprecated' >&2; "
      "i=$((i+1)); done; echo 'IndexError: Target 4 is out of bounds.' >&2; exit 1",
      dir.path());
  spec.timeout = 60s;
  const TrialOutcome outcome = LocalExecutor().run(spec);
  EXPECT_EQ(outcome.stderr_bytes, 60000u * 41 + 39);
  EXPECT_LE(outcome.stderr_text.size(), spec.output_cap_bytes + 200);
  EXPECT_NE(outcome.stderr_text.find("bytes of output cut here; its head and tail were kept"), std::string::npos);
  EXPECT_TRUE(outcome.stderr_text.ends_with("IndexError: Target 4 is out of bounds.\n"));
  const FailureSignature signature = classify(outcome);  // the first error, not "nonzero-exit"
  EXPECT_EQ(signature.family, FailureFamily::IndexError) << signature.summary();
  EXPECT_EQ(signature.message, "Target 4 is out of bounds.");
  EXPECT_NE(describe(outcome).find("; stderr: 2460039 bytes, read at its head and tail"), std::string::npos)
      << describe(outcome);
}

// The disk a trial's output takes stays near its cap while it writes: the
// middle of the file is freed, its length and its head and tail kept.
TEST(LocalExecutorTest, OutputFilesStayWithinTheirDiskCapWhileTheTrialWrites) {
  testing::TempDir dir;
  TrialSpec spec;
  spec.argv = {testing::python(), "-c",
               "import sys, time\n"
               "sys.stdout.buffer.write(b'HEAD\\n')\n"
               "for i in range(64):\n"
               "    sys.stdout.buffer.write(b'x' * (1 << 20)); sys.stdout.flush(); time.sleep(0.03)\n"
               "sys.stdout.buffer.write(b'\\nTAIL\\n')\n"};
  spec.work_dir = dir.path();
  spec.timeout = 60s;
  spec.output_disk_cap_bytes = 4 << 20;
  const TrialOutcome outcome = LocalExecutor().run(spec);
  ASSERT_TRUE(outcome.passed()) << outcome.stderr_text;
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() / "stdout.txt").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), (std::uint64_t{64} << 20) + 11);   // its length is kept
  EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, std::uint64_t{12} << 20);  // 64 MiB written
  EXPECT_TRUE(outcome.stdout_text.starts_with("HEAD\n"));
  EXPECT_TRUE(outcome.stdout_text.ends_with("\nTAIL\n"));
}

TEST(LocalExecutorTest, SignalIsNotAnExitStatus) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("kill -ABRT $$", dir.path()));
  EXPECT_EQ(outcome.end, TrialEnd::Signaled);
  EXPECT_EQ(outcome.signal, SIGABRT);
  EXPECT_EQ(describe(outcome), "killed by SIGABRT");
}

// Every signal has its name, wherever it is printed: a trial killed by
// SIGQUIT said "signal 3" where a SIGSEGV said "SIGSEGV" (#30.9).
TEST(LocalExecutorTest, EverySignalIsNamed) {
  LocalExecutor exec;
  TrialSpec spec;
  spec.argv = {"/bin/sh", "-c", "kill -QUIT $$"};
  spec.work_dir = testing::TempDir().path();
  const TrialOutcome out = exec.run(spec);
  EXPECT_EQ(describe(out), "killed by SIGQUIT");
  EXPECT_EQ(signalName(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(signalName(SIGRTMIN + 2), "SIGRTMIN+2");
  EXPECT_EQ(classify(out).signal_name, "SIGQUIT");
}

TEST(LocalExecutorTest, MissingProgramFailsToStart) {
  testing::TempDir dir;
  TrialSpec spec = shell("", dir.path());
  spec.argv = {"/nonexistent/program"};
  auto outcome = LocalExecutor().run(spec);
  EXPECT_EQ(outcome.end, TrialEnd::FailedToStart);
  spec.argv = {"no-such-program-minrepro"};
  outcome = LocalExecutor().run(spec);
  EXPECT_EQ(outcome.end, TrialEnd::FailedToStart);
  EXPECT_NE(outcome.start_error.find("not found on PATH"), std::string::npos);
}

TEST(LocalExecutorTest, StdinIsEmptyAndTmpdirIsPrivate) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("cat; echo \"$TMPDIR\"; test -d \"$TMPDIR\"", dir.path()));
  EXPECT_TRUE(outcome.passed()) << outcome.stderr_text;
  EXPECT_EQ(outcome.stdout_text, (dir.path() / "tmp").string() + "\n");
  EXPECT_FALSE(fs::exists(dir.path() / "tmp")) << "the trial's TMPDIR is removed afterwards";
}

TEST(LocalExecutorTest, EnvironmentSetAndUnset) {
  testing::TempDir dir;
  ::setenv("MINREPRO_TEST_UNSET_ME", "1", 1);
  TrialSpec spec = shell("echo \"$A:${MINREPRO_TEST_UNSET_ME:-gone}\"", dir.path());
  spec.env_set = {{"A", "x"}};
  spec.env_unset = {"MINREPRO_TEST_UNSET_ME"};
  EXPECT_EQ(LocalExecutor().run(spec).stdout_text, "x:gone\n");
}

TEST(LocalExecutorTest, TimeoutKillsTheWholeGroupIncludingStubbornGrandchildren) {
  testing::TempDir dir;
  // The child starts a grandchild that ignores SIGTERM, records its pid, and hangs.
  TrialSpec spec = shell(
      "sh -c 'trap \"\" TERM; echo $$ > grandchild.pid; exec sleep 60' & "
      "trap '' TERM; sleep 60",
      dir.path());
  spec.timeout = 500ms;
  spec.kill_grace = 200ms;
  auto outcome = LocalExecutor().run(spec);
  EXPECT_EQ(outcome.end, TrialEnd::TimedOut);
  std::ifstream in(dir.path() / "grandchild.pid");
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  for (int i = 0; i < 100 && pidAlive(grandchild); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST(LocalExecutorTest, BackgroundGrandchildIsKilledWhenTheTrialExits) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("sleep 60 & echo $! > bg.pid; exit 0", dir.path()));
  EXPECT_TRUE(outcome.passed());
  std::ifstream in(dir.path() / "bg.pid");
  pid_t bg = 0;
  ASSERT_TRUE(in >> bg);
  for (int i = 0; i < 100 && pidAlive(bg); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(bg));
}

TEST(LocalExecutorTest, AddressSpaceLimitTurnsRunawayAllocationIntoAnError) {
  testing::TempDir dir;
  TrialSpec spec = shell("", dir.path());
  spec.argv = {"/usr/bin/python3", "-c", "x = bytearray(1 << 31)"};
  spec.address_space_limit_bytes = 512ull << 20;
  auto outcome = LocalExecutor().run(spec);
  EXPECT_EQ(outcome.end, TrialEnd::Exited);
  EXPECT_NE(outcome.stderr_text.find("MemoryError"), std::string::npos) << outcome.stderr_text;
}

TEST(LocalExecutorTest, CoreDumpsAreOff) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("ulimit -c", dir.path()));
  EXPECT_EQ(outcome.stdout_text, "0\n");
}

}  // namespace
}  // namespace minrepro
