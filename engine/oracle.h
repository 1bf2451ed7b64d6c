// Is a candidate still interesting? Materializes it, runs it as a trial in a
// fresh process, classifies the outcome and compares its failure signature
// with the original's. A different failure is a different bug: it is counted
// and logged, never accepted.
#pragma once

#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

#include "engine/case_config.h"
#include "engine/failure_signature.h"
#include "engine/log.h"
#include "engine/process.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

struct OracleStats {
  std::size_t trials = 0;
  std::size_t same_failure = 0;
  std::size_t passed = 0;
  std::size_t different_failure = 0;  // failed, but not the same way
  std::size_t timeouts = 0;
  std::map<std::string, std::size_t> other_bugs;  // signature summary -> count
};

// A trial could not be started (missing program, no permission): the run stops.
class TrialStartError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrialRecord {
  std::size_t number = 0;
  TrialOutcome outcome;
  FailureSignature signature;
};

class TrialOracle {
 public:
  // trial_binary: the minrepro-trial executable for the built-in harness.
  TrialOracle(const CaseConfig& config, const BatchStore& batch, Executor& executor,
              std::string trial_binary, Log& log);

  // Runs one trial of the selection and classifies it, without judging it.
  TrialRecord run(const Selection& selection);
  // The failure every candidate must reproduce.
  void setReference(const FailureSignature& signature) { reference_ = signature; }
  const FailureSignature& reference() const { return reference_; }
  // Runs the selection and answers whether it fails the same way.
  bool interesting(const Selection& selection);

  const OracleStats& stats() const { return stats_; }
  // argv of a trial on a batch file (placeholders substituted).
  std::vector<std::string> trialArgv(const std::filesystem::path& batch, const std::filesystem::path& trial_dir) const;

 private:
  std::filesystem::path trialDir(std::size_t number) const;

  const CaseConfig& config_;
  const BatchStore& batch_;
  Executor& executor_;
  std::string trial_binary_;
  Log& log_;
  FailureSignature reference_;
  OracleStats stats_;
};

// Replaces "{batch}", "{workdir}" and "{case_dir}" in one argv element.
std::string substitutePlaceholders(std::string arg, const std::filesystem::path& batch,
                                   const std::filesystem::path& work_dir, const std::filesystem::path& case_dir);

}  // namespace minrepro
