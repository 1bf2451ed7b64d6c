// `minrepro verify repro.tar.gz`: runs a reproducer archive the way a
// maintainer would (GUIDE.md §6): extracted into a fresh temporary directory,
// each run a fresh process with the diagnostic switches off, and compares
// every run with what the archive records in signature.txt.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/archive.h"
#include "engine/case_config.h"
#include "engine/failure_signature.h"
#include "engine/neighbours.h"
#include "engine/process.h"

namespace minrepro {

// signature.txt: the failure repro.py must show before a fix, and what a
// correct run must print after it.
struct Manifest {
  FailureSignature signature;
  // The operator is compared only when repro.py runs the very program the
  // trials ran (a trial command). For the built-in harness the trials ran
  // LibTorch, which names the kernel (nll_loss), while repro.py's Python
  // traceback names the functional (cross_entropy): one bug, two names.
  bool compare_operator = false;
  // case.yaml's failure.message: when the trials matched messages by this
  // pattern, so does verify (else by the message with its numbers masked).
  std::string message_pattern;
  // Samples a correct run must process (targets that are not ignore_index);
  // absent when the archive cannot know (a trial command, no target).
  std::optional<std::int64_t> processed;
  // Neighbour batches (GUIDE.md §6) that --expect pass also runs, each with
  // its own expected count; and the neighbours that could not be made, why.
  std::vector<NeighbourCase> neighbours;
  std::vector<std::string> neighbours_skipped;
};

std::string renderManifest(const Manifest& manifest);
// Throws VerifyError naming `source` when a line is not understood.
Manifest parseManifest(const std::string& text, const std::string& source);

// The signature.txt entry of the archive `shrink` writes for this case.
ArchiveEntry manifestEntry(const CaseConfig& config, const std::filesystem::path& minimal_batch,
                           const FailureSignature& signature, const NeighbourPlan& neighbours = {});

// Samples a correct run on `batch_file` must process (targets that are not
// ignore_index); absent for a trial command or non-integer targets.
std::optional<std::int64_t> expectedProcessed(const CaseConfig& config, const std::filesystem::path& batch_file);

// Bad input for verify (exit status 2): unreadable or hostile archive, not
// a minrepro archive, nothing recorded to check --expect pass against.
class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The variables that change how a GPU program runs, for diagnosis only; a
// confirmation runs without them (GUIDE.md §2, §6, §8).
const std::vector<std::string>& diagnosticVariables();

enum class Expect { Fail, Pass };

struct VerifyOptions {
  std::filesystem::path archive;
  const std::atomic<bool>* cancel = nullptr;  // set: the running repro.py is killed (shrink's SIGINT)
  int runs = 3;
  Expect expect = Expect::Fail;
  std::string python = "/usr/bin/python3";
  std::chrono::milliseconds timeout{600'000};
  std::size_t max_entry_bytes = std::size_t{1} << 30;
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
  int asExpected() const;
  int neighboursAsExpected() const;
  bool allAsExpected() const {
    return !runs.empty() && asExpected() == static_cast<int>(runs.size()) &&
           neighboursAsExpected() == static_cast<int>(neighbour_runs.size());
  }
};

// Extracts, runs and compares; `progress` (may be null) gets a line per run.
// Throws VerifyError for bad input. `executor` null: a LocalExecutor.
VerifyResult verifyArchive(const VerifyOptions& options, std::ostream* progress, Executor* executor = nullptr);

// A fresh directory under the temp dir, removed with everything in it
// (verify and compare extract archives into one). Throws VerifyError.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Reads an archive made by `minrepro shrink` and writes its entries under
// `dir`, after refusing absolute paths, '..', links, devices and entries over
// `max_entry_bytes` (a refused archive writes nothing). Throws VerifyError.
// Also used by `minrepro compare`.
std::vector<ArchiveEntry> extractArchive(const std::filesystem::path& archive, const std::filesystem::path& dir,
                                         std::size_t max_entry_bytes = std::size_t{1} << 30);

// The command: exit 0 every run as expected, 1 not every run, 2 bad input.
int runVerify(const VerifyOptions& options, std::ostream& out, std::ostream& err);

}  // namespace minrepro
