#include "engine/executors/process.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

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

TEST(LocalExecutorTest, ExitStatusAndOutput) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("echo out; echo err >&2; exit 3", dir.path()));
  EXPECT_EQ(outcome.end, TrialEnd::Exited);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_EQ(outcome.stdout_text, "out\n");
  EXPECT_EQ(outcome.stderr_text, "err\n");
  EXPECT_FALSE(outcome.passed());
}

TEST(LocalExecutorTest, SignalIsNotAnExitStatus) {
  testing::TempDir dir;
  auto outcome = LocalExecutor().run(shell("kill -ABRT $$", dir.path()));
  EXPECT_EQ(outcome.end, TrialEnd::Signaled);
  EXPECT_EQ(outcome.signal, SIGABRT);
  EXPECT_EQ(describe(outcome), "killed by SIGABRT");
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
  TrialSpec spec = shell("sh -c 'trap \"\" TERM; echo $$ > grandchild.pid; exec sleep 60' & "
                         "trap '' TERM; sleep 60", dir.path());
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
