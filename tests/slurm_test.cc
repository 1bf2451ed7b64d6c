// The Slurm executor on a real cluster: the one-node cluster of
// scripts/slurm-up.sh (scripts/run-tests.sh starts it for CI). Without a
// reachable cluster these tests skip, saying how to start one; with CI=true
// they fail instead, so CI never passes without running them.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "core/case_config.h"
#include "engine/executors/slurm_executor.h"
#include "tests/test_util.h"
#include "tests/trial_env_probe.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::python;
using testing::readFile;
using testing::runCommand;

// Points the Slurm clients at the test cluster (unless SLURM_CONF says
// otherwise) and asks the controller. "" when reachable, else why not.
std::string slurmUnreachable() {
  if (!std::getenv("SLURM_CONF")) {
    const char* dir = std::getenv("MINREPRO_SLURM_DIR");
    const fs::path conf = fs::path(dir && *dir ? dir : "/tmp/minrepro-slurm") / "slurm.conf";
    if (fs::exists(conf)) ::setenv("SLURM_CONF", conf.c_str(), 1);
  }
  // Quick answers first: a client pointed at a missing config retries for a minute.
  const char* conf = std::getenv("SLURM_CONF");
  if (conf && !fs::exists(conf))
    return "no Slurm cluster reachable (SLURM_CONF names a missing file, " + std::string(conf) + ")";
  if (!conf && !fs::exists("/etc/slurm/slurm.conf"))
    return "no Slurm cluster reachable (no slurm.conf: SLURM_CONF unset, none in /etc/slurm or $MINREPRO_SLURM_DIR)";
  if (runCommand("command -v scontrol >/dev/null") != 0) return "no Slurm client (scontrol) on PATH";
  std::string output;
  // The controller answers and a partition is up (the node may be busy or completing).
  if (runCommand("timeout 20 scontrol ping && timeout 20 sinfo -h -o %a | grep -q up", &output) == 0 &&
      output.find("UP") != std::string::npos)
    return "";
  return "no Slurm cluster reachable (" + output.substr(0, 300) + ")";
}

void requireCluster() {
  const std::string why = slurmUnreachable();
  if (why.empty()) return;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true")
    FAIL() << why << "; CI must run the Slurm tests: scripts/run-tests.sh starts the cluster with scripts/slurm-up.sh";
  GTEST_SKIP() << why << "; start the test cluster with scripts/slurm-up.sh (as root), then rerun";
}

// Ids of the jobs in the queue whose name contains `part`.
std::vector<std::string> queuedJobs(const std::string& part) {
  std::string out;
  runCommand("squeue -h -o '%i %j'", &out);
  std::vector<std::string> ids;
  std::istringstream lines(out);
  for (std::string id, name; lines >> id >> name;)
    if (name.find(part) != std::string::npos) ids.push_back(id);
  return ids;
}

class SlurmExecutorTest : public ::testing::Test {
 public:
  void SetUp() override { requireCluster(); }

  TrialSpec spec(const std::string& script, std::chrono::milliseconds timeout = 60s) {
    TrialSpec s;
    s.argv = {"/bin/sh", "-c", script};
    s.work_dir = dir_.path() / ("trial-" + std::to_string(++trials_));
    fs::create_directories(s.work_dir);
    s.timeout = timeout;
    s.kill_grace = 1s;
    return s;
  }
  SlurmExecutor executor(SlurmOptions slurm = {}) {
    SlurmExecutorOptions options;
    options.slurm = std::move(slurm);
    options.job_binary = MINREPRO_SLURM_JOB_BINARY;
    return SlurmExecutor(options);
  }

  testing::TempDir dir_{"minrepro-slurm"};
  int trials_ = 0;
};

TEST_F(SlurmExecutorTest, JobBringsBackExitStatusSignalOutputAndEnvironment) {
  SlurmExecutor slurm = executor();
  TrialSpec s = spec("echo out $MINREPRO_X; echo err >&2; exit 3");
  s.env_set["MINREPRO_X"] = "from-the-spec";
  const TrialOutcome exited = slurm.run(s);
  ASSERT_EQ(exited.end, TrialEnd::Exited) << describe(exited) << exited.stderr_text;
  EXPECT_EQ(exited.exit_code, 3);
  EXPECT_EQ(exited.stdout_text, "out from-the-spec\n");
  EXPECT_EQ(exited.stderr_text, "err\n");
  const TrialOutcome signaled = slurm.run(spec("kill -ABRT $$"));
  ASSERT_EQ(signaled.end, TrialEnd::Signaled) << describe(signaled);
  EXPECT_EQ(signaled.signal, SIGABRT);
  // Exit 124 is the trial's own status, not a timeout (timeout(1) would blur them).
  EXPECT_EQ(slurm.run(spec("exit 124")).end, TrialEnd::Exited);
  EXPECT_TRUE(slurm.liveJobs().empty());
}

// A trial on a node is given what a shell gives a process, apart from the
// intended differences and the job's own SLURM_* variables
// (tests/trial_environment_test.cc has the plain and forked trials).
TEST_F(SlurmExecutorTest, ATrialOnANodeIsGivenWhatAShellGives) {
  SlurmExecutor slurm = executor();
  const fs::path deep = dir_.path() / std::string(40, 'w') / std::string(40, 'o') / std::string(40, 'r');
  EXPECT_EQ(testing::unintendedDifferences(dir_.path(), slurm.run(testing::probeTrial(deep / "slurm")), "slurm"), "");
}

TEST_F(SlurmExecutorTest, TrialPastItsTimeoutIsATimeoutAndLeavesNothingRunning) {
  SlurmExecutor slurm = executor();
  const fs::path pid_file = dir_.path() / "grandchild.pid";
  const auto start = std::chrono::steady_clock::now();
  // A grandchild that ignores SIGTERM must go too (the whole group is killed).
  const TrialOutcome o =
      slurm.run(spec("(trap '' TERM; echo $$ > " + pid_file.string() + "; exec sleep 120) & sleep 120", 1500ms));
  EXPECT_EQ(o.end, TrialEnd::TimedOut) << describe(o) << o.stderr_text;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "the timeout is enforced in the job, not by --time";
  ASSERT_TRUE(fs::exists(pid_file));
  const pid_t grandchild = std::stoi(readFile(pid_file));
  std::this_thread::sleep_for(200ms);
  EXPECT_NE(::kill(grandchild, 0), 0) << "the trial's group outlived its timeout";
}

// A job cancelled by someone else says nothing about the candidate: it is
// submitted again and only the second run's result counts.
// A trial whose first run hangs (after leaving a mark) and whose second
// prints "second run" and exits 7, run in a thread; `fail` does something to
// the job of the first run (given its id). Then only the second run counts,
// and the first is counted as the cluster's failure `expected_failure`.
void expectResubmittedAfter(SlurmExecutorTest& test, SlurmExecutor& slurm, const fs::path& mark,
                            const std::function<void(const std::string&)>& fail, const std::string& expected_failure) {
  const TrialSpec s = test.spec("if [ ! -e " + mark.string() + " ]; then touch " + mark.string() +
                                "; sleep 120; fi; echo second run; exit 7");
  TrialOutcome o;
  std::thread trial([&] { o = slurm.run(s); });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(mark) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  const std::vector<std::string> live = slurm.liveJobs();
  EXPECT_EQ(live.size(), 1u);
  if (live.size() == 1) fail(live.front());
  trial.join();
  EXPECT_EQ(o.end, TrialEnd::Exited) << describe(o) << o.stderr_text;
  EXPECT_EQ(o.exit_code, 7);
  EXPECT_EQ(o.stdout_text, "second run\n");
  const SlurmCounts counts = slurm.counts();
  EXPECT_EQ(counts.resubmitted, 1u);
  EXPECT_EQ(counts.failures.count(expected_failure), 1u) << "the first job should have ended " << expected_failure;
}

TEST_F(SlurmExecutorTest, JobCancelledFromOutsideIsResubmittedNotCounted) {
  SlurmExecutor slurm = executor();
  expectResubmittedAfter(
      *this, slurm, dir_.path() / "first-run",
      [](const std::string& job) { EXPECT_EQ(runCommand("scancel " + job), 0); }, "CANCELLED");
}

// The node failing under a job (set DOWN: Slurm ends the job NODE_FAIL and
// kills it) says nothing about the candidate either: once the node is back
// (the test cluster returns it to service; RESUME otherwise), the trial is
// submitted again and only that run counts.
TEST_F(SlurmExecutorTest, NodeFailureUnderAJobIsResubmittedNotCounted) {
  SlurmExecutor slurm = executor();
  auto failNode = [](const std::string& job) {
    std::string node, out;
    ASSERT_EQ(runCommand("squeue -h -o %N -j " + job, &node), 0) << node;
    node = node.substr(0, node.find('\n'));
    ASSERT_FALSE(node.empty());
    EXPECT_EQ(runCommand("scontrol update NodeName=" + node + " State=DOWN Reason=minrepro-node-failure-test", &out), 0)
        << out;
    // Back in service: the cluster's ReturnToService=2 usually has done it already.
    for (int i = 0; i < 100; ++i) {
      runCommand("sinfo -h -n " + node + " -o %t", &out);
      if (out.find("down") == std::string::npos && out.find("drain") == std::string::npos) break;
      runCommand("scontrol update NodeName=" + node + " State=RESUME 2>/dev/null");
      std::this_thread::sleep_for(100ms);
    }
  };
  expectResubmittedAfter(*this, slurm, dir_.path() / "first-run", failNode, "NODE_FAIL");
}

// The run's interrupt scancels our job, and a job that is not ours stays.
TEST_F(SlurmExecutorTest, InterruptCancelsOurJobAndOnlyOurs) {
  std::string foreign;
  ASSERT_EQ(
      runCommand("sbatch --parsable -o /dev/null -J not-minrepro-" + std::to_string(::getpid()) + " --wrap 'sleep 120'",
                 &foreign),
      0)
      << foreign;
  foreign = foreign.substr(0, foreign.find_first_of(";\n"));
  SlurmExecutor slurm = executor();
  std::atomic<bool> cancel{false};
  TrialSpec s = spec("sleep 120");
  s.cancel = &cancel;
  TrialOutcome o;
  std::thread trial([&] { o = slurm.run(s); });
  while (slurm.liveJobs().empty()) std::this_thread::sleep_for(20ms);
  const std::string ours = slurm.liveJobs().front();
  std::this_thread::sleep_for(500ms);
  cancel = true;
  trial.join();
  EXPECT_EQ(o.end, TrialEnd::Cancelled);
  std::string queue;
  runCommand("squeue -h -o %i", &queue);
  EXPECT_EQ(queue.find(ours + "\n"), std::string::npos) << queue;
  EXPECT_NE(queue.find(foreign + "\n"), std::string::npos) << "a job that is not ours was cancelled: " << queue;
  runCommand("scancel " + foreign);
}

TEST_F(SlurmExecutorTest, NonexistentPartitionIsRefusedBeforeAnyTrial) {
  SlurmOptions options;
  options.partition = "no-such-partition";
  SlurmExecutor slurm = executor(options);
  try {
    slurm.preflight(dir_.path() / "preflight");
    FAIL() << "preflight accepted a partition that does not exist";
  } catch (const BadInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no-such-partition"), std::string::npos) << message;
    EXPECT_NE(message.find("executor"), std::string::npos) << message;
  }
  EXPECT_EQ(slurm.counts().submitted, 0u);
}

// ---------------------------------------------------------------- case.yaml (no cluster needed)

class SlurmCaseConfig : public ::testing::Test {
 protected:
  CaseConfig load(const std::string& executor_section) {
    testing::writeFile(dir_.path() / "batch.pt", "not read when loading");
    testing::writeFile(dir_.path() / "case.yaml",
                       "batch: batch.pt\nsamples: {tensors: {input: 0}}\n"
                       "trial: {command: [/bin/true, '{batch}']}\n" +
                           executor_section);
    return loadCase(dir_.path() / "case.yaml");
  }
  std::string errorFor(const std::string& executor_section) {
    try {
      load(executor_section);
    } catch (const BadInputError& e) {
      return e.what();
    }
    return "(accepted)";
  }
  testing::TempDir dir_{"minrepro-slurm-case"};
};

TEST_F(SlurmCaseConfig, ExecutorSectionIsRead) {
  const CaseConfig c = load(
      "executor:\n  kind: slurm\n  partition: gpu\n  gres: gpu:1\n  time: '0:30:00'\n"
      "  account: ml\n  extra_args: ['--qos=debug']\n  retries: 5\n");
  EXPECT_EQ(c.executor.kind, ExecutorKind::Slurm);
  EXPECT_EQ(c.executor.slurm.partition, "gpu");
  EXPECT_EQ(c.executor.slurm.gres, "gpu:1");
  EXPECT_EQ(c.executor.slurm.time, "0:30:00");
  EXPECT_EQ(c.executor.slurm.account, "ml");
  EXPECT_EQ(c.executor.slurm.extra_args, (std::vector<std::string>{"--qos=debug"}));
  EXPECT_EQ(c.executor.slurm.retries, 5u);
  const CaseConfig local = load("executor: {devices: [0, 2], trials_per_device: 2}\n");
  EXPECT_EQ(local.executor.kind, ExecutorKind::Local);
  EXPECT_EQ(local.executor.devices, (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(local.executor.trials_per_device, 2u);
  EXPECT_EQ(load("").executor.kind, ExecutorKind::Local);
}

TEST_F(SlurmCaseConfig, BadExecutorKeysNameTheLineAndWhatToWrite) {
  std::string e = errorFor("executor: {kind: slrum}\n");
  EXPECT_NE(e.find("case.yaml:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'slurm'?"), std::string::npos) << e;
  e = errorFor("executor: {kind: slurm, devices: [0]}\n");
  EXPECT_NE(e.find("executor.devices"), std::string::npos) << e;
  EXPECT_NE(e.find("gres"), std::string::npos) << e;
  e = errorFor("executor: {extra_args: ['--output=x']}\n");
  EXPECT_NE(e.find("an option minrepro does not set itself"), std::string::npos) << e;
  e = errorFor("executor: {time: 'an hour'}\n");
  EXPECT_NE(e.find("a Slurm time limit"), std::string::npos) << e;
  e = errorFor("executor: {devices: [1, 1]}\n");
  EXPECT_NE(e.find("each device once"), std::string::npos) << e;
}

// ---------------------------------------------------------------- whole runs

class SlurmEndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!slurmUnreachable().empty()) return;  // each test skips or fails in SetUp
    examples_ = new testing::TempDir("minrepro-slurm-examples");
    ASSERT_EQ(testing::makeBundledExamples(examples_->path()), "");
  }
  static void TearDownTestSuite() {
    delete examples_;
    examples_ = nullptr;
  }
  void SetUp() override { requireCluster(); }

  int shrink(const fs::path& case_file, const std::string& name, const std::string& extra, std::string* output) {
    return runCommand(std::string(MINREPRO_BINARY) + " shrink --config " + case_file.string() + " --output " +
                          (work_.path() / (name + ".tar.gz")).string() + " --work-dir " +
                          (work_.path() / name).string() + " " + extra,
                      output);
  }
  // The line that says what the run ended with, without the archive's path.
  // The result: samples and ids. Trial counts differ by the plain runs that
  // check a local run's forked trials against fresh ones (Slurm jobs are
  // never forked; engine/plain_process_check.h).
  static std::string resultLine(const std::string& output) {
    // The run's last word, not the op step's "(N trials reduced its inputs)" before it.
    const std::string summary = "minrepro: reduced ";
    const auto at = output.rfind(summary);
    if (at == std::string::npos) return "";
    const auto from = at + summary.size() - std::string("reduced ").size();
    return output.substr(from, output.find(" in ", from) - from);
  }

  static testing::TempDir* examples_;
  testing::TempDir work_{"minrepro-slurm-e2e"};
};

testing::TempDir* SlurmEndToEnd::examples_ = nullptr;

TEST_F(SlurmEndToEnd, BundledExampleThroughSlurmGivesTheLocalResult) {
  const fs::path case_file = examples_->path() / "class4" / "case.yaml";
  std::string local, slurm;
  ASSERT_EQ(shrink(case_file, "local", "--jobs 2", &local), 0) << local;
  ASSERT_EQ(shrink(case_file, "slurm", "--executor slurm --jobs 2", &slurm), 0) << slurm;
  EXPECT_NE(resultLine(local).find("reduced 512 -> 1 samples (ids [10313])"), std::string::npos) << local;
  EXPECT_EQ(resultLine(slurm), resultLine(local)) << slurm;
  std::string listing;
  ASSERT_EQ(runCommand("tar tzf " + (work_.path() / "slurm.tar.gz").string(), &listing), 0);
  EXPECT_NE(listing.find("repro.py"), std::string::npos) << listing;
}

TEST_F(SlurmEndToEnd, NonexistentPartitionStopsTheRunAtTheStart) {
  const fs::path dir = examples_->path() / "class4";
  const fs::path case_file = dir / "case-bad-partition.yaml";
  testing::writeFile(case_file,
                     readFile(dir / "case.yaml") + "\nexecutor:\n  kind: slurm\n  partition: no-such-partition\n");
  std::string output;
  EXPECT_EQ(shrink(case_file, "bad", "", &output), 2) << output;
  EXPECT_NE(output.find("no-such-partition"), std::string::npos) << output;
  EXPECT_NE(output.find("executor section of case.yaml"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(work_.path() / "bad.tar.gz"));
  EXPECT_FALSE(fs::exists(work_.path() / "bad" / "trials")) << "a trial ran";
}

// SIGINT while trials run as jobs: exit 130 and nothing of ours left in squeue.
TEST_F(SlurmEndToEnd, InterruptLeavesNoJobOfOursInTheQueue) {
  const fs::path dir = examples_->path() / "class4";
  const fs::path case_file = dir / "case-slow.yaml";
  testing::writeFile(case_file,
                     "batch: batch.pt\nsamples:\n  tensors: {input: 0, target: 0}\n"
                     "trial:\n  command: [/bin/sh, -c, 'sleep 120', sh, '{batch}']\n  timeout: 300\n"
                     "executor: {kind: slurm}\n");
  const std::string work = (work_.path() / "slow").string(), archive = (work_.path() / "slow.tar.gz").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cf = case_file.string();
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "--config", cf.c_str(), "--work-dir", work.c_str(), "--output",
            archive.c_str(), "--jobs", "3", "--quiet", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string ours = "minrepro." + std::to_string(pid) + ".";
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (queuedJobs(ours).size() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
  ASSERT_GE(queuedJobs(ours).size(), 2u) << "minrepro's jobs never showed in squeue";
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status;
  EXPECT_TRUE(queuedJobs(ours).empty()) << "jobs of the interrupted run are still queued";
}

// No cluster needed: an sbatch that never answers (a hung controller,
// here a script that sleeps) held the preflight for the whole run, and an
// interrupt left it running (probe 37). The run exits 130 at once and
// takes the client's process group with it.
TEST(SlurmPreflight, AnInterruptWhileSbatchHangsLeavesNoClientRunning) {
  testing::TempDir dir("minrepro-slurm-hang");
  const fs::path bin = dir.path() / "bin", pid_file = dir.path() / "sbatch.pid";
  fs::create_directories(bin);
  testing::writeFile(bin / "sbatch", "#!/bin/sh\necho $$ > '" + pid_file.string() + "'\nexec sleep 1000\n");
  fs::permissions(bin / "sbatch", fs::perms::owner_all);
  ASSERT_EQ(runCommand(python() + " -c \"import torch; torch.save({'x': torch.arange(8)}, '" +
                       (dir.path() / "batch.pt").string() + "')\""),
            0);
  testing::writeFile(dir.path() / "case.yaml",
                     "batch: batch.pt\nsamples: {tensors: {x: 0}}\ntrial:\n  command: [/bin/sh, -c, 'exit 1', sh, "
                     "'{batch}']\nexecutor: {kind: slurm}\n");
  const std::string path = "PATH=" + bin.string() + ":" + std::getenv("PATH");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::putenv(const_cast<char*>(path.c_str()));
    const std::string cf = (dir.path() / "case.yaml").string(), work = (dir.path() / "w").string();
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "--config", cf.c_str(), "--work-dir", work.c_str(), "--quiet",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(pid_file) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fs::exists(pid_file)) << "the preflight never started sbatch";
  std::this_thread::sleep_for(200ms);  // past the exec of sleep
  const std::string client = readFile(pid_file).substr(0, readFile(pid_file).find('\n'));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status;
  // Gone, or a zombie no one has reaped yet (it is not ours to reap).
  std::this_thread::sleep_for(200ms);
  const std::string stat = fs::exists("/proc/" + client + "/stat") ? readFile("/proc/" + client + "/stat") : "";
  const auto state_at = stat.rfind(") ");
  EXPECT_TRUE(stat.empty() || (state_at != std::string::npos && stat[state_at + 2] == 'Z'))
      << "sbatch " << client << " still runs: " << stat;
  if (!stat.empty() && stat[state_at + 2] != 'Z') ::kill(std::stoi(client), SIGKILL);
}

}  // namespace
}  // namespace minrepro
