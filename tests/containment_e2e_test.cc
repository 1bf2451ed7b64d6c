// Whole-binary tier: nothing a trial starts outlives it, whatever it does to
// its session or group (core/process/containment.h). The trial is a
// user's step script that, before it fails, starts two processes that leave
// its process group with setsid() and ignore SIGTERM: one exec'd (a shell
// loop, which carries the trial's tag) and one only forked (a Python child,
// which carries none in /proc). Every escapee writes its pid into a
// directory of the test's, so the test can look for each one with kill(0).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/process/containment.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;
using testing::writeFile;

// Fails (IndexError) when the batch holds the value 4, after starting the
// two escapees; sleeps `hang` seconds first when MINREPRO_TEST_HANG is set.
const char* kTrial = R"(import os, signal, subprocess, sys, time
import torch
pids = sys.argv[2]
# Exec'd: a new session, SIGTERM ignored, a loop that outlives the trial.
subprocess.Popen(["/bin/sh", "-c", "trap '' TERM; echo $$ > %s/sh-$$; while :; do sleep 1; done" % pids],
                 start_new_session=True)
# Forked only: a new session, SIGTERM ignored, forked again, out of the
# trial's directory, no exec (no tag of the trial's in /proc/PID/environ).
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() != 0:
        os._exit(0)
    os.chdir("/")
    with open("%s/fork-%d" % (pids, os.getpid()), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)
time.sleep(0.2)
if os.environ.get("MINREPRO_TEST_HANG"):
    time.sleep(300)
x = torch.load(sys.argv[1])["x"]
if (x == 4).any():
    raise IndexError("Target 4 is out of bounds.")
)";

class Containment : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    fs::create_directories(pids_);
    fs::create_directories(case_dir_);
    writeFile(case_dir_ / "trial.py", kTrial);
    ASSERT_EQ(runCommand(python() +
                         " -c \"import torch; x = torch.arange(16) + 10; x[11] = 4; "
                         "torch.save({'x': x, 'sample_id': torch.arange(16) * 10}, '" +
                         (case_dir_ / "batch.pt").string() + "')\""),
              0);
    writeFile(case_dir_ / "case.yaml",
              "batch: batch.pt\nsamples:\n  tensors: {x: 0, sample_id: 0}\n  ids: sample_id\n"
              "trial:\n  command: [\"/usr/bin/python3\", \"-u\", \"{case_dir}/trial.py\", \"{batch}\", \"" +
                  pids_.string() + "\"]\n  timeout: 60\n  fork_server: " + (GetParam() ? "true" : "false") +
                  "\nflaky:\n  enabled: false\nreducers: [samples]\noutput: repro.tar.gz\n");
  }

  static bool isAlive(pid_t pid) {
    const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    return ::kill(pid, 0) == 0 && stat.find(") Z ") == std::string::npos;  // a zombie has ended
  }
  // The escapees whose pid files exist and that are still alive.
  std::vector<pid_t> liveEscapees() const {
    std::vector<pid_t> alive;
    for (const auto& f : fs::directory_iterator(pids_)) {
      const std::string text = readFile(f.path());
      if (text.empty()) continue;  // written the moment it was killed
      const pid_t pid = static_cast<pid_t>(std::stol(text));
      if (isAlive(pid)) alive.push_back(pid);
    }
    return alive;
  }
  std::size_t escapeesStarted() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(pids_), fs::directory_iterator()));
  }

  TempDir tmp_{"minrepro-containment"};
  fs::path case_dir_ = tmp_.path() / "case";
  fs::path pids_ = tmp_.path() / "pids";
};

TEST_P(Containment, NoDescendantOfATrialOutlivesTheRun) {
  std::string output;
  ASSERT_EQ(testing::shrinkCase(case_dir_ / "case.yaml", tmp_.path() / "repro.tar.gz", tmp_.path() / "work", &output),
            0)
      << output;
  EXPECT_NE(output.find("reduced 16 -> 1 samples (ids [110])"), std::string::npos) << output;
  EXPECT_GE(escapeesStarted(), 10u);  // two per trial, the self-check's and the file trace's runs included
  EXPECT_EQ(liveEscapees(), std::vector<pid_t>{}) << output;
}

// minrepro killed with SIGKILL during a hanging trial cannot clean up; the
// next run in the same work directory kills what its trials left and
// removes their directories before its first trial.
TEST_P(Containment, TheNextRunEndsWhatARunKilledWithSigkillLeft) {
  const fs::path work = tmp_.path() / "work";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("MINREPRO_TEST_HANG", "1", 1);
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "--config", (case_dir_ / "case.yaml").c_str(), "--work-dir",
            work.c_str(), "--quiet", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 600 && escapeesStarted() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_GE(escapeesStarted(), 2u);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::vector<pid_t> left = liveEscapees();
  ASSERT_FALSE(left.empty()) << "nothing escaped: the test shows nothing";
  ASSERT_TRUE(fs::exists(work / "trials"));
  EXPECT_FALSE(fs::is_empty(work / "trials"));  // the hanging trial's directory

  // The next run (no hang: it finishes) in the same directory.
  std::string output;
  EXPECT_EQ(testing::shrinkCase(case_dir_ / "case.yaml", tmp_.path() / "repro.tar.gz", work, &output), 0) << output;
  EXPECT_NE(output.find("that the trials of a run killed before its end had left running"), std::string::npos)
      << output;
  for (const pid_t escaped : left) EXPECT_FALSE(isAlive(escaped)) << escaped;
  EXPECT_TRUE(!fs::exists(work / "trials") || fs::is_empty(work / "trials"));
}

// What the next run kills: its own scope's tags, not a run's in a directory
// nested inside its work directory.
TEST(Leftovers, OnlyTheScopesOwnTagsAreKilled) {
  const auto start = [](const std::string& tag) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv(kTrialTagVariable, tag.c_str(), 1);
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  const std::string scope = "/nonexistent/minrepro-leftovers-" + std::to_string(::getpid());
  const pid_t own = start(scope + "/123.4"), nested = start(scope + "/sub/123.4");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both exec'd with their tags
  EXPECT_EQ(killLeftovers(scope, "/nonexistent/trials"), 1u);
  int status = 0;
  ASSERT_EQ(::waitpid(own, &status, 0), own);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(::waitpid(nested, &status, WNOHANG), 0) << "a nested run's trial was killed";
  ::kill(nested, SIGKILL);
  ::waitpid(nested, nullptr, 0);
}

INSTANTIATE_TEST_SUITE_P(ForkServerOnAndOff, Containment, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "fork_server" : "plain"; });

}  // namespace
}  // namespace minrepro
