// Runs a reproducer archive the way a maintainer would: extracted into a
// fresh temporary directory, each run a fresh process with the diagnostic
// switches off, every run compared with what the archive records in
// signature.txt (engine/archive/manifest.h). `minrepro verify`, `regress` and
// shrink's self-check are built on it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "core/build_info.h"
#include "core/errors.h"
#include "core/failure_signature.h"
#include "core/process/job_slots.h"
#include "core/process/process.h"
#include "core/process/sandbox.h"
#include "engine/archive/manifest.h"
#include "engine/torch_versions.h"

namespace minrepro {

enum class Expect { Fail, Pass };

struct VerifyOptions {
  std::filesystem::path archive;
  const std::atomic<bool>* cancel = nullptr;  // set: the running repro.py is killed (shrink's SIGINT)
  bool cancelled() const { return cancel && cancel->load(); }
  int runs = 3;
  // Runs of op/repro_op.py, one beside each of the first `op_runs` runs of
  // repro.py; -1: beside every run. (shrink's self-check runs it none: the
  // op step beside it runs it alone as often, and those runs count.)
  int op_runs = -1;
  Expect expect = Expect::Fail;
  // --code: a directory of the user's current code whose files replace the
  // archive's bundled copies of the same names (step.py, model.py, ...), so
  // that a fix in the user's code is what runs on the minimal batch and the
  // neighbours. Empty: the archive as it is.
  std::filesystem::path code_dir;
  std::string python = kDefaultPython;
  // Variables the runs do not inherit, beyond the diagnostic ones (the
  // self-check's: what the archive does not carry).
  std::vector<std::string> env_unset;
  // verify, regress and compare: run with the torch the archive was made
  // with when this machine has it (engine/torch_versions.h), `python` then
  // being --python only when `python_given`, else the build's Python to fall
  // back on. Off for shrink's self-check, which names its Python.
  bool choose_python = false;
  bool python_given = false;
  std::chrono::milliseconds timeout{600'000};
  bool timeout_given = false;  // --timeout: else a timeout's recorded trial limit (Manifest::trial_timeout_s)
  std::size_t max_entry_bytes = std::size_t{1} << 30;
  std::uint64_t max_total_bytes = std::uint64_t{4} << 30;  // all entries together, streamed to disk
  // The archive's code runs in bubblewrap (core/process/sandbox.h):
  // auto for an archive made on another machine, when bwrap is installed.
  SandboxMode sandbox = SandboxMode::Auto;
  // Runs at once (verify --jobs): each run is its own process in its own
  // directory; the extracted files are shared. `slots`, when given, is the
  // caller's (shrink's self-check shares its --jobs with the op step).
  std::size_t jobs = 1;
  // Variables every run gets beside this process's environment (shrink's
  // self-check: the values of trial.env that the archive leaves out).
  std::map<std::string, std::string> env;
  JobSlots* slots = nullptr;
  JobSlots* bound = nullptr;  // replaces `jobs` when given: a bound the caller may grow
};

struct RunResult {
  std::string neighbour;  // "" for the minimal batch, else the neighbour's name
  TrialOutcome outcome;
  FailureSignature signature;
  bool as_expected = false;
  std::string detail;  // what this run did, in one line
};

struct VerifyResult {
  Manifest manifest;
  std::vector<RunResult> runs;
  std::vector<RunResult> neighbour_runs;  // --expect pass: one run per neighbour
  // op/repro_op.py, one run beside each of repro.py's when the archive has
  // one: it must fail like the case (the operator aside). After a fix
  // (--expect pass) its runs are reported, not judged: its inputs are the
  // recorded ones, so it passes only after a fix in PyTorch itself, and a
  // fix in the program or its data (the usual one) leaves it failing.
  std::vector<RunResult> op_runs;
  bool op_runs_judged = true;
  SandboxChoice sandbox;  // whether the runs were sandboxed, in words
  TorchChoice torch;      // which Python ran them, and whether its torch is the archive's
  int asExpected() const;
  int neighboursAsExpected() const;
  int opAsExpected() const;
  bool allAsExpected() const {
    return !runs.empty() && asExpected() == static_cast<int>(runs.size()) &&
           neighboursAsExpected() == static_cast<int>(neighbour_runs.size()) &&
           (!op_runs_judged || opAsExpected() == static_cast<int>(op_runs.size()));
  }
};

// One rule for a flaky archive, in verify and in shrink's self-check: every
// run either fails as recorded or passes, and at least one fails as
// recorded. A run that fails another way is another bug showing (slippage):
// the archive is rejected even if the recorded failure shows too. With no
// run failing, the verdict needs enough runs that a faithful archive would
// have failed once with probability 1 - alpha at `rate`; fewer are
// inconclusive (`runs_needed` says how many would do).
struct FlakyJudgement {
  int same = 0, other = 0, passed = 0;
  bool reproduces = false;
  bool conclusive = true;
  int runs_needed = 0;
  std::string describe(double rate) const;
};
FlakyJudgement judgeFlakyRuns(const std::vector<RunResult>& runs, double rate, double alpha = 0.001);

// Extracts, runs and compares; `progress` (may be null) gets a line per run.
// Throws BadInputError for bad input. `executor` null: a LocalExecutor.
VerifyResult verifyArchive(const VerifyOptions& options, std::ostream* progress, Executor* executor = nullptr);

// Whether a run's failure is the one the archive records, by verify's rule:
// both messages scrubbed alike (names, paths, the secrets `env` gives for
// the archive's withheld variables), its pattern and operator and ending
// rules as recorded.
SignatureMatch matchRecorded(const Manifest& m, FailureSignature run,
                             const std::map<std::string, std::string>& env = {});

}  // namespace minrepro
