// Whole-binary tier: the real minrepro and minrepro-trial on real cases made
// with PyTorch by configs/examples/make_examples.py.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;

using EndToEnd = testing::ExampleCases;

TEST_F(EndToEnd, Class4ShrinksToTheOneBadSampleAndReproducesWithoutMinrepro) {
  const testing::ShrunkExample run = testing::shrunkExample("class4");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("reduced 512 -> 1 samples (ids [10313])"), std::string::npos) << run.output;
  const fs::path dir = extract(run.archive);
  for (const char* f : {"REPORT.md", "repro.py", "case.yaml", "batch.pt", "model.pt"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  EXPECT_EQ(pyBatch(dir, "b['target'].tolist(), b['sample_id'].tolist(), tuple(b['input'].shape), b['input'].dtype"),
            "[4] [10313] (1, 8) torch.float32\n");

  std::string repro;
  EXPECT_EQ(runCommand("cd " + dir.string() + " && " + python() + " repro.py", &repro), 1);
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;

  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_NE(report.find("# Reproducer: index-error in nll_loss: Target 4 is out of bounds."), std::string::npos)
      << report;
  EXPECT_NE(report.find("Samples: 1 of 512"), std::string::npos);
  EXPECT_NE(report.find("Kept sample ids: [10313]"), std::string::npos);
  EXPECT_NE(report.find("`target` = [4]"), std::string::npos);
  EXPECT_NE(report.find("- Backend of the trials: CPU (the built-in harness runs on the CPU)"), std::string::npos)
      << report;
  EXPECT_EQ(report.find(run.archive.parent_path().string()), std::string::npos) << "report leaks a local path";
  EXPECT_EQ(report.find(run.examples.string()), std::string::npos) << "report leaks a local path";
}

// The real binary, its stdout and stderr a pipe whose reader is gone at
// once (`minrepro shrink ... | true`): the run still ends with its result.
TEST_F(EndToEnd, ClosedOutputPipeDoesNotStopTheRun) {
  const fs::path archive = work_.path() / "repro.tar.gz", status = work_.path() / "status";
  const std::string command = std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " +
                              (example("class4") / "case.yaml").string() + " --output " + archive.string() +
                              " --work-dir " + (work_.path() / "work").string();
  std::string output;
  ASSERT_EQ(
      runCommand("bash -c '" + command + " 2>&1 | true; echo ${PIPESTATUS[0]} > " + status.string() + "'", &output), 0)
      << output;
  EXPECT_EQ(readFile(status), "0\n") << "minrepro's exit status";
  EXPECT_TRUE(fs::exists(archive));
  EXPECT_NE(readFile(work_.path() / "work" / "minrepro.log").find("reduced 512 -> 1 samples (ids [10313])"),
            std::string::npos);
}

// Not on a terminal (a pipe, here), progress comes as plain periodic lines
// (#32.3): size, trials, trials per minute; in the log file too. --progress
// never prints none.
TEST_F(EndToEnd, APipedRunPrintsPeriodicProgressLines) {
  const std::string command = std::string(MINREPRO_BINARY) + " shrink --config " +
                              (example("class4") / "case.yaml").string() + " --output " +
                              (work_.path() / "repro.tar.gz").string() + " --no-self-check --no-op-repro";
  std::string output;
  ASSERT_EQ(runCommand(command + " --work-dir " + (work_.path() / "w1").string() + " --progress-every 0", &output), 0)
      << output;
  const auto count = [](const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_GE(count(output, "minrepro: progress: "), 12u) << output;  // one per trial at interval 0
  EXPECT_NE(output.find("(was 512 samples) | trials "), std::string::npos) << output;
  EXPECT_NE(output.find(" trials/min"), std::string::npos) << output;
  EXPECT_GE(count(readFile(work_.path() / "w1" / "minrepro.log"), "progress: "), 12u);
  ASSERT_EQ(runCommand(command + " --work-dir " + (work_.path() / "w2").string() + " --progress never " +
                           "--progress-every 0 --force",
                       &output),
            0)
      << output;
  EXPECT_EQ(count(output, "progress: "), 0u) << output;
  EXPECT_EQ(runCommand(command + " --progress sometimes", &output), 2) << output;
  EXPECT_NE(output.find("--progress must be never, auto or always, found 'sometimes'"), std::string::npos) << output;
}

TEST_F(EndToEnd, ExtractedCaseRunsAgainWithMinrepro) {
  const testing::ShrunkExample run = testing::shrunkExample("class4");
  ASSERT_EQ(run.status, 0) << run.output;
  const fs::path dir = extract(run.archive);
  std::string output;
  ASSERT_EQ(shrink(dir / "case.yaml", work_.path() / "again.tar.gz", &output, testing::kNoOpStep), 0) << output;
  EXPECT_NE(output.find("reduced 1 -> 1 samples (ids [10313])"), std::string::npos) << output;
}

TEST_F(EndToEnd, PairShrinksToExactlyTheTwoSamplesNeededTogether) {
  const testing::ShrunkExample run = testing::shrunkExample("pair");
  ASSERT_EQ(run.status, 0) << run.output;
  const fs::path dir = extract(run.archive);
  EXPECT_EQ(pyBatch(dir, "b['sample_id'].tolist()"), "[20077, 20402]\n");
  std::string repro;
  EXPECT_NE(runCommand("cd " + dir.string() + " && " + python() + " repro.py", &repro), 0);
  EXPECT_NE(repro.find("index out of range in self"), std::string::npos) << repro;
}

TEST_F(EndToEnd, UserCommandShrinksToo) {
  const testing::ShrunkExample run = testing::shrunkExample("command");
  ASSERT_EQ(run.status, 0) << run.output;
  const fs::path dir = extract(run.archive);
  EXPECT_TRUE(fs::exists(dir / "step.py"));
  EXPECT_EQ(pyBatch(dir, "b['target'].tolist(), b['sample_id'].tolist()"), "[4] [10313]\n");
  std::string repro;
  EXPECT_EQ(runCommand("cd " + dir.string() + " && " + python() + " repro.py", &repro), 1);
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
}

TEST_F(EndToEnd, FlakyUserCommandShrinksToTheCulpritAndReportsTheRate) {
  const fs::path archive = work_.path() / "repro.tar.gz";
  std::string output;
  ASSERT_EQ(shrink(example("flaky") / "case.yaml", archive, &output, testing::kNoOpStep), 0) << output;
  EXPECT_NE(output.find("reduced 64 -> 1 samples (ids [30045])"), std::string::npos) << output;
  const std::string report = readFile(extract(archive) / "REPORT.md");
  // The step fails on the culprit about 3 times in 10.
  const auto at = report.find("Failure rate: 0.");
  ASSERT_NE(at, std::string::npos) << report;
  const double rate = std::stod(report.substr(at + 14, 4));
  EXPECT_GT(rate, 0.1) << report;
  EXPECT_LT(rate, 0.6) << report;
  // verify judges it by the self-check's rule and the recorded rate, not by "every run fails" (#28).
  EXPECT_NE(readFile(extract(archive) / "signature.txt").find("flaky-rate: 0."), std::string::npos);
  std::string verified;
  const int status = runCommand(
      std::string(MINREPRO_BINARY) + " verify " + archive.string() + " --runs 6 --python " + python(), &verified);
  EXPECT_TRUE(status == 0 || status == 3) << verified;  // 3: none of 6 failed, too few runs to tell at this rate
  EXPECT_NE(verified.find(status == 0 ? "consistent with the recorded rate" : "inconclusive: "), std::string::npos)
      << verified;
}

TEST_F(EndToEnd, MalformedCaseIsBadInputAndWritesNothing) {
  const fs::path case_file = work_.path() / "case.yaml";
  testing::writeFile(case_file, "batch: batch.pt\nsamples: [oops\n");
  const fs::path archive = work_.path() / "repro.tar.gz";
  std::string output;
  EXPECT_EQ(shrink(case_file, archive, &output), 2) << output;
  EXPECT_NE(output.find("case.yaml:"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(archive));
}

TEST_F(EndToEnd, DisagreeingBatchIsBadInput) {
  const fs::path dir = work_.path() / "bad";
  fs::create_directories(dir);
  fs::copy(example("class4") / "case.yaml", dir / "case.yaml");
  fs::copy(example("class4") / "model.pt", dir / "model.pt");
  std::string output;
  ASSERT_EQ(runCommand(python() +
                           " -c \"import torch; torch.save({'input': torch.zeros(512, 8), "
                           "'target': torch.zeros(511, dtype=torch.long), 'sample_id': torch.arange(512)}, '" +
                           (dir / "batch.pt").string() + "')\"",
                       &output),
            0)
      << output;
  EXPECT_EQ(shrink(dir / "case.yaml", work_.path() / "repro.tar.gz", &output), 2) << output;
  EXPECT_NE(output.find("sample dimensions disagree"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(work_.path() / "repro.tar.gz"));
}

TEST_F(EndToEnd, OriginalThatPassesIsReportedAndNothingIsWritten) {
  const fs::path dir = work_.path() / "fixed";
  fs::create_directories(dir);
  fs::copy(example("class4") / "case.yaml", dir / "case.yaml");
  fs::copy(example("class4") / "model.pt", dir / "model.pt");
  std::string output;
  ASSERT_EQ(runCommand("cd " + dir.string() + " && " + python() + " -c \"import torch; b = torch.load('" +
                           (example("class4") / "batch.pt").string() +
                           "'); b['target'][b['target'] == 4] = 3; "
                           "torch.save(b, 'batch.pt')\"",
                       &output),
            0)
      << output;
  EXPECT_EQ(shrink(dir / "case.yaml", work_.path() / "repro.tar.gz", &output), 3) << output;
  EXPECT_NE(output.find("does not reproduce"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(work_.path() / "repro.tar.gz"));
}

TEST_F(EndToEnd, HangingTrialThatForksIsTimedOutAndLeavesNoProcess) {
  const fs::path dir = work_.path() / "hang";
  fs::create_directories(dir);
  std::string output;
  ASSERT_EQ(runCommand(python() +
                           " -c \"import torch; torch.save({'input': torch.zeros(4, 2), 'sample_id': "
                           "torch.arange(4)}, '" +
                           (dir / "batch.pt").string() + "')\"",
                       &output),
            0)
      << output;
  // The trial forks a grandchild that ignores SIGTERM, then hangs.
  testing::writeFile(dir / "case.yaml",
                     "batch: batch.pt\n"
                     "samples: {tensors: {input: 0}, ids: sample_id}\n"
                     "trial:\n"
                     "  command: [/bin/sh, -c, \"(trap '' TERM; exec sleep 300) & sleep 300 # {batch}\"]\n"
                     "  timeout: 0.5\n");
  // Not declared a hang: a timeout is an outcome of its own, never the failure.
  EXPECT_EQ(shrink(dir / "case.yaml", work_.path() / "repro.tar.gz", &output), 3) << output;
  EXPECT_NE(output.find("the original did not end within trial.timeout (0.5 s) in 1 of 1 run(s). A timeout is the "
                        "failure only when case.yaml says so (failure: {family: timeout}"),
            std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(work_.path() / "repro.tar.gz"));
  // Declared a hang, it is reduced.
  testing::writeFile(dir / "case.yaml", readFile(dir / "case.yaml") + "failure: {family: timeout}\n");
  ASSERT_EQ(shrink(dir / "case.yaml", work_.path() / "repro.tar.gz", &output, testing::kNoOpStep), 0) << output;
  EXPECT_NE(output.find("original reproduces: timeout"), std::string::npos) << output;
  // SIGKILL takes effect when the killed process is next scheduled: allow
  // a loaded machine a moment before counting survivors.
  std::string ps;
  for (int i = 0; i < 50; ++i) {
    runCommand("ps -eo stat,args | grep -v grep | grep -v '^Z' | grep -c 'sleep 300' || true", &ps);
    if (ps == "0\n") break;
    ::usleep(100'000);
  }
  EXPECT_EQ(ps, "0\n") << "trial processes survived";
  // verify gives each run the recorded trial limit, not its 600 s (probe 25:
  // three runs of a 4 s hang took 30 minutes).
  EXPECT_NE(readFile(extract(work_.path() / "repro.tar.gz") / "signature.txt").find("trial-timeout: 0.5\n"),
            std::string::npos);
  EXPECT_EQ(runCommand(
                std::string(MINREPRO_BINARY) + " verify " + (work_.path() / "repro.tar.gz").string() + " --runs 2 2>&1",
                &output),
            0)
      << output;
  EXPECT_NE(output.find("each given the recorded trial timeout, 0.5 s (--timeout overrides)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("reproduced in 2 of 2"), std::string::npos) << output;
}

// Counts the finished trials in a journal.
std::size_t journaledTrials(const fs::path& journal) {
  std::istringstream lines(readFile(journal));
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);) n += line.rfind("trial ", 0) == 0 ? 1 : 0;
  return n;
}

// A second run in the same work directory without --resume starts afresh,
// and says so (a new user's report: the earlier journal went aside
// silently); the log names the case by the path the run was given.
TEST_F(EndToEnd, ARunWithoutResumeSaysItMovedTheEarlierJournalAside) {
  const fs::path work = work_.path() / "again";
  const std::string case_file = (example("class4") / "case.yaml").string();
  const std::string run = std::string(MINREPRO_BINARY) + " shrink --no-op-repro --max-trials 2 --config " + case_file +
                          " --work-dir " + work.string() + " --output " + (work_.path() / "again.tar.gz").string();
  std::string first, second;
  runCommand(run, &first);
  EXPECT_NE(first.find("case " + case_file + ": 512 samples"), std::string::npos) << first;
  EXPECT_EQ(first.find("journal.txt.old"), std::string::npos) << first;
  runCommand(run + " --force", &second);
  EXPECT_NE(second.find("an earlier run's journal in " + work.string() +
                        " was moved to journal.txt.old: this run starts afresh (--resume would have gone on from it)"),
            std::string::npos)
      << second;
  EXPECT_TRUE(fs::exists(work / "journal.txt.old"));
}

TEST_F(EndToEnd, KilledWithSigkillAndResumedEndsAtTheSameResultLosingNoTrial) {
  const fs::path work = work_.path() / "work";
  const fs::path journal = work / "journal.txt";
  const fs::path archive = work_.path() / "repro.tar.gz";
  const std::string case_file = (example("class4") / "case.yaml").string();
  std::size_t journaled = 0;
  // Kill at three moments (after a seeded number of finished trials), resuming each time.
  for (std::size_t kill_after : {2u, 6u, 11u}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::vector<const char*> argv{MINREPRO_BINARY, "shrink",     "--config",   case_file.c_str(), "--output",
                                    archive.c_str(), "--work-dir", work.c_str(), "--quiet"};
      if (journaled) argv.push_back("--resume");
      argv.push_back(nullptr);
      ::execv(MINREPRO_BINARY, const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    while (!fs::exists(journal) || journaledTrials(journal) < kill_after) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "minrepro ended before it was killed";
      ::usleep(20'000);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    journaled = journaledTrials(journal);
    EXPECT_FALSE(fs::exists(archive)) << "no archive from a killed run";
    // best/ is not rewritten at every acceptance: the journal records what
    // each accepted candidate keeps, and --materialize-best writes it from
    // there (the original's check is 3 forked and 3 plain runs: no candidate
    // is accepted before).
    if (kill_after <= 6) continue;
    EXPECT_FALSE(fs::exists(work / "best" / "batch.pt"));
    std::string written;
    ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + case_file + " --work-dir " +
                             work.string() + " --materialize-best",
                         &written),
              0)
        << written;
    EXPECT_EQ(
        testing::pyEvalOnBatch(work / "best" / "batch.pt", "10313 in b['sample_id'].tolist(), len(b['target']) < 512"),
        "True True\n");
  }
  std::string output;
  ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + case_file + " --output " +
                           archive.string() + " --work-dir " + work.string() + " --resume",
                       &output),
            0)
      << output;
  EXPECT_NE(output.find("resuming from " + std::to_string(journaled) + " journaled trials"), std::string::npos)
      << output;
  EXPECT_NE(output.find("reduced 512 -> 1 samples (ids [10313])"), std::string::npos) << output;
  const std::string report = readFile(extract(archive) / "REPORT.md");
  EXPECT_NE(report.find(std::to_string(journaled) + " replayed from the journal"), std::string::npos) << report;
  // The resumed run's trials are numbered after the earlier runs' (#43.8):
  // "trial 3" of the log is one trial, whichever run ran it.
  const std::string log = readFile(work / "minrepro.log");
  const std::string last_run = log.substr(log.rfind("==== minrepro run"));
  std::size_t first_number = 0;
  for (std::size_t at = last_run.find("trial "); at != std::string::npos; at = last_run.find("trial ", at + 1)) {
    const std::size_t digits = last_run.find_first_not_of("0123456789", at + 6);
    if (digits == at + 6 || last_run.compare(digits, 1, ":") != 0) continue;
    first_number = std::stoul(last_run.substr(at + 6, digits - at - 6));
    break;
  }
  EXPECT_GT(first_number, journaled) << last_run.substr(0, 4000);
}

// SIGUSR1 asks a running shrink for its best case so far: best/ appears
// while the run goes on, from the last accepted candidate, and the run
// carries on (a SIGTERM then ends it, exit 130).
TEST_F(EndToEnd, Sigusr1WritesTheBestCaseSoFarWhileTheRunGoesOn) {
  const fs::path dir = example("class4"), work = work_.path() / "work";
  const fs::path case_file = dir / "case-slow.yaml";
  testing::writeFile(case_file,
                     "batch: batch.pt\nsamples: {tensors: {input: 0, target: 0}, ids: sample_id}\n"
                     "trial:\n  command: [" +
                         python() + ", " + std::string(MINREPRO_SOURCE_DIR) +
                         "/bench/sleepy_step.py, '{batch}', '10313', '0.3']\n"
                         "flaky: {enabled: false}\nreducers: [samples]\n");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string work_arg = work.string(), case_arg = case_file.string(),
                      out = (work_.path() / "repro.tar.gz").string();
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "--config", case_arg.c_str(), "--work-dir", work_arg.c_str(),
            "--output", out.c_str(), "--quiet", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  auto running = [&] { return ::waitpid(pid, &status, WNOHANG) == 0; };
  while (running() && readFile(work / "journal.txt").find("\naccepted ") == std::string::npos) ::usleep(20'000);
  ASSERT_TRUE(running()) << "the run ended before its first acceptance";
  EXPECT_FALSE(fs::exists(work / "best")) << "best/ is not written at acceptance";
  ::kill(pid, SIGUSR1);
  bool written_while_running = false;
  while (running() && !(written_while_running = fs::exists(work / "best" / "case.yaml"))) ::usleep(20'000);
  EXPECT_TRUE(written_while_running);
  EXPECT_EQ(testing::pyEvalOnBatch(work / "best" / "batch.pt", "10313 in b['sample_id'].tolist()"), "True\n");
  EXPECT_NE(readFile(work / "minrepro.log").find("SIGUSR1: wrote the best case so far"), std::string::npos);
  if (running()) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, &status, 0);
    EXPECT_EQ(WEXITSTATUS(status), 130);
  }
}

// Two shrinks on one work directory: the second says which process holds it
// and exits 2, touching neither the first's journal nor its log.
TEST_F(EndToEnd, SecondRunOnTheSameWorkDirectoryIsRefusedNamingTheFirst) {
  const fs::path dir = example("class4"), work = work_.path() / "work";
  const fs::path case_file = dir / "case-sleepy.yaml";
  testing::writeFile(case_file,
                     "batch: batch.pt\nsamples:\n  tensors: {input: 0, target: 0}\n"
                     "trial:\n  command: [/bin/sh, -c, 'sleep 60', sh, '{batch}']\n  timeout: 120\n");
  const pid_t first = ::fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    const std::string config = case_file.string(), work_dir = work.string(), out = (work_.path() / "a.tar.gz").string();
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "shrink", "--config", config.c_str(), "--work-dir", work_dir.c_str(),
            "--output", out.c_str(), "--quiet", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The journal's first line written: the first run holds the lock and is past its start.
  // A first run that could not start ends the test, not a wait for ever.
  while (!fs::exists(work / "journal.txt") || readFile(work / "journal.txt").find('\n') == std::string::npos) {
    ASSERT_NE(::waitpid(first, nullptr, WNOHANG), first) << "the first run ended before it wrote its journal";
    ::usleep(20'000);
  }
  const std::string journal = readFile(work / "journal.txt");
  std::string output;
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + case_file.string() +
                           " --work-dir " + work.string() + " --output " + (work_.path() / "b.tar.gz").string(),
                       &output),
            2)
      << output;
  EXPECT_NE(output.find("is in use by another minrepro run (pid " + std::to_string(first) + ")"), std::string::npos)
      << output;
  EXPECT_EQ(readFile(work / "journal.txt"), journal) << "the second run touched the first's journal";
  EXPECT_FALSE(fs::exists(work / "journal.txt.old"));
  ::kill(first, SIGINT);
  int status = 0;
  ::waitpid(first, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
}

// A stop before a command answers signals itself (triage reading a log
// from a pipe, a shrink reading its case) ends it with the documented 130,
// not the signal's own status (143 for SIGTERM; #43, probe 21).
TEST(Interrupted, ASignalBeforeTheCommandsOwnHandlingEndsItWith130) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    int input[2];
    ASSERT_EQ(::pipe(input), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(input[0], STDIN_FILENO);
      ::close(input[1]);
      ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "triage", "-", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(input[0]);
    // Waits until minrepro handles the signal: its SigCgt mask in /proc names it.
    const auto handles = [&] {
      std::istringstream status(readFile("/proc/" + std::to_string(pid) + "/status"));
      for (std::string line; std::getline(status, line);)
        if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (signal - 1) & 1) == 1;
      return false;
    };
    for (int waited = 0; !handles() && waited < 3000; ++waited) ::usleep(10'000);
    EXPECT_TRUE(handles()) << "minrepro triage - does not handle signal " << signal;
    ::kill(pid, signal);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(input[1]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "signal " << signal << ": status " << status;
  }
}

}  // namespace
}  // namespace minrepro
