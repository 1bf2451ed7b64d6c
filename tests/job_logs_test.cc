// The logs of real crashed jobs (tests/fixtures/logs, made by capture.sh
// there with torch 1.13 and 2.13): fatal-signal dumps, shells' and
// launchers' reports of a signal, DataLoader workers, torch.multiprocessing
// and torchrun jobs. triage names the first error, where it happened, its
// signal and the frame to open, and sets the rest aside; a trial whose
// output is such a log gets the inner error as its signature.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "commands/triage.h"
#include "core/failure_signature.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using F = FailureFamily;

std::string readLogFixture(const std::string& name) {
  return testing::readFile(fs::path(MINREPRO_TEST_FIXTURES) / "logs" / name);
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct LogCase {
  std::string file;
  F family;
  std::string signal;  // signal_name; "" when the family is not a signal
  std::string where;   // the rank, process or worker
  std::string op;
  std::size_t line;        // 1-based line of the first error
  std::string message;     // the first message (a prefix of it)
  std::string user_frame;  // the end of the frame to open first; "" when the log has none
  std::string set_aside;   // the kinds set aside, "kind@where" joined by ", "
};
std::ostream& operator<<(std::ostream& out, const LogCase& c) { return out << c.file; }

const std::string kTarget4 = "Target 4 is out of bounds.";
const std::string kBatch = "Expected input batch_size (3) to match target batch_size (2).";

// Both versions print the same forms; torch 2.13's faulthandler logs differ
// where the crash does (its double free segfaults, its channel shuffle checks
// groups) and its mp.spawn logs start with a warning line.
const std::vector<LogCase> kLogs = {
    {"torch113/faulthandler_sigsegv.txt", F::Signal, "SIGSEGV", "", "", 1, "Fatal Python error: Segmentation fault",
     "segv.py:5 in decode", ""},
    {"torch113/faulthandler_sigfpe.txt", F::Signal, "SIGFPE", "", "", 1, "Fatal Python error: Floating point exception",
     "fpe.py:5 in shuffle", ""},
    {"torch113/faulthandler_double_free.txt", F::Signal, "SIGABRT", "", "", 1,
     "free(): double free detected in tcache 2", "double_free.py:5 in <module>", ""},
    {"torch113/faulthandler_sigbus.txt", F::Signal, "SIGBUS", "", "", 1, "Fatal Python error: Bus error",
     "bus.py:8 in read_shard", ""},
    {"torch113/loader_worker_sigbus.txt", F::Signal, "SIGBUS", "DataLoader worker", "", 1,
     "Unexpected bus error encountered in worker.", "",
     "death report@DataLoader worker, death report@DataLoader worker"},
    {"torch113/shell_sigsegv.txt", F::Signal, "SIGSEGV", "", "", 1, "bash: line 1: ", "", ""},
    {"torch113/loader_worker_segv.txt", F::Signal, "SIGSEGV", "DataLoader worker", "", 1,
     "Unexpected segmentation fault encountered in worker.", "",
     "death report@DataLoader worker, death report@DataLoader worker"},
    {"torch113/loader_worker_raise.txt", F::IndexError, "", "DataLoader worker process 1", "", 15,
     "list index out of range", "loader_raise.py:10 in __getitem__", ""},
    {"torch113/spawn_raise.txt", F::IndexError, "", "process 1", "cross_entropy", 15, kTarget4,
     "spawn_raise.py:8 in step", ""},
    {"torch113/spawn_raise_other.txt", F::ValueError, "", "process 1", "cross_entropy", 15, kBatch,
     "spawn_raise_other.py:7 in step", ""},
    {"torch113/spawn_segv.txt", F::Signal, "SIGSEGV", "process 1", "", 1, "process 1 terminated with signal SIGSEGV",
     "", ""},
    {"torch113/subprocess_segv.txt", F::Signal, "SIGSEGV", "", "", 1, "Command '['/usr/bin/python3', 'segv.py']'", "",
     ""},
    {"torch213/faulthandler_sigsegv.txt", F::Signal, "SIGSEGV", "", "", 1, "Fatal Python error: Segmentation fault",
     "segv.py:5 in decode", ""},
    {"torch213/faulthandler_double_free.txt", F::Signal, "SIGSEGV", "", "", 1, "Fatal Python error: Segmentation fault",
     "double_free.py:4 in <module>", ""},
    {"torch213/faulthandler_sigbus.txt", F::Signal, "SIGBUS", "", "", 1, "Fatal Python error: Bus error",
     "bus.py:8 in read_shard", ""},
    {"torch213/loader_worker_sigbus.txt", F::Signal, "SIGBUS", "DataLoader worker", "", 1,
     "Unexpected bus error encountered in worker.", "",
     "death report@DataLoader worker, death report@DataLoader worker"},
    {"torch213/shell_sigsegv.txt", F::Signal, "SIGSEGV", "", "", 1, "bash: line 1: ", "", ""},
    {"torch213/loader_worker_segv.txt", F::Signal, "SIGSEGV", "DataLoader worker", "", 1,
     "Unexpected segmentation fault encountered in worker.", "",
     "death report@DataLoader worker, death report@DataLoader worker"},
    {"torch213/loader_worker_raise.txt", F::IndexError, "", "DataLoader worker process 1", "", 15,
     "list index out of range", "loader_raise.py:10 in __getitem__", ""},
    {"torch213/spawn_raise.txt", F::IndexError, "", "process 1", "cross_entropy", 15, kTarget4,
     "spawn_raise.py:8 in step", ""},
    {"torch213/spawn_raise_other.txt", F::ValueError, "", "process 1", "cross_entropy", 16, kBatch,
     "spawn_raise_other.py:7 in step", ""},
    {"torch213/spawn_segv.txt", F::Signal, "SIGSEGV", "process 1", "", 2, "process 1 terminated with signal SIGSEGV",
     "", ""},
    {"torch213/subprocess_segv.txt", F::Signal, "SIGSEGV", "", "", 1, "Command '['<tmp>/bin/python', 'segv.py']'", "",
     ""},
    // rank 1 raises; rank 0 times out in all_reduce and exits first, so
    // torchrun's "Root Cause (first observed failure)" names rank 0.
    {"torch213/torchrun_ranks_raise.txt", F::IndexError, "", "rank 1", "cross_entropy", 5, kTarget4,
     "ranks_raise.py:11 in <module>", "collective timeout@rank 0, launcher summary@rank 0"},
    // rank 1 dies of SIGSEGV without a word; rank 0 loses its connection.
    {"torch213/torchrun_ranks_segv.txt", F::Signal, "SIGSEGV", "rank 1", "", 16,
     "root cause (first observed failure): rank 1, killed by SIGSEGV", "", "lost connection@rank 0"},
};

std::string setAsideKinds(const std::vector<SetAside>& set_aside) {
  std::string text;
  for (const SetAside& other : set_aside) text += (text.empty() ? "" : ", ") + other.kind + "@" + other.where;
  return text;
}

class JobLog : public ::testing::TestWithParam<LogCase> {};

TEST_P(JobLog, TriageNamesTheFirstErrorWhereItHappenedAndWhatWasSetAside) {
  const LogCase& c = GetParam();
  const Triage t = triageText(readLogFixture(c.file));
  EXPECT_EQ(familyName(t.signature.family), familyName(c.family));
  EXPECT_EQ(t.signature.signal_name, c.signal);
  EXPECT_EQ(t.where, c.where);
  EXPECT_EQ(t.signature.op, c.op);
  EXPECT_EQ(t.first_line, c.line);
  EXPECT_EQ(t.signature.message.substr(0, c.message.size()), c.message);
  if (c.user_frame.empty())
    EXPECT_EQ(t.user_frame, "");
  else
    EXPECT_TRUE(endsWith(t.user_frame, c.user_frame)) << t.user_frame;
  EXPECT_EQ(setAsideKinds(t.set_aside), c.set_aside);
}

// A trial whose output is the log (the job exited 1, or died of the signal
// the log reports) has the log's first error as its signature.
TEST_P(JobLog, ATrialsSignatureIsTheInnerError) {
  const LogCase& c = GetParam();
  TrialOutcome outcome;
  outcome.end = TrialEnd::Exited;
  outcome.exit_code = 1;
  outcome.stderr_text = readLogFixture(c.file);
  const FailureSignature s = classify(outcome);
  EXPECT_EQ(familyName(s.family), familyName(c.family));
  EXPECT_EQ(s.signal_name, c.signal);
  EXPECT_EQ(s.op, c.op);
}

std::string logName(const ::testing::TestParamInfo<LogCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Logs, JobLog, ::testing::ValuesIn(kLogs), logName);

// Two different errors behind the same wrapper are two signatures: the
// wrapper's own text ("-- Process 1 terminated with the following error:")
// would have made them one.
TEST(JobLogSignature, TwoInnerErrorsOfOneWrapperDoNotMatch) {
  for (const std::string version : {"torch113", "torch213"}) {
    const FailureSignature target4 = classifyText(readLogFixture(version + "/spawn_raise.txt"));
    const FailureSignature batch = classifyText(readLogFixture(version + "/spawn_raise_other.txt"));
    EXPECT_EQ(target4.message, kTarget4);
    EXPECT_FALSE(matchSignature(target4, batch, {}).matches) << version;
    EXPECT_TRUE(matchSignature(target4, target4, {}).matches) << version;
  }
}

// The ranks' lines interleaved one by one, rank 0's timeout first: each
// rank's lines are read as its own stream and the timeout stays a consequence.
TEST(JobLogSignature, InterleavedRanksAreReadRankByRank) {
  std::istringstream in(readLogFixture("torch213/torchrun_ranks_raise.txt"));
  std::vector<std::string> rank0, rank1, rest;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[rank0]:", 0) == 0)
      rank0.push_back(line);
    else if (line.rfind("[rank1]:", 0) == 0)
      rank1.push_back(line);
    else
      rest.push_back(line);
  }
  ASSERT_FALSE(rank0.empty());
  ASSERT_FALSE(rank1.empty());
  std::string text;
  for (std::size_t i = 0; i < std::max(rank0.size(), rank1.size()); ++i) {
    if (i < rank0.size()) text += rank0[i] + "\n";
    if (i < rank1.size()) text += rank1[i] + "\n";
  }
  for (const auto& line : rest) text += line + "\n";
  const Triage t = triageText(text);
  EXPECT_EQ(t.signature.family, F::IndexError);
  EXPECT_EQ(t.signature.message, kTarget4);
  EXPECT_EQ(t.where, "rank 1");
  EXPECT_EQ(t.first_line, 2u);  // rank 1's traceback header, second line of the log
  EXPECT_EQ(setAsideKinds(t.set_aside), "collective timeout@rank 0, launcher summary@rank 0");
}

// A process that died of a signal and printed only its peers' timeouts died
// of the signal.
TEST(JobLogSignature, ASignalledTrialWithOnlyWaitsInItsOutputIsASignal) {
  TrialOutcome outcome;
  outcome.end = TrialEnd::Signaled;
  outcome.signal = 11;
  outcome.stderr_text = "RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:4321\n";
  const FailureSignature s = classify(outcome);
  EXPECT_EQ(s.family, F::Signal);
  EXPECT_EQ(s.signal_name, "SIGSEGV");
}

// Small texts in the forms of the fixtures, for what the real logs above do
// not happen to contain.

// A traceback's block ends where another process's report begins: a fault
// dump after a peer's lost connection is still read, and wins.
TEST(JobLogForms, AFaultDumpAfterATracebackIsReadAndWins) {
  const LogReading log = readLog(
      "Traceback (most recent call last):\n"
      "  File \"/src/train.py\", line 8, in <module>\n"
      "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:1234\n"
      "Fatal Python error: Segmentation fault\n"
      "\n"
      "Current thread 0x00007f (most recent call first):\n"
      "  File \"/src/train.py\", line 5 in decode\n");
  EXPECT_EQ(log.signature.family, F::Signal);
  EXPECT_EQ(log.first_line, 4u);
  EXPECT_EQ(log.user_frame, "/src/train.py:5 in decode");
  EXPECT_EQ(setAsideKinds(log.set_aside), "lost connection@");
}

// torchrun --tee's "[default1]:" carries no space: the frames keep their indent.
TEST(JobLogForms, TeePrefixesKeepTheFramesIndent) {
  const LogReading log = readLog(
      "[default1]:Fatal Python error: Segmentation fault\n"
      "[default1]:\n"
      "[default1]:Current thread 0x00007f (most recent call first):\n"
      "[default1]:  File \"/src/train.py\", line 5 in decode\n"
      "[default0]:RuntimeError: Connection closed by peer\n");
  EXPECT_EQ(log.signature.signal_name, "SIGSEGV");
  EXPECT_EQ(log.where, "local rank 1");
  EXPECT_EQ(log.user_frame, "/src/train.py:5 in decode");
}

TEST(JobLogForms, OnlyAShellsOwnReportIsADeath) {
  EXPECT_EQ(classifyText("stats: 3 Killed jobs requeued\n").family, F::None);
  EXPECT_EQ(classifyText("Aborted: the user cancelled\n").family, F::None);
  EXPECT_EQ(classifyText("Segmentation fault (core dumped)\n").signal_name, "SIGSEGV");
  EXPECT_EQ(classifyText("./run.sh: line 3: 4242 Killed                  python train.py\n").signal_name, "SIGKILL");
}

// A rank whose own lines hold an error is read by it, not by the launcher's
// report of its death: an NCCL timeout that ends in the watchdog's abort is
// a timeout.
TEST(JobLogForms, ARanksOwnErrorBeatsTheReportOfItsDeath) {
  const LogReading log = readLog(
      "[rank1]: terminate called after throwing an instance of 'c10::DistBackendError'\n"
      "[rank1]:   what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
      "OpType=ALLREDUCE) ran for 600047 milliseconds before timing out.\n"
      "[rank1]: Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525\n"
      "[rank1]: frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /x/libc10.so)\n"
      "[rank1]: frame #1: clone + 0x43 (0x7f in /lib/x86_64-linux-gnu/libc.so.6)\n"
      "[rank1]: Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1320\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/bin/torchrun\", line 8, in <module>\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  rank      : 1 (local_rank: 1)\n"
      "  exitcode  : -6 (pid: 12)\n"
      "============================================================\n");
  EXPECT_EQ(log.signature.family, F::RuntimeError);
  EXPECT_NE(log.signature.message.find("Watchdog caught collective operation timeout"), std::string::npos);
  EXPECT_EQ(log.where, "rank 1");
  EXPECT_EQ(setAsideKinds(log.set_aside), "launcher summary@rank 1");  // no error read from a C++ frame
}

// NCCL's word for a peer that died is a lost connection: the launcher's
// root cause (rank 1, SIGSEGV) is the first error.
TEST(JobLogForms, NcclRemoteErrorIsALostConnection) {
  const LogReading log = readLog(
      "[rank0]: Traceback (most recent call last):\n"
      "[rank0]:   File \"/src/train.py\", line 8, in <module>\n"
      "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
      "remote process exited or there was a network error, NCCL version 2.20.5\n"
      "Traceback (most recent call last):\n"
      "  File \"/usr/bin/torchrun\", line 8, in <module>\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "Root Cause (first observed failure):\n"
      "[0]:\n"
      "  rank      : 1 (local_rank: 1)\n"
      "  exitcode  : -11 (pid: 12)\n"
      "============================================================\n");
  EXPECT_EQ(log.signature.signal_name, "SIGSEGV");
  EXPECT_EQ(log.where, "rank 1");
  EXPECT_EQ(setAsideKinds(log.set_aside), "lost connection@rank 0");
}

TEST(JobLogTriage, RenderShowsTheRankTheFrameAndWhyTheRootCauseIsNotIt) {
  const std::string out = renderTriage(triageText(readLogFixture("torch213/torchrun_ranks_raise.txt")), "train.log");
  EXPECT_NE(out.find("in:                  rank 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("open first:          "), std::string::npos) << out;
  EXPECT_NE(out.find("ranks_raise.py:11 in <module>\n"), std::string::npos) << out;
  EXPECT_NE(out.find("set aside:           2 read as consequences of the first error: 1 collective timeout "
                     "(rank 0), 1 launcher summary (rank 0)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  train.log:13 (rank 0): collective timeout: runtime-error: "), std::string::npos) << out;
  EXPECT_NE(out.find("names rank 0, the first process to exit; the first error happened in rank 1"), std::string::npos)
      << out;
  EXPECT_NE(out.find("next: fix the error of rank 1 first"), std::string::npos) << out;
}

// A job of thousands of ranks, each raising after rank 0: the set-aside line
// names the first eight ranks and counts the rest (it named all 3000), and
// every rank is still its own stream (rank 2999's error is read as its own).
TEST(JobLogTriage, ThousandsOfRanksAreCountedNotListed) {
  std::string log;
  for (int r = 0; r < 3000; ++r) log += "[rank" + std::to_string(r) + "]: step 10 loss 0.5\n";
  for (int r = 0; r < 3000; ++r) {
    const std::string p = "[rank" + std::to_string(r) + "]: ";
    log += p + "Traceback (most recent call last):\n" + p + "  File \"/src/train.py\", line 42, in <module>\n" + p +
           "IndexError: index " + std::to_string(r) + " is out of bounds\n";
  }
  const std::string out = renderTriage(triageText(log), "train.log");
  EXPECT_NE(out.find("in:                  rank 0\n"), std::string::npos) << out.substr(0, 2000);
  EXPECT_NE(out.find("set aside:           2999 read as consequences of the first error: 2999 later errors (rank 1, "
                     "rank 2, rank 3, rank 4, rank 5, rank 6, rank 7, rank 8 and 2991 more)\n"),
            std::string::npos)
      << out.substr(0, 2000);
  EXPECT_EQ(out.find("rank 2999,"), std::string::npos);
  EXPECT_LT(out.size(), 4000u);
}

// 14 000 spawned processes' tracebacks, each the message of the one around
// it: triage died with SIGSEGV (each level read the next inside itself).
// Read 64 levels deep, the rest is the innermost error read so far.
TEST(JobLogTriage, TracebacksWrappedThousandsDeepAreReadWithoutOverflowingTheStack) {
  std::string log;
  for (int i = 0; i < 14000; ++i)
    log +=
        "Traceback (most recent call last):\ntorch.multiprocessing.spawn.ProcessRaisedException: \n\n"
        "-- Process 0 terminated with the following error:\n";
  log += "Traceback (most recent call last):\n  File \"/src/train.py\", line 9, in <module>\nIndexError: deep\n";
  const std::string out = renderTriage(triageText(log), "train.log");
  EXPECT_NE(out.find("first error:"), std::string::npos) << out.substr(0, 2000);
}

TEST(JobLogTriage, ASignalInAWorkerPointsAtTheDataset) {
  const std::string out = renderTriage(triageText(readLogFixture("torch113/loader_worker_segv.txt")), "x.log");
  EXPECT_NE(out.find("signal:              SIGSEGV\n"), std::string::npos) << out;
  EXPECT_NE(out.find("in:                  DataLoader worker\n"), std::string::npos) << out;
  EXPECT_NE(out.find("the dataset's __getitem__"), std::string::npos) << out;
  EXPECT_NE(out.find("PYTHONFAULTHANDLER=1"), std::string::npos) << out;
  const std::string bus = renderTriage(triageText(readLogFixture("torch213/loader_worker_sigbus.txt")), "x.log");
  EXPECT_NE(bus.find("signal:              SIGBUS\n"), std::string::npos) << bus;
  EXPECT_NE(bus.find("/dev/shm"), std::string::npos) << bus;
}

}  // namespace
}  // namespace minrepro
