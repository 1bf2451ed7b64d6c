// Fork servers (engine/executors/fork_server.h): the same trial gives the same outcome,
// output and failure signature with and without a server; crashes, hangs and
// a dying server do not affect the next trial; what no server can run falls
// back to plain processes.
#include "engine/executors/fork_server.h"
#include "engine/trial_executors.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/failure_signature.h"
#include "engine/oracle.h"
#include "engine/trial_spec.h"
#include "harness/trial_main.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool pidAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// The live children of `pid` (/proc/PID/task/*/children).
std::vector<pid_t> childrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child = 0; in >> child;)
      if (pidAlive(child)) out.push_back(child);
  }
  return out;
}

std::string commandLine(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// The one standby child of a fork server that is between trials: forked
// during the last trial, in its own process group, waiting for the next.
pid_t standbyOf(pid_t server) {
  const std::vector<pid_t> children = childrenOf(server);
  EXPECT_EQ(children.size(), 1u) << "server " << server << " should hold exactly its standby child";
  if (children.size() != 1) return -1;
  EXPECT_EQ(::getpgid(children[0]), children[0]) << "a standby leads its own process group";
  return children[0];
}

class ForkServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    examples_ = new testing::TempDir("minrepro-fork-examples");
    ASSERT_EQ(testing::makeBundledExamples(examples_->path()), "");
  }
  static void TearDownTestSuite() {
    delete examples_;
    examples_ = nullptr;
  }

  // The executor a shrink of `config` uses, over a plain LocalExecutor.
  std::unique_ptr<ForkServerExecutor> forked(const CaseConfig& config, std::size_t jobs = 1) {
    return makeForkServerExecutor(config, MINREPRO_TRIAL_BINARY, local_, jobs);
  }
  // Runs the specs at once, one thread each, as the oracle does with --jobs.
  static std::vector<TrialOutcome> runAtOnce(Executor& executor, const std::vector<TrialSpec>& specs) {
    std::vector<TrialOutcome> outcomes(specs.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < specs.size(); ++i)
      threads.emplace_back([&, i] { outcomes[i] = executor.run(specs[i]); });
    for (auto& t : threads) t.join();
    return outcomes;
  }
  CaseConfig example(const std::string& name) { return loadCase(examples_->path() / name / "case.yaml"); }

  // class4's full-batch trial twice at once (the second in its own
  // directory), each failing as it must; returns the first's spec.
  TrialSpec runTwoHarnessTrialsAtOnce(Executor& fork, const CaseConfig& c, const std::string& second_dir) {
    TrialSpec first = harnessTrial(c, c.batch), second = first;
    second.work_dir = dir_.path() / second_dir;
    fs::create_directories(second.work_dir);
    for (const TrialOutcome& served : runAtOnce(fork, {first, second}))
      EXPECT_EQ(classify(served).summary(), "index-error in nll_loss: Target 4 is out of bounds. (killed by SIGABRT)")
          << served.stderr_text;
    return first;
  }

  TrialSpec harnessTrial(const CaseConfig& c, const fs::path& batch) {
    TrialSpec spec = inDir("harness");
    spec.argv = harnessArgv(MINREPRO_TRIAL_BINARY, *c.harness, batch.string());
    return spec;
  }
  // A Python script trial: [python, -u, /abs/script.py, args...].
  TrialSpec scriptTrial(const std::string& source, std::vector<std::string> args = {}) {
    const fs::path script = dir_.path() / ("script" + std::to_string(++scripts_) + ".py");
    testing::writeFile(script, source);
    TrialSpec spec = inDir("py");
    spec.argv = {testing::python(), "-u", script.string()};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    return spec;
  }
  TrialSpec inDir(const std::string& name) {
    TrialSpec spec;
    spec.work_dir = dir_.path() / name;
    fs::create_directories(spec.work_dir);
    spec.timeout = 60s;
    return spec;
  }
  // A case whose trials are `script` runs; only its fork-server settings matter.
  CaseConfig pythonCase() {
    CaseConfig c;
    c.command = CommandTrial{{testing::python(), "{batch}"}, {}, {}};
    c.work_dir = dir_.path() / "work";
    return c;
  }

  // Runs the spec both ways and checks that nothing a signature reads differs.
  // (Fresh output files each time: LocalExecutor's redirection does not truncate.)
  void expectSameBothWays(Executor& fork, const TrialSpec& spec) {
    removeOutputs(spec);
    const TrialOutcome plain = local_.run(spec);
    removeOutputs(spec);
    const TrialOutcome served = fork.run(spec);
    EXPECT_EQ(describe(served), describe(plain)) << served.stderr_text;
    EXPECT_EQ(served.stdout_text, plain.stdout_text);
    EXPECT_EQ(served.stderr_text, plain.stderr_text);
    EXPECT_EQ(classify(served).summary(), classify(plain).summary());
  }

  static void removeOutputs(const TrialSpec& spec) {
    fs::remove(spec.work_dir / "stdout.txt");
    fs::remove(spec.work_dir / "stderr.txt");
  }

  static testing::TempDir* examples_;
  LocalExecutor local_;
  testing::TempDir dir_{"minrepro-fork"};
  int scripts_ = 0;
};

testing::TempDir* ForkServerTest::examples_ = nullptr;

// ---------------------------------------------------------------- harness

TEST_F(ForkServerTest, HarnessAbortHasTheSameSignatureAsAFreshProcess) {
  const CaseConfig c = example("class4");
  auto fork = forked(c);
  const TrialSpec spec = harnessTrial(c, c.batch);
  const TrialOutcome served = fork->run(spec);
  EXPECT_EQ(served.end, TrialEnd::Signaled);
  EXPECT_EQ(served.signal, SIGABRT);
  EXPECT_EQ(classify(served).summary(), "index-error in nll_loss: Target 4 is out of bounds. (killed by SIGABRT)");
  expectSameBothWays(*fork, spec);
  EXPECT_EQ(fork->counts().forked, 2u);
  EXPECT_EQ(fork->counts().plain, 0u) << "the server was not used (not single-threaded, or CUDA?)";
}

TEST_F(ForkServerTest, HarnessPairAndPassingTrialAreTheSame) {
  const CaseConfig pair = example("pair");
  auto fork = forked(pair);
  expectSameBothWays(*fork, harnessTrial(pair, pair.batch));
  // The same model on a batch without the second marked sample passes.
  const fs::path passing = dir_.path() / "passing.pt";
  std::string out;
  ASSERT_EQ(testing::runCommand(testing::python() + " -c \"import torch; b = torch.load('" + pair.batch.string() +
                                    "'); torch.save({k: v[:100] for k, v in b.items()}, '" + passing.string() + "')\"",
                                &out),
            0)
      << out;
  const TrialOutcome served = fork->run(harnessTrial(pair, passing));
  EXPECT_TRUE(served.passed()) << served.stderr_text;
  expectSameBothWays(*fork, harnessTrial(pair, passing));
  EXPECT_EQ(fork->counts().servers_started, 1u);
}

TEST_F(ForkServerTest, HarnessClonesRunTrialsAtOnceWithTheSameSignature) {
  const CaseConfig c = example("class4");
  auto fork = forked(c, 2);
  const TrialSpec first = runTwoHarnessTrialsAtOnce(*fork, c, "harness-2");
  expectSameBothWays(*fork, first);
  EXPECT_EQ(fork->counts().servers_started, 1u) << "the second job slot's server is a clone, not a second start";
  EXPECT_EQ(fork->counts().servers_cloned, 1u);
  EXPECT_EQ(fork->counts().plain, 0u);
}

// Each trial runs in the standby child forked during the one before (off
// the trial's path); one that died before its trial is replaced by a fork.
TEST_F(ForkServerTest, HarnessTrialRunsInTheStandbyForkedAheadAndADeadOneIsReplaced) {
  const CaseConfig c = example("class4");
  auto fork = forked(c);
  const TrialSpec spec = harnessTrial(c, c.batch);
  const std::string signature = "index-error in nll_loss: Target 4 is out of bounds. (killed by SIGABRT)";
  EXPECT_EQ(classify(fork->run(spec)).summary(), signature);
  pid_t server = -1;
  for (pid_t child : childrenOf(::getpid()))
    if (commandLine(child).find(" --serve") != std::string::npos) server = child;
  ASSERT_GT(server, 0) << "no harness fork server among this test's children";
  const pid_t standby = standbyOf(server);
  EXPECT_EQ(classify(fork->run(spec)).summary(), signature);
  const pid_t next = standbyOf(server);
  EXPECT_NE(next, standby) << "the trial should have used the standby, and a new one been forked";
  EXPECT_FALSE(pidAlive(standby));
  ASSERT_EQ(::kill(next, SIGKILL), 0);
  for (int i = 0; i < 100 && pidAlive(next); ++i) ::usleep(10'000);
  EXPECT_EQ(classify(fork->run(spec)).summary(), signature);
  expectSameBothWays(*fork, spec);
  EXPECT_EQ(fork->counts().servers_started, 1u) << "a dead standby must not cost the server";
  EXPECT_EQ(fork->counts().servers_lost, 0u);
  EXPECT_EQ(fork->counts().plain, 0u);
  EXPECT_EQ(fork->counts().forked, 4u);
  EXPECT_EQ(fork->counts().from_standby, 3u) << "all but the trial after the standby was killed";
}

// A clone must not carry its original's standby: when the original goes,
// its standby (whose channel only the original holds) ends, and the clone
// with its own standby serves on.
TEST_F(ForkServerTest, ClonedHarnessServerHasItsOwnStandbyAndTheOriginalsEndsWithIt) {
  const CaseConfig c = example("class4");
  auto fork = forked(c, 2);
  runTwoHarnessTrialsAtOnce(*fork, c, "clone-standby-2");
  ASSERT_EQ(fork->counts().servers_cloned, 1u);
  // The two servers of this case: ours (started) and its copy (init's
  // child). Their standbys have the same command line: forks of a server.
  std::vector<pid_t> forks;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string line = commandLine(std::stoi(name));
    if (line.find(" --serve") != std::string::npos && line.find(c.harness->model.string()) != std::string::npos)
      forks.push_back(std::stoi(name));
  }
  std::vector<pid_t> standbys;
  for (pid_t pid : forks)
    for (pid_t child : childrenOf(pid)) standbys.push_back(child);
  std::vector<pid_t> servers;
  for (pid_t pid : forks)
    if (std::find(standbys.begin(), standbys.end(), pid) == standbys.end()) servers.push_back(pid);
  ASSERT_EQ(servers.size(), 2u);
  const std::vector<pid_t> ours = childrenOf(::getpid());
  const bool first_is_ours = std::find(ours.begin(), ours.end(), servers[0]) != ours.end();
  const pid_t original = servers[first_is_ours ? 0 : 1], copy = servers[first_is_ours ? 1 : 0];
  const pid_t original_standby = standbyOf(original), copy_standby = standbyOf(copy);
  auto openFds = [](pid_t pid) {
    std::error_code ec;
    const auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
    return ec ? -1 : static_cast<int>(std::distance(it, fs::directory_iterator()));
  };
  EXPECT_EQ(openFds(copy_standby), openFds(original_standby)) << "the copy passed on a descriptor of the original's";
  ASSERT_EQ(::kill(original, SIGKILL), 0);
  for (int i = 0; i < 300 && pidAlive(original_standby); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(original_standby)) << "the original's standby outlived it: its copy holds the channel";
  EXPECT_TRUE(pidAlive(copy_standby));
  fork.reset();
  for (int i = 0; i < 300 && pidAlive(copy_standby); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(copy_standby)) << "an unused standby must end with its server";
}

TEST_F(ForkServerTest, HarnessUsageErrorAndMissingBatchAreTheSame) {
  const CaseConfig c = example("class4");
  auto fork = forked(c);
  expectSameBothWays(*fork, harnessTrial(c, dir_.path() / "no-such-batch.pt"));
  TrialSpec bad = harnessTrial(c, c.batch);
  bad.argv.push_back("--no-such-option");
  bad.argv.push_back("1");
  expectSameBothWays(*fork, bad);
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, ModelChangedOnDiskIsReadAgain) {
  CaseConfig c = example("class4");
  c.harness->model = dir_.path() / "model.pt";
  fs::copy_file(example("class4").harness->model, c.harness->model);
  auto fork = forked(c);
  const TrialSpec spec = harnessTrial(c, c.batch);
  EXPECT_EQ(classify(fork->run(spec)).family, FailureFamily::IndexError);  // the server read this model
  testing::writeFile(c.harness->model, "not a model any more");
  const TrialOutcome plain = local_.run(spec), served = fork->run(spec);
  EXPECT_NE(classify(plain).family, FailureFamily::IndexError);
  EXPECT_EQ(classify(served).summary(), classify(plain).summary());
}

// ---------------------------------------------------------------- python

TEST_F(ForkServerTest, PythonExampleCommandIsTheSame) {
  const CaseConfig c = example("command");
  auto fork = forked(c);
  TrialSpec spec = inDir("command");
  for (const auto& a : c.command->argv)
    spec.argv.push_back(substitutePlaceholders(a, c.batch, spec.work_dir, c.base_dir));
  expectSameBothWays(*fork, spec);
  EXPECT_EQ(classify(fork->run(spec)).summary(), "index-error in cross_entropy: Target 4 is out of bounds.");
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, PythonChildPrintsTheCppStackWhenAskedAsAFreshProcessDoes) {
  // Children skip symbolising the C++ stack of a c10 error (harness/py_hooks.cc)
  // unless TORCH_SHOW_CPP_STACKTRACES=1, when torch prints it.
  ASSERT_FALSE(pythonNativeHooks().empty()) << "the build did not make libminrepro_pyhooks.so";
  auto fork = forked(pythonCase());
  const std::string source =
      "import torch, torch.nn.functional as F\n"
      "F.cross_entropy(torch.zeros(3, 4), torch.tensor([0, 2, 4]))\n";
  // The C++ stack as torch prints it: "frame #3: ..." (1.13), "C++ CapturedTraceback:" then "#3 ..." (2.x).
  const auto has_cpp_stack = [](const std::string& text) {
    return text.find("frame #") != std::string::npos || text.find("C++ CapturedTraceback:") != std::string::npos;
  };
  const TrialSpec quiet = scriptTrial(source);
  expectSameBothWays(*fork, quiet);
  EXPECT_FALSE(has_cpp_stack(fork->run(quiet).stderr_text));
  TrialSpec shown = scriptTrial(source);
  shown.env_set["TORCH_SHOW_CPP_STACKTRACES"] = "1";
  const TrialOutcome served = fork->run(shown);
  EXPECT_TRUE(has_cpp_stack(served.stderr_text)) << served.stderr_text;
  EXPECT_EQ(classify(served).summary(), classify(local_.run(shown)).summary());
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, PythonUncaughtExceptionPrintsTheSameTracebackAndExits1) {
  auto fork = forked(pythonCase());
  const TrialSpec spec =
      scriptTrial("import sys\nprint('before', sys.argv[1:])\n\ndef f():\n    raise ValueError('bad value 3')\n\nf()\n",
                  {"a", "b"});
  const TrialOutcome served = fork->run(spec);
  EXPECT_EQ(describe(served), "exit status 1");
  EXPECT_EQ(served.stderr_text.rfind("Traceback (most recent call last):\n  File \"" + spec.argv[2] + "\", line 7", 0),
            0u)
      << served.stderr_text;
  expectSameBothWays(*fork, spec);
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, PythonExitStatusesAreTheSame) {
  auto fork = forked(pythonCase());
  for (const char* body : {"import sys; sys.exit(3)", "import sys; sys.exit('fatal: no data')", "raise SystemExit",
                           "import sys; sys.exit(256 + 7)", "print('x', end='')", "raise KeyboardInterrupt",
                           "import sys; sys.stdout.write('buffered'); import os; os._exit(4)",
                           "import atexit; atexit.register(lambda: print('at exit'))", "def f(:\n  pass\n"}) {
    SCOPED_TRACE(body);
    expectSameBothWays(*fork, scriptTrial(body));
  }
}

TEST_F(ForkServerTest, PythonSeesItsOwnArgvEnvironmentDirectoryAndStdin) {
  auto fork = forked(pythonCase());
  TrialSpec spec = scriptTrial(
      "import os, sys, tempfile\n"
      "print(sys.argv, os.getcwd(), os.environ['TMPDIR'], tempfile.gettempdir(), os.environ.get('MY_VAR'))\n"
      "print(repr(sys.stdin.read()), os.environ.get('MINREPRO_FORK_TEST_UNSET', 'unset'), __name__, __file__)\n"
      "print(sys.path[0] == os.path.dirname(os.path.realpath(__file__)), os.getpgid(0) == os.getpid())\n",
      {"x y", "{batch}"});
  ::setenv("MINREPRO_FORK_TEST_UNSET", "1", 1);
  spec.env_set = {{"MY_VAR", "value"}};
  spec.env_unset = {"MINREPRO_FORK_TEST_UNSET"};
  const TrialOutcome served = fork->run(spec);
  EXPECT_NE(served.stdout_text.find(spec.work_dir.string() + "/tmp"), std::string::npos) << served.stdout_text;
  EXPECT_NE(served.stdout_text.find("'' unset __main__"), std::string::npos) << served.stdout_text;
  EXPECT_NE(served.stdout_text.find("True True"), std::string::npos) << served.stdout_text;
  expectSameBothWays(*fork, spec);
}

TEST_F(ForkServerTest, SegfaultAndAbortAreSignalsAndTheNextTrialIsUnaffected) {
  auto fork = forked(pythonCase());
  const TrialSpec segv = scriptTrial("import ctypes\nprint('going', flush=True)\nctypes.string_at(0)\n");
  const TrialOutcome crashed = fork->run(segv);
  EXPECT_EQ(describe(crashed), "killed by SIGSEGV");
  expectSameBothWays(*fork, segv);
  expectSameBothWays(*fork, scriptTrial("import os\nos.abort()\n"));
  const TrialOutcome next = fork->run(scriptTrial("print('fine')\n"));
  EXPECT_TRUE(next.passed());
  EXPECT_EQ(next.stdout_text, "fine\n");
  EXPECT_EQ(fork->counts().servers_started, 1u) << "a crashing child must not take its server down";
}

TEST_F(ForkServerTest, PythonTrialRunsInTheStandbyForkedAheadAndADeadOneIsReplaced) {
  auto fork = forked(pythonCase());
  const TrialSpec spec = scriptTrial("import os\nprint(os.getpid(), os.getppid(), os.getpgid(0))\n");
  auto pids = [&] {
    const TrialOutcome outcome = fork->run(spec);
    EXPECT_TRUE(outcome.passed()) << describe(outcome) << outcome.stderr_text;
    std::istringstream in(outcome.stdout_text);
    pid_t pid = 0, parent = 0, group = 0;
    in >> pid >> parent >> group;
    EXPECT_EQ(group, pid) << "the trial leads its own process group";
    return std::make_pair(pid, parent);
  };
  const auto [first, server] = pids();
  const pid_t standby = standbyOf(server);
  EXPECT_EQ(pids().first, standby) << "the trial should have run in the standby";
  const pid_t next = standbyOf(server);
  EXPECT_NE(next, standby);
  ASSERT_EQ(::kill(next, SIGKILL), 0);
  for (int i = 0; i < 100 && pidAlive(next); ++i) ::usleep(10'000);
  const auto [replaced, same_server] = pids();
  EXPECT_NE(replaced, next);
  EXPECT_EQ(same_server, server) << "a dead standby must not cost the server";
  EXPECT_EQ(fork->counts().servers_started, 1u);
  EXPECT_EQ(fork->counts().servers_lost, 0u);
  EXPECT_EQ(fork->counts().from_standby, 2u) << "all but the trial after the standby was killed";
  const pid_t last = standbyOf(server);
  fork.reset();  // the server goes; its standby, never used, must go too
  for (int i = 0; i < 300 && pidAlive(last); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(last)) << "standby " << last << " outlived its server";
}

TEST_F(ForkServerTest, ClonedServersRunTrialsAtOnceAndACrashInOneLeavesTheOthers) {
  auto fork = forked(pythonCase(), 3);
  // Each trial waits until all three have started (they run at once, in
  // three servers) and prints its server's pid; the second then segfaults.
  const fs::path barrier = dir_.path() / "barrier";
  fs::create_directories(barrier);
  auto trial = [&](int i) {
    TrialSpec spec = scriptTrial(
        "import ctypes, os, sys, time\n"
        "open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close()\n"
        "deadline = time.time() + 60\n"
        "while len(os.listdir(sys.argv[1])) < 3 and time.time() < deadline: time.sleep(0.01)\n"
        "print(len(os.listdir(sys.argv[1])), os.getppid(), flush=True)\n"
        "if sys.argv[2] == '1': ctypes.string_at(0)\n",
        {barrier.string(), std::to_string(i)});
    spec.work_dir = dir_.path() / ("at-once-" + std::to_string(i));  // its own output files
    fs::create_directories(spec.work_dir);
    return spec;
  };
  const auto outcomes = runAtOnce(*fork, {trial(0), trial(1), trial(2)});
  std::set<std::string> servers;
  for (int i = 0; i < 3; ++i) {
    const std::string out = outcomes[i].stdout_text;
    EXPECT_EQ(out.substr(0, 2), "3 ") << "trial " << i << " did not run beside the others: " << out;
    servers.insert(out);
  }
  EXPECT_EQ(servers.size(), 3u) << "three trials at once need three servers";
  EXPECT_EQ(describe(outcomes[1]), "killed by SIGSEGV");
  EXPECT_TRUE(outcomes[0].passed() && outcomes[2].passed());
  fs::remove_all(barrier);
  fs::create_directories(barrier);
  for (const TrialOutcome& next : runAtOnce(*fork, {trial(0), trial(2), trial(4)}))
    EXPECT_TRUE(next.passed()) << describe(next) << next.stderr_text;
  EXPECT_EQ(fork->counts().servers_started, 1u);
  EXPECT_EQ(fork->counts().servers_cloned, 2u);
  EXPECT_EQ(fork->counts().servers_lost, 0u);
  EXPECT_EQ(fork->counts().forked, 6u);
}

TEST_F(ForkServerTest, UnsettingAVariableNobodyHasSharesTheServer) {
  // The final confirmation unsets every diagnostic variable; where none is
  // set, it must not pay for a server of its own.
  ::unsetenv("MINREPRO_FORK_TEST_ABSENT");
  auto fork = forked(pythonCase());
  TrialSpec spec = scriptTrial("print('fine')\n");
  EXPECT_TRUE(fork->run(spec).passed());
  spec.env_unset = {"MINREPRO_FORK_TEST_ABSENT"};
  EXPECT_TRUE(fork->run(spec).passed());
  EXPECT_EQ(fork->counts().servers_started, 1u);
}

TEST_F(ForkServerTest, HangIsTimedOutItsGroupKilledAndTheNextTrialIsUnaffected) {
  auto fork = forked(pythonCase());
  // A grandchild that ignores SIGTERM, a child that ignores it too, then a hang.
  TrialSpec hang = scriptTrial(
      "import os, signal, subprocess, time\n"
      "p = subprocess.Popen(['sh', '-c', 'trap \"\" TERM; exec sleep 60'])\n"
      "open('grandchild.pid', 'w').write(str(p.pid))\n"
      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
      "time.sleep(60)\n");
  hang.timeout = 1500ms;
  hang.kill_grace = 200ms;
  const TrialOutcome outcome = fork->run(hang);
  EXPECT_EQ(outcome.end, TrialEnd::TimedOut);
  EXPECT_EQ(classify(outcome).family, FailureFamily::Timeout);
  std::ifstream in(hang.work_dir / "grandchild.pid");
  pid_t grandchild = 0;
  ASSERT_TRUE(in >> grandchild);
  for (int i = 0; i < 100 && pidAlive(grandchild); ++i) ::usleep(10'000);
  EXPECT_FALSE(pidAlive(grandchild)) << "grandchild " << grandchild << " survived";
  EXPECT_TRUE(fork->run(scriptTrial("print('fine')\n")).passed());
  EXPECT_EQ(fork->counts().servers_started, 1u);
  EXPECT_EQ(fork->counts().servers_lost, 0u);
}

TEST_F(ForkServerTest, ServerThatDiesUnderATrialIsReplacedAndTheTrialRerun) {
  auto fork = forked(pythonCase());
  // The first run kills its parent, the server; the rerun in a new server passes.
  const TrialSpec spec = scriptTrial(
      "import os, signal, sys\n"
      "marker = sys.argv[1]\n"
      "if not os.path.exists(marker):\n"
      "    open(marker, 'w').write(str(os.getpid()))\n"
      "    os.kill(os.getppid(), signal.SIGKILL)\n"
      "    signal.pause()\n"
      "print('second run')\n",
      {(dir_.path() / "killed-once").string()});
  const TrialOutcome outcome = fork->run(spec);
  EXPECT_TRUE(outcome.passed()) << describe(outcome) << outcome.stderr_text;
  // The first run, paused, died with its server. Before, it ran on under
  // init after the test, as a trial would after its server was OOM-killed.
  const pid_t first = std::stoi(testing::readFile(dir_.path() / "killed-once"));
  for (int i = 0; i < 50 && ::kill(first, 0) == 0; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_NE(::kill(first, 0), 0) << "the first run outlived its server: pid " << first;
  EXPECT_EQ(outcome.stdout_text, "second run\n");
  EXPECT_EQ(fork->counts().servers_lost, 1u);
  EXPECT_EQ(fork->counts().servers_started, 2u);
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, PerTrialMinreproVariablesShareOneServerAndReachEachChild) {
  auto fork = forked(pythonCase());
  TrialSpec spec = scriptTrial("import os\nprint(os.environ['MINREPRO_TRIAL'], os.environ['PYTHONHASHSEED'])\n");
  for (int trial = 1; trial <= 2; ++trial) {
    spec.env_set = {{"MINREPRO_TRIAL", std::to_string(trial)}, {"PYTHONHASHSEED", "0"}};
    EXPECT_EQ(fork->run(spec).stdout_text, std::to_string(trial) + " 0\n");
  }
  EXPECT_EQ(fork->counts().servers_started, 1u);
}

TEST_F(ForkServerTest, CancelledTrialIsKilledAndReportedAsCancelled) {
  auto fork = forked(pythonCase());
  std::atomic<bool> stop{false};
  TrialSpec spec = scriptTrial("import time\ntime.sleep(60)\n");
  spec.cancel = &stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(1500ms);
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const TrialOutcome outcome = fork->run(spec);
  canceller.join();
  EXPECT_EQ(outcome.end, TrialEnd::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(fork->counts().forked, 1u);
}

// ---------------------------------------------------------------- fallback

TEST_F(ForkServerTest, WhatNoServerCanRunIsAPlainProcess) {
  auto fork = forked(pythonCase());
  TrialSpec shell = inDir("sh");
  shell.argv = {"/bin/sh", "-c", "echo plain; exit 5"};
  EXPECT_EQ(describe(fork->run(shell)), "exit status 5");
  TrialSpec inline_code = inDir("c");
  inline_code.argv = {testing::python(), "-c", "print(1)"};
  EXPECT_TRUE(fork->run(inline_code).passed());
  TrialSpec relative = inDir("rel");
  relative.argv = {testing::python(), "script.py"};
  EXPECT_FALSE(pythonForkRoute(relative, pythonForkServerScript(), {}).has_value());
  EXPECT_EQ(fork->counts().plain, 2u);
  EXPECT_EQ(fork->counts().forked, 0u);
}

TEST_F(ForkServerTest, ServerThatCannotStartFallsBackToPlainProcesses) {
  CaseConfig c = pythonCase();
  c.preload = {"no_such_module_minrepro"};  // the server's import fails
  auto fork = forked(c);
  const TrialSpec spec = scriptTrial("print('ran anyway')\n");
  const TrialOutcome outcome = fork->run(spec);
  EXPECT_TRUE(outcome.passed());
  EXPECT_EQ(outcome.stdout_text, "ran anyway\n");
  EXPECT_EQ(fork->counts().plain, 1u);
  EXPECT_EQ(fork->counts().servers_started, 0u);
  EXPECT_NE(testing::readFile(c.work_dir / "fork-server.log").find("not used"), std::string::npos);
}

// A preloaded module that runs a parallel op at import (torch 2.x's CPU
// build starts OpenMP's pool for it) would leave the server with threads,
// unsafe to fork from. The server imports with the pools at one thread; its
// children get a fresh process's intra-op thread count back.
TEST_F(ForkServerTest, PreloadThatStartsAThreadPoolStillForksWithTheFreshThreadCount) {
  testing::writeFile(dir_.path() / "parallel_at_import.py",
                     "import torch\nBASIS, _ = torch.linalg.qr(torch.randn(256, 256))\n");
  CaseConfig c = pythonCase();
  c.preload = {"parallel_at_import"};
  auto fork = forked(c);
  const TrialSpec spec = scriptTrial("import torch, parallel_at_import\nprint(torch.get_num_threads())\n");
  expectSameBothWays(*fork, spec);
  EXPECT_EQ(fork->counts().forked, 1u) << testing::readFile(c.work_dir / "fork-server.log");
  EXPECT_EQ(fork->counts().plain, 0u);
}

TEST_F(ForkServerTest, CaseCanOptOut) {
  CaseConfig c = pythonCase();
  c.fork_server = false;
  EXPECT_EQ(forked(c), nullptr);
}

TEST(ForkServerConfigTest, KeysAreReadAndChecked) {
  testing::TempDir dir;
  testing::writeFile(dir.path() / "batch.pt", "");
  const auto load = [&](const std::string& trial) {
    testing::writeFile(dir.path() / "case.yaml", "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n" + trial);
    return loadCase(dir.path() / "case.yaml");
  };
  const CaseConfig c = load("  command: [python3, s.py, \"{batch}\"]\n  fork_server: false\n  preload: [numpy, a.b]\n");
  EXPECT_FALSE(c.fork_server);
  EXPECT_EQ(c.preload, (std::vector<std::string>{"numpy", "a.b"}));
  EXPECT_TRUE(load("  command: [python3, s.py, \"{batch}\"]\n").fork_server);
  EXPECT_THROW(load("  command: [python3, s.py, \"{batch}\"]\n  fork_server: maybe\n"), BadInputError);
  EXPECT_THROW(load("  command: [python3, s.py, \"{batch}\"]\n  preload: [\"os; rm\"]\n"), BadInputError);
  testing::writeFile(dir.path() / "model.pt", "");
  EXPECT_THROW(load("  harness: {model: model.pt}\n  preload: [numpy]\n"), BadInputError);
  EXPECT_NE(renderCase(c, dir.path(), "batch.pt", "model.pt").find("fork_server: false"), std::string::npos);
}

// ---------------------------------------------------------------- end to end

TEST_F(ForkServerTest, ShrinkGivesTheSameResultWithAndWithoutForkServer) {
  const fs::path case_dir = examples_->path() / "class4";
  std::string yaml = testing::readFile(case_dir / "case.yaml");
  yaml.replace(yaml.find("  timeout: 60\n"), 14, "  timeout: 60\n  fork_server: false\n");
  testing::writeFile(case_dir / "case-plain.yaml", yaml);
  std::string lines[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path work = dir_.path() / ("shrink" + std::to_string(i));
    std::string output;
    ASSERT_EQ(testing::runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " +
                                      (case_dir / (i ? "case.yaml" : "case-plain.yaml")).string() + " --output " +
                                      (work / "r.tar.gz").string() + " --work-dir " + work.string(),
                                  &output),
              0)
        << output;
    const auto at = output.find("minrepro: reduced ");
    ASSERT_NE(at, std::string::npos) << output;
    // The result; trial counts differ by the plain runs that check forked
    // trials against fresh ones (engine/plain_process_check.h).
    lines[i] = output.substr(at, output.find(" in ", at) - at);
    EXPECT_EQ(fs::exists(work / "fork-server.log"), i == 1) << "a server ran only where it was not opted out";
    EXPECT_EQ(output.find("trial processes: forked children of a fork server") != std::string::npos, i == 1) << output;
  }
  EXPECT_EQ(lines[1], lines[0]);
  EXPECT_NE(lines[1].find("512 -> 1 samples (ids [10313])"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace minrepro
