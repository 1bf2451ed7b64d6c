// Is a candidate still interesting? Materializes it, runs it as trials in
// fresh processes, classifies each outcome and compares its failure
// signature with the original's. A different failure is a different bug: it
// is counted and logged, never accepted.
//
// Every trial result is kept per candidate (content hash) and journaled.
// Deciding a candidate reads its results in trial order, from earlier runs of
// the same candidate (cache), from the journal (resume) and then from live
// trials, so decisions are the same whether results were cached, replayed or
// run, and however many trials ran at once. Free job slots run speculative
// trials of the candidates the search will most likely ask next.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "core/case_config.h"
#include "core/errors.h"
#include "core/failure_signature.h"
#include "core/flaky.h"
#include "core/process/process.h"
#include "engine/case_check.h"
#include "engine/journal.h"
#include "engine/log.h"
#include "engine/timeline.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

struct OracleStats {
  std::size_t trials = 0;       // trials run in this process
  std::size_t replayed = 0;     // results taken from the journal of an earlier run
  std::size_t reused = 0;       // results of the same candidate taken again (cache)
  std::size_t speculative = 0;  // trials run ahead for candidates not yet asked
  std::size_t rounds = 0;       // sets of trials run at once: the run's length in trial times
  std::size_t same_failure = 0;
  std::size_t passed = 0;
  std::size_t different_failure = 0;  // failed, but not the same way
  std::size_t timeouts = 0;
  std::size_t slipped = 0;     // candidates that failed the recorded way and another way too: rejected
  std::size_t candidates = 0;  // decisions
  std::size_t rejected_by_invariant = 0;
  // Signature summary -> count. Failures whose messages differ only in
  // their numbers are one entry, named by the first seen (they are one bug
  // to matchSignature too); `other_bug_variants` counts their messages.
  std::map<std::string, std::size_t> other_bugs;
  std::map<std::string, std::size_t> other_bug_variants;
  // Candidate files written for the trials (the original's are links to one copy).
  std::uint64_t bytes_written = 0;
  double write_seconds = 0;
  std::uint64_t last_candidate_bytes = 0;
  double last_trial_seconds = 0;  // of the last trial finished
  // The trials' own time: each process from start to end, summed; and the
  // longest of each round, summed (the wall time rounds had to take: what
  // a round's wall time has beyond it is the engine's own).
  double trial_seconds = 0;
  double round_trial_seconds = 0;
};

struct RunLimits {
  std::size_t max_trials = 0;  // 0: none (counts replayed trials too)
  double max_seconds = 0;      // 0: none
  // Counts max_seconds from startSearchClock() rather than the run's start:
  // the op step's reduction bounds its search, not the start of its Python
  // and the check of its original, which a loaded machine can stretch past
  // a bound of a few seconds before the first candidate.
  bool seconds_from_search = false;
  const std::atomic<bool>* stop = nullptr;  // set by SIGINT/SIGTERM
};

struct TrialRecord {
  std::size_t number = 0;
  TrialOutcome outcome;
  FailureSignature signature;
  MarkOutcome mark = MarkOutcome::Passed;  // what it answered, for the timeline
  bool used = true;                        // false: run ahead of an original that had not failed yet
};

// A candidate the search would ask next, or the final confirmation's run
// of the case it would end with (run without diagnostic variables).
struct Speculated {
  Selection selection;
  bool confirmation = false;
};

// Candidates the search would ask next, most likely first (for speculation),
// given the likelier answer to the current one: accepted while it has not
// passed yet, rejected once it has.
using Speculation = std::function<std::vector<Speculated>(std::size_t max, bool accepted)>;

class TrialOracle {
 public:
  // trial_binary: the minrepro-trial executable for the built-in harness.
  TrialOracle(const CaseConfig& config, const BatchStore& batch, Executor& executor, std::string trial_binary, Log& log,
              Journal* journal = nullptr, RunLimits limits = {}, std::size_t jobs = 1);
  // Removes the run's copy of the original batch (see linkOriginal).
  ~TrialOracle();
  TrialOracle(const TrialOracle&) = delete;
  TrialOracle& operator=(const TrialOracle&) = delete;

  // Runs the original until the failure rate is estimated (see FlakyOptions);
  // the first failure (that matches case.yaml's failure section) becomes the
  // reference. Returns the estimate; failures == 0 means it does not reproduce.
  // Free job slots run `next` (the search's first candidates) meanwhile.
  OriginalEstimate estimateOriginal(const Selection& all, const Speculation& next = {});
  // How the first failure's trial ended ("killed by SIGABRT").
  const std::string& firstFailureExit() const { return first_failure_exit_; }
  const FailureSignature& reference() const { return reference_; }
  void setReference(const FailureSignature& signature) { reference_ = signature; }

  // Runs the original `runs` times as plain processes (never forked), for
  // comparison with the forked runs of estimateOriginal.
  OriginalEstimate runOriginalFresh(const Selection& all, std::size_t runs);
  // Plain runs of the original started now, one after another on a thread
  // of their own, while estimateOriginal's forked runs use the other job
  // slots (reserveSlots); finishFreshOriginals judges them once the
  // reference exists, and runOriginalFresh then finds them done. The
  // comparison with plain processes then costs no wall time of its own.
  std::future<std::vector<TrialRecord>> startFreshOriginals(const Selection& all, std::size_t runs);
  void finishFreshOriginals(const Selection& all, std::vector<TrialRecord> records);
  // Plain runs of the original already judged.
  std::size_t freshOriginalRuns(const Selection& all) const;
  // Job slots the oracle's own rounds leave to runs started beside them.
  void reserveSlots(std::size_t slots) { reserved_ = slots; }
  // From now on every trial is a plain process: forked children did not
  // behave as fresh processes on the original, or the final 1-minimality
  // check (which agreement on the original does not make safe to fork).
  void useFreshProcessesOnly() { fresh_only_ = true; }
  // The forked runs of the original do not fail as fresh ones do: the
  // failure rate and the evidence about determinism start again from the
  // original's plain runs alone (forked passes say nothing about the case).
  void rateFromFreshOriginalOnly(const Selection& all);
  bool freshProcessesOnly() const { return fresh_only_; }

  // Decides a candidate with the sequential rule; records accepted states.
  // `recheck`: a question of the final 1-minimality check, answered at the
  // full strength of flaky.alpha even while the failure looks deterministic.
  bool interesting(const Selection& selection, const Speculation& next = {}, bool recheck = false);
  // Fresh trials of the final case (never cached): does it still fail?
  // Runs without any diagnostic variable (set here or inherited): the
  // normal configuration (docs/method.md, "Confirmation in the normal configuration").
  bool confirm(const Selection& selection);
  // Diagnostic variables (engine/diagnostics.h) for every trial but the
  // confirmation's: the original's first re-run and the reduction's.
  void setDiagnosticEnvironment(std::vector<std::pair<std::string, std::string>> env) {
    diagnostic_env_ = std::move(env);
  }

  // The spec a trial of the selection would run with in `dir`, without
  // running it or writing its batch there.
  TrialSpec specFor(const Selection& selection, const std::filesystem::path& dir) const {
    return specIn(dir, selection, 0, false);
  }
  // One plain-process run of the selection in `dir`, as the confirmation
  // runs it (no diagnostic variables) with `env` added; not counted, not
  // journaled, not judged: the file trace of the minimal case.
  TrialOutcome runUncounted(const Selection& selection, const std::map<std::string, std::string>& env,
                            const std::filesystem::path& dir);

  // Whether `outcome` is the failure the original showed (the reference),
  // as a trial is judged: for a run outside the search (the file trace's).
  bool sameFailure(const TrialOutcome& outcome) const { return matches(classifyAs(outcome, config_.expected)); }

  // The signature of the selection's last trial when it failed another way.
  std::optional<FailureSignature> otherFailureOf(const Selection& selection) const;

  // The selection's own failure, as its last run that failed the recorded
  // way printed it (a confirmation's before the search's): the same failure as the
  // reference, its message perhaps with other numbers ("Target 9" where the
  // original said "Target 7": another sample of the batch failing the same
  // way). None when no such run is known (a result replayed from a journal).
  std::optional<FailureSignature> ownFailureOf(const Selection& selection) const;

  // Runs one live trial of the selection and classifies it, without judging it.
  TrialRecord run(const Selection& selection);

  const OracleStats& stats() const { return stats_; }
  std::size_t jobs() const { return jobs_; }
  const FailureRate& rate() const { return rate_; }
  // Whether flakiness handling treats the failure as deterministic now
  // (flaky.enabled and no evidence against it: core/flaky.h).
  bool decidesOnOneRun() const { return config_.flaky.enabled && rate_.deterministic(); }
  // Called with every accepted candidate (each is smaller than the last).
  void onBetter(std::function<void(const Selection&)> callback) { on_better_ = std::move(callback); }
  // Called after each round of trials (between rounds nothing is in flight).
  void onRound(std::function<void()> callback) { on_round_ = std::move(callback); }
  // Every answer, with its candidate's size, for the reports (null: none kept).
  void setTimeline(Timeline* timeline) { timeline_ = timeline; }
  // Where RunLimits::seconds_from_search counts from: once the original is checked.
  void startSearchClock() { search_from_ = log_.elapsedSeconds(); }
  Timeline* timeline() const { return timeline_; }
  // argv of a trial of the selection on a batch file (placeholders
  // substituted, the selection's branches applied).
  // Why the selection breaks an invariant of the case, if it does (cached).
  std::optional<std::string> brokenInvariant(const Selection& selection, const std::string& key);

 private:
  bool matches(const FailureSignature& signature) const;
  bool othersSeen() const;
  bool otherFailureAbove(const Selection& selection) const;
  bool showsNoOtherFailure(const Selection& selection, const std::string& key, std::size_t& cursor);
  std::vector<bool> resultsFor(const Selection& selection, const std::string& key, std::size_t count, std::size_t spare,
                               std::size_t& cursor, std::size_t preexisting, const Speculation& next);
  std::vector<TrialRecord> runLive(const std::vector<Selection>& selections, const std::vector<std::string>& keys);
  TrialRecord finishTrial(TrialRecord record, const std::string& key);
  void failIfDiskFull(const TrialRecord& record) const;
  std::uintmax_t full_below_ = 0;  // free bytes under which the work directory counts as full
  void checkLimits(std::size_t about_to_run) const;
  std::string candidateKey(const Selection& selection) const;
  TrialSpec prepare(const Selection& selection, std::size_t number, bool confirmation, bool fresh);
  TrialSpec specIn(const std::filesystem::path& dir, const Selection& selection, std::size_t number,
                   bool confirmation) const;
  std::uint64_t writeTrialBatch(const std::filesystem::path& dir, const Selection& selection);
  std::mutex write_mutex_;
  void applyDiagnosticMode(TrialSpec& spec, bool confirmation) const;
  std::filesystem::path trialDir(std::size_t number) const;

  const CaseConfig& config_;
  const BatchStore& batch_;
  Executor& executor_;
  std::string trial_binary_;
  Log& log_;
  Journal* journal_;
  RunLimits limits_;
  double search_from_ = -1;  // startSearchClock(); -1: not started
  // The samples of each candidate that failed another way (otherFailureAbove).
  std::vector<std::vector<std::int64_t>> other_above_;
  std::size_t jobs_;
  std::size_t reserved_ = 0;  // of jobs_, left to runs started beside the rounds
  std::size_t activeJobs() const { return jobs_ > reserved_ ? jobs_ - reserved_ : 1; }
  std::string full_key_;  // the original's selection: its trials read a copy of the user's batch file
  // That copy, made once per run (originalCopy), and its identity when made.
  std::filesystem::path linkOriginal(const std::filesystem::path& batch_file);
  std::optional<std::string> original_stamp_;
  struct CandidateFile {
    std::size_t samples = 0;
    std::uint64_t bytes = 0;  // 0: not written (a fork server cut it)
  };
  std::map<std::size_t, CandidateFile> candidate_files_;  // by trial number
  std::string trialCost(const TrialRecord& record);
  bool fresh_only_ = false;
  FailureSignature reference_;
  std::string first_failure_exit_;
  FailureRate rate_;
  OracleStats stats_;
  std::size_t trial_number_ = 0;
  std::function<void(const Selection&)> on_better_;
  std::function<void()> on_round_;
  Timeline* timeline_ = nullptr;
  void mark(const Selection& selection, MarkOutcome outcome, const TrialRecord* record);
  std::vector<std::pair<std::string, std::string>> diagnostic_env_;
  std::map<std::string, std::vector<bool>> results_;  // candidate key -> results in trial order
  // candidate key -> its runs that failed another way: a candidate that
  // fails the recorded way in some runs and another way in others has
  // slipped to a second bug, and is never accepted (nor confirmed).
  std::map<std::string, std::size_t> other_failures_;
  std::map<std::string, std::vector<bool>> journaled_;  // not yet replayed
  // Evidence against determinism: a selection seen to fail the same way and
  // to pass (by selection, whichever processes ran it), and candidates that
  // keep all of one with the other answer (core/flaky.h).
  void noteForDeterminism(const std::string& selection_key, bool matched, bool passed);
  std::map<std::string, std::pair<bool, bool>> seen_answers_;  // selection key -> (matched, passed)
  bool estimating_original_ = false;
  static bool keepsAll(const Selection& big, const Selection& small) { return keepsAllOf(big, small); }
  MonotonicityWatch<Selection, bool (*)(const Selection&, const Selection&)> monotonicity_{&TrialOracle::keepsAll};
  // candidate key -> the signature of its last trial that failed another way
  // (cleared by one that did not): what a wrong case's candidates fail with.
  std::map<std::string, FailureSignature> last_other_;
  std::map<std::string, FailureSignature> last_matched_;  // candidate key -> its last run that failed the recorded way
  // A different failure's shape (its numbers masked) -> the summary it is counted under, and its messages.
  std::map<std::string, std::pair<std::string, std::set<std::string>>> other_bug_shapes_;
  OtherFailureWatch other_watch_;  // stops a search that shows nothing but other failures
  std::vector<TensorInfo> original_tensors_;
  std::map<std::string, std::optional<std::string>> invariant_checks_;  // candidate key -> broken invariant
};

}  // namespace minrepro
