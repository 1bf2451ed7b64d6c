#include "engine/oracle.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/disk_space.h"
#include "engine/diagnostics.h"
#include "engine/format_list.h"
#include "engine/invariants.h"
#include "engine/trial_spec.h"
#include "reducers/selection_text.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {
// Result keys of trials that are not of a search candidate: the original's
// check and single runs (whose failure may become the reference), and the
// final confirmation's (run without diagnostic variables).
const std::string kOriginalPrefix = "original:";
const std::string kSinglePrefix = "single:";
const std::string kConfirmPrefix = "confirm:";
// Trials run as plain processes, never in a fork server: the comparison of
// the original's outcomes and the final 1-minimality check. Their results are
// kept apart from forked trials' of the same candidate.
const std::string kFreshPrefix = "fresh:";
}  // namespace

namespace {

// The reference signature as one journal line, and back.
// The place goes before the message, marked (a journal written before it
// had none there).
const std::string kPlaceMark = "at:";

std::string serializeReference(const FailureSignature& s, const std::string& exit) {
  return familyName(s.family) + "\t" + s.op + "\t" + s.signal_name + "\t" + exit + "\t" + kPlaceMark + s.place + "\t" +
         s.message;
}

FailureSignature parseReference(const std::string& line, std::string* exit) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string field; f.size() < 4 && std::getline(in, field, '\t');) f.push_back(field);
  std::string message;
  std::getline(in, message);
  FailureSignature s;
  if (f.size() < 4) return s;
  s.family = parseFamily(f[0]).value_or(FailureFamily::None);
  s.op = f[1];
  s.signal_name = f[2];
  *exit = f[3];
  if (message.starts_with(kPlaceMark) && message.find('\t') != std::string::npos) {
    s.place = message.substr(kPlaceMark.size(), message.find('\t') - kPlaceMark.size());
    message.erase(0, message.find('\t') + 1);
  }
  s.message = message;
  return s;
}

}  // namespace

TrialOracle::TrialOracle(const CaseConfig& config, const BatchStore& batch, Executor& executor,
                         std::string trial_binary, Log& log, Journal* journal, RunLimits limits, std::size_t jobs)
    : config_(config),
      batch_(batch),
      executor_(executor),
      trial_binary_(std::move(trial_binary)),
      log_(log),
      journal_(journal),
      limits_(limits),
      jobs_(std::max<std::size_t>(jobs, 1)),
      full_key_(selectionKey(fullSelection(batch))) {
  std::error_code ec;
  const std::uintmax_t batch_bytes = fs::file_size(config.batch, ec);
  full_below_ = (ec ? 0 : batch_bytes) + 1'000'000;  // a candidate batch and a megabyte for its output
  if (!journal_) return;
  journaled_ = journal_->loaded();
  trial_number_ = journal_->loadedTrials();  // a resumed run's trials are numbered after the earlier ones
  other_failures_ = journal_->loadedOtherFailures();
  if (!journal_->loadedReference().empty()) {
    reference_ = parseReference(journal_->loadedReference(), &first_failure_exit_);
  }
}

// A trial that failed while the work directory's file system is full
// failed because of it (a batch, a log or a library it could not
// write: a SIGABRT, an OSError), not because of its samples: the run stops
// and says so (#43.6), rather than keep it as another bug or tell the user
// that the original fails otherwise than the case says. "Full": less free
// than a candidate batch and a megabyte for its output.
void TrialOracle::failIfDiskFull(const TrialRecord& record) const {
  const std::optional<std::uintmax_t> free = availableBytes(config_.work_dir);
  if (free && *free < full_below_)
    throw DiskFullError(config_.work_dir,
                        "when trial " + std::to_string(record.number) + " failed (" + record.signature.summary() + ")",
                        "free some space there, or give another --work-dir");
}

TrialOracle::~TrialOracle() {
  std::error_code ec;
  if (original_stamp_) fs::remove(config_.work_dir / "original-batch.pt", ec);
}

fs::path TrialOracle::trialDir(std::size_t number) const {
  std::ostringstream name;
  name << "trial-" << std::setw(6) << std::setfill('0') << number;
  return config_.work_dir / "trials" / name.str();
}

std::optional<std::string> TrialOracle::brokenInvariant(const Selection& selection, const std::string& key) {
  if (auto it = invariant_checks_.find(key); it != invariant_checks_.end()) return it->second;
  if (original_tensors_.empty()) original_tensors_ = batch_.describe();
  return invariant_checks_[key] =
             minrepro::brokenInvariant(config_.invariants, original_tensors_, batch_.describeCandidate(selection));
}

// Diagnostic variables for trials; none for the confirmation, not even one
// the case's env or the parent's environment sets.
void TrialOracle::applyDiagnosticMode(TrialSpec& spec, bool confirmation) const {
  if (!confirmation) {
    for (const auto& [name, value] : diagnostic_env_) spec.env_set[name] = value;
    return;
  }
  removeDiagnosticVariables(spec);
}

// A fork server that holds the original builds a candidate from its
// selection (Executor::buildsBatch): then no file is written unless the
// trial falls back to a plain process. The original always runs from the
// user's bytes.
TrialSpec TrialOracle::prepare(const Selection& selection, std::size_t number, bool confirmation, bool fresh) {
  const fs::path dir = trialDir(number);
  TrialSpec spec = specIn(dir, selection, number, confirmation);
  spec.fresh_process = fresh || confirmation || fresh_only_;
  const bool original = selectionKey(selection) == full_key_;
  if (!original && executor_.buildsBatch(spec)) {
    fs::create_directories(dir);
    spec.batch_selection = selectionText(selection);
    candidate_files_[number] = {selection.samples.size(), 0};
    // The entry exists before the trials' threads start: assigning it
    // changes no node of the map.
    spec.write_batch = [this, dir, selection, &file = candidate_files_[number]] {
      file.bytes = writeTrialBatch(dir, selection);
    };
    return spec;
  }
  const std::uint64_t bytes = writeTrialBatch(dir, selection);
  if (!original) candidate_files_[number] = {selection.samples.size(), bytes};
  return spec;
}

TrialOutcome TrialOracle::runUncounted(const Selection& selection, const std::map<std::string, std::string>& env,
                                       const fs::path& dir) {
  writeTrialBatch(dir, selection);
  TrialSpec spec = specIn(dir, selection, 0, /*confirmation=*/true);
  for (const auto& [name, value] : env) spec.env_set[name] = value;
  spec.fresh_process = true;
  return executor_.run(spec);
}

namespace {

// What changes when a file is written to or replaced.
std::string fileStamp(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

// The original runs on the user's own bytes: a rewrite of them could differ
// in what no candidate check sees (views, storages, bytes). A copy, not the
// file itself: out of reach of a trial that writes to its input. Made once
// per run (work_dir/original-batch.pt) and hard-linked into each original
// trial's directory, at the same place as a candidate's (a message that
// names the batch's path reads the same), so a batch of gigabytes is not
// copied per run; a trial that wrote to it changed its stamp, and the copy
// is made again.
fs::path TrialOracle::linkOriginal(const fs::path& batch_file) {
  const fs::path copy = config_.work_dir / "original-batch.pt";
  if (!original_stamp_ || fileStamp(copy) != *original_stamp_) {
    std::error_code gone;
    fs::remove(copy, gone);  // a fresh file: the trials' links to the old one are not written through
    fs::copy_file(config_.batch, copy, fs::copy_options::overwrite_existing);
    original_stamp_ = fileStamp(copy);
  }
  std::error_code ec;
  fs::remove(batch_file, ec);
  fs::create_hard_link(copy, batch_file, ec);
  if (ec) fs::copy_file(copy, batch_file, fs::copy_options::overwrite_existing);  // a file system without links
  return batch_file;
}

// The trial's batch.pt in `dir`: the candidate, streamed from the original;
// returns its bytes (0 for the original's link). Thread-safe: a fork server
// falling back to a plain process calls it from the trial's thread.
std::uint64_t TrialOracle::writeTrialBatch(const fs::path& dir, const Selection& selection) {
  std::lock_guard lock(write_mutex_);
  const fs::path batch_file = dir / "batch.pt";
  fs::create_directories(dir);
  if (selectionKey(selection) == full_key_) {
    linkOriginal(batch_file);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t bytes = batch_.writeCandidate(selection, batch_file);
  stats_.bytes_written += bytes;
  stats_.last_candidate_bytes = bytes;
  stats_.write_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return bytes;
}

TrialSpec TrialOracle::specIn(const fs::path& dir, const Selection& selection, std::size_t number,
                              bool confirmation) const {
  const fs::path batch_file = dir / "batch.pt";
  TrialSpec spec = trialSpecFor(config_, trial_binary_, {batch_file, dir, selection.branches_off, number});
  if (config_.harness) spec.batch_case = config_.case_file;
  applyDiagnosticMode(spec, confirmation);
  spec.cancel = limits_.stop;
  return spec;
}

TrialRecord TrialOracle::run(const Selection& selection) {
  return runLive({selection}, {kSinglePrefix + selectionKey(selection)}).front();
}

void TrialOracle::checkLimits(std::size_t about_to_run) const {
  if (limits_.stop && limits_.stop->load()) throw RunStopped(RunStopped::Reason::Interrupted, "interrupted");
  const std::size_t total = stats_.trials + stats_.replayed;
  if (limits_.max_trials && total + about_to_run > limits_.max_trials)
    throw RunStopped(RunStopped::Reason::TrialBudget,
                     "the trial budget (--max-trials " + std::to_string(limits_.max_trials) + ") is spent");
  const bool clock_runs = !limits_.seconds_from_search || search_from_ >= 0;
  const double spent = log_.elapsedSeconds() - (limits_.seconds_from_search ? search_from_ : 0);
  if (limits_.max_seconds > 0 && clock_runs && spent >= limits_.max_seconds)
    throw RunStopped(RunStopped::Reason::TimeBudget, "the time budget (--max-time) is spent");
}

// Runs the selections at once (one thread each waits on its process) and
// finishes them in launch order, so numbering and the journal do not depend
// on which process ended first.
std::vector<TrialRecord> TrialOracle::runLive(const std::vector<Selection>& selections,
                                              const std::vector<std::string>& keys) {
  checkLimits(selections.size());
  ++stats_.rounds;
  std::vector<TrialSpec> specs;
  std::vector<TrialRecord> records(selections.size());
  // The record holds what matters: the trials' directories go however the
  // round ends (a full disk, a stop: probe 23's run left 20 MB of outputs
  // on the full file system it had just said was full).
  struct RemoveTrialDirs {
    const TrialOracle& oracle;
    const std::vector<TrialRecord>& records;
    ~RemoveTrialDirs() {
      std::error_code ec;
      for (const TrialRecord& r : records)
        if (r.number > 0) fs::remove_all(oracle.trialDir(r.number), ec);
    }
  } remove_trial_dirs{*this, records};
  for (std::size_t i = 0; i < selections.size(); ++i) {
    records[i].number = ++trial_number_;
    specs.push_back(prepare(selections[i], records[i].number, keys[i].starts_with(kConfirmPrefix),
                            keys[i].starts_with(kFreshPrefix)));
  }
  if (specs.size() == 1) {
    records[0].outcome = executor_.run(specs[0]);
  } else {
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < specs.size(); ++i)
      threads.emplace_back([&, i] { records[i].outcome = executor_.run(specs[i]); });
    for (auto& t : threads) t.join();
  }
  double longest = 0;
  for (const auto& r : records) longest = std::max(longest, std::chrono::duration<double>(r.outcome.duration).count());
  stats_.round_trial_seconds += longest;
  if (limits_.stop && limits_.stop->load()) throw RunStopped(RunStopped::Reason::Interrupted, "interrupted");
  if (on_round_) on_round_();
  for (std::size_t i = 0; i < records.size(); ++i) {
    records[i] = finishTrial(std::move(records[i]), keys[i]);
    if (records[i].used) mark(selections[i], records[i].mark, &records[i]);
  }
  return records;
}

void TrialOracle::mark(const Selection& selection, MarkOutcome outcome, const TrialRecord* record) {
  if (!timeline_) return;
  TrialMark m;
  m.number = record ? record->number : 0;
  m.seconds = log_.elapsedSeconds();
  m.duration = record ? std::chrono::duration<double>(record->outcome.duration).count() : 0;
  m.samples = static_cast<std::int64_t>(selection.samples.size());
  m.size = measureSize(selection, batch_).product();
  m.outcome = outcome;
  timeline_->add(m);
}

// "(candidate of 500000 samples, 136 MB, 1.2 s)": what the trial cost, for the log.
std::string TrialOracle::trialCost(const TrialRecord& record) {
  std::ostringstream text;
  text << " (";
  if (auto it = candidate_files_.find(record.number); it != candidate_files_.end()) {
    text << "candidate of " << it->second.samples << " sample" << (it->second.samples == 1 ? "" : "s")
         << (it->second.bytes > 0 ? ", " + formatMegabytes(it->second.bytes) : " cut in the fork server") << ", ";
    candidate_files_.erase(it);
  }
  text << std::fixed << std::setprecision(1) << std::chrono::duration<double>(record.outcome.duration).count() << " s)";
  return text.str();
}

TrialRecord TrialOracle::finishTrial(TrialRecord record, const std::string& key) {
  const std::string cost = trialCost(record);
  // A trial that cannot start says nothing about the candidate: stop rather
  // than count it as a pass and keep samples for the wrong reason.
  if (record.outcome.end == TrialEnd::FailedToStart)
    throw TrialStartError("trial " + std::to_string(record.number) + " could not start: " + record.outcome.start_error);
  ++stats_.trials;
  stats_.last_trial_seconds = std::chrono::duration<double>(record.outcome.duration).count();
  stats_.trial_seconds += stats_.last_trial_seconds;
  record.signature = classifyAs(record.outcome, config_.expected);
  const FailureSignature& sig = record.signature;
  if (sig.failed()) failIfDiskFull(record);  // before it can become the reference or count as another bug
  const bool of_original = key.starts_with(kOriginalPrefix) || key.starts_with(kSinglePrefix);
  // A timeout is the failure only of a case declared a hang (failure.family:
  // timeout); otherwise it is an outcome of its own, never the reference.
  const bool hang = config_.expected.family == FailureFamily::Timeout;
  const bool own_timeout = sig.family == FailureFamily::Timeout && !hang;
  if (!reference_.failed() && of_original && sig.failed() && !own_timeout &&
      matchSignature(sig, sig, config_.expected).matches) {
    reference_ = sig;  // the first failure of the original
    first_failure_exit_ = describe(record.outcome);
    if (journal_) journal_->recordReference(serializeReference(sig, first_failure_exit_));
  }
  if (!reference_.failed() && !of_original) {
    // Run ahead beside an original that has not failed yet: with no
    // reference its outcome means nothing, and is not kept (if asked, it
    // runs again); nor can a smaller case's failure become the reference.
    log_.detail("trial " + std::to_string(record.number) + ": run ahead before the original failed; not used");
    record.used = false;
    return record;
  }
  const SignatureMatch match = matchSignature(reference_, sig, config_.expected);
  const bool matched = reference_.failed() && match.matches;
  if (matched)
    ++stats_.same_failure;
  else if (!sig.failed())
    ++stats_.passed;
  else {
    ++stats_.different_failure;
    if (sig.family == FailureFamily::Timeout) ++stats_.timeouts;
    // The same words raised elsewhere are told apart by where.
    const std::string where = match.why_not.starts_with("raised at ") ? " (" + match.why_not + ")" : "";
    FailureSignature shape = sig;
    shape.message = messageShape(sig.message);
    auto& [other, messages] =
        other_bug_shapes_.try_emplace(shape.summary() + where, sig.summary() + where, std::set<std::string>{})
            .first->second;
    if (!own_timeout && messages.insert(sig.message).second) stats_.other_bug_variants[other] = messages.size();
    if (!own_timeout && stats_.other_bugs[other]++ == 0)
      log_.info("trial " + std::to_string(record.number) +
                " found a different failure (kept apart, not accepted): " + other);
  }
  results_[key].push_back(matched);
  noteForDeterminism(key.substr(key.find_last_of(':') + 1), matched, !sig.failed());
  if (!matched && sig.failed() && sig.family != FailureFamily::Timeout) ++other_failures_[key];
  if (!matched && sig.failed())
    last_other_[key] = sig;
  else
    last_other_.erase(key);
  if (matched) last_matched_[key] = sig;
  if (journal_) journal_->recordTrial({key, matched, sig.failed() ? familyName(sig.family) : "pass"});
  const std::string verdict = matched        ? "fails the same way"
                              : own_timeout  ? "times out: an outcome of its own, not the failure (the case's "
                                               "failure is not a hang)"
                              : sig.failed() ? "fails differently: " + sig.summary()
                                             : "passes";
  log_.detail("trial " + std::to_string(record.number) + ": " + verdict + cost);
  record.mark = matched                                ? MarkOutcome::Same
                : sig.family == FailureFamily::Timeout ? MarkOutcome::TimedOut
                : sig.failed()                         ? MarkOutcome::Different
                                                       : MarkOutcome::Passed;
  return record;
}

// Selection keys hold no ':' (reducers/selection_text); result keys prefix
// them with what ran them ("fresh:", "confirm:", "original:").
void TrialOracle::noteForDeterminism(const std::string& selection_key, bool matched, bool passed) {
  if (!config_.flaky.enabled || !rate_.deterministic() || (!matched && !passed)) return;
  if (estimating_original_ && selection_key == full_key_) return;  // estimateOriginal says it with its counts
  auto& [failed_once, passed_once] = seen_answers_[selection_key];
  (matched ? failed_once : passed_once) = true;
  if (failed_once && passed_once)
    rate_.contradict(selection_key == full_key_ ? "the original passed once after failing the same way"
                                                : "a candidate failed the same way in one run and passed in another");
}

bool TrialOracle::matches(const FailureSignature& signature) const {
  return reference_.failed() && matchSignature(reference_, signature, config_.expected).matches;
}

// The next `count` results of a candidate: earlier results of the same
// candidate first, then the journal's, then live trials. Free job slots get
// up to `spare` more trials of it, then speculative trials of the
// candidates asked next.
std::vector<bool> TrialOracle::resultsFor(const Selection& selection, const std::string& key, std::size_t count,
                                          std::size_t spare, std::size_t& cursor, std::size_t preexisting,
                                          const Speculation& next) {
  std::vector<bool> out;
  while (out.size() < count) {
    auto& known = results_[key];
    if (cursor < known.size()) {
      if (cursor < preexisting) {
        ++stats_.reused;
        mark(selection, MarkOutcome::Cached, nullptr);
      }
      out.push_back(known[cursor++]);
      continue;
    }
    if (auto it = journaled_.find(key); it != journaled_.end() && !it->second.empty()) {
      known.push_back(it->second.front());
      it->second.erase(it->second.begin());
      ++stats_.replayed;
      mark(selection, MarkOutcome::Cached, nullptr);
      continue;
    }
    // Never more at once than --jobs: runs asked for together (the
    // original's plain runs, a flaky candidate's streak) go in rounds.
    const std::size_t jobs = activeJobs();
    const std::size_t launch = std::min(count - out.size(), jobs);
    const std::size_t extra = jobs > launch ? std::min(spare, jobs - launch) : 0;
    std::vector<Selection> batch(launch + extra, selection);
    std::vector<std::string> keys(batch.size(), key);
    if (next && jobs > batch.size()) {
      // A longer chain than the free slots: candidates already run are skipped.
      for (const Speculated& s : next(2 * jobs + 4, cursor == 0)) {
        if (batch.size() >= jobs) break;
        const std::string plain = selectionKey(s.selection);
        const std::string k = s.confirmation ? kConfirmPrefix + plain : candidateKey(s.selection);
        if (results_.count(k) || journaled_.count(k) || brokenInvariant(s.selection, plain)) continue;
        batch.push_back(s.selection);
        keys.push_back(k);
        ++stats_.speculative;
      }
    }
    runLive(batch, keys);
  }
  return out;
}

// Plain-process results are kept apart from forked ones of the same candidate.
std::string TrialOracle::candidateKey(const Selection& selection) const {
  return (fresh_only_ ? kFreshPrefix : "") + selectionKey(selection);
}

bool TrialOracle::interesting(const Selection& selection, const Speculation& next, bool recheck) {
  const std::string key = candidateKey(selection);
  ++stats_.candidates;
  if (auto why = brokenInvariant(selection, key)) {
    ++stats_.rejected_by_invariant;
    log_.detail("candidate rejected without a trial: " + *why);
    return false;
  }
  std::size_t cursor = 0;
  const std::size_t preexisting = results_[key].size();
  const CandidateDecision decision = decideCandidate(
      [&](std::size_t count, std::size_t spare) {
        return resultsFor(selection, key, count, spare, cursor, preexisting, next);
      },
      rate_, config_.flaky, jobs_, selection.samples.size(), recheck);
  bool accepted = decision.interesting;
  if (accepted && other_failures_[key] == 0 && (othersSeen() || otherFailureAbove(selection)))
    accepted = showsNoOtherFailure(selection, key, cursor);
  if (other_failures_[key] > 0 && config_.flaky.enabled && other_above_.size() < 64)
    other_above_.push_back(selection.samples);
  if (accepted && other_failures_[key] > 0) {
    accepted = false;
    ++stats_.slipped;
    log_.info("candidate of " + std::to_string(selection.samples.size()) +
              " samples rejected: besides the recorded "
              "failure, " +
              std::to_string(other_failures_[key]) +
              " of its runs failed another way (a second bug "
              "it would slip to)");
  }
  if (accepted) {
    if (journal_) journal_->recordAccepted(key, selection.samples.size(), selectionText(selection));
    if (on_better_) on_better_(selection);
  }
  const auto other = last_other_.find(key);
  if (config_.flaky.enabled && rate_.deterministic() && (accepted || other == last_other_.end()))
    if (auto why = monotonicity_.add(selection, accepted)) rate_.contradict(*why);
  const FailureSignature last = other == last_other_.end() ? FailureSignature{} : other->second;
  if (auto stop = other_watch_.add(accepted, last, stats_.trials + stats_.replayed, log_.elapsedSeconds()))
    throw DoesNotReproduceError(wrongCaseMessage("stopping: " + *stop, last, batch_));
  return accepted;
}

// A candidate with more samples than `selection`, all of its among them,
// failed another way: a deterministic failure is monotone (a superset of a
// failing case fails the recorded way too), so the recorded failure of the
// smaller one is worth as many runs as othersSeen() would ask (a flaky step
// whose smaller batches fail a second way in most runs). A deterministic
// step that fails another way only on smaller batches (BatchNorm on one
// sample) never pays this: its other failures lie below, not above.
bool TrialOracle::otherFailureAbove(const Selection& selection) const {
  for (const std::vector<std::int64_t>& above : other_above_)
    if (above.size() > selection.samples.size() &&
        std::includes(above.begin(), above.end(), selection.samples.begin(), selection.samples.end()))
      return true;
  return false;
}

bool TrialOracle::othersSeen() const {
  return config_.flaky.enabled && !rate_.deterministic() && stats_.different_failure > stats_.timeouts;
}

// A flaky search that has met another failure accepts a candidate only once
// runs of it as many as a flaky self-check would make show no other failure
// (the runs it already had count): a case that fails the recorded way once
// and another way in most runs has slipped to a second bug.
bool TrialOracle::showsNoOtherFailure(const Selection& selection, const std::string& key, std::size_t& cursor) {
  constexpr std::size_t kMostRuns = 30;
  const std::size_t wanted = std::clamp<std::size_t>(
      rate_.passesToReject(config_.flaky.alpha, config_.flaky.max_passes, selection.samples.size()), 3, kMostRuns);
  const std::size_t had = results_[key].size();
  if (had < wanted) resultsFor(selection, key, wanted - had, 0, cursor, 0, {});
  if (other_failures_[key] == 0) return true;
  log_.detail("candidate of " + std::to_string(selection.samples.size()) +
              " samples: " + std::to_string(other_failures_[key]) + " of " + std::to_string(results_[key].size()) +
              " runs failed another way");
  return true;  // the caller rejects it as slipped
}

std::optional<FailureSignature> TrialOracle::otherFailureOf(const Selection& selection) const {
  const auto it = last_other_.find(candidateKey(selection));
  if (it == last_other_.end()) return std::nullopt;
  return it->second;
}

std::optional<FailureSignature> TrialOracle::ownFailureOf(const Selection& selection) const {
  const std::string plain = selectionKey(selection);
  for (const std::string& key : {kConfirmPrefix + plain, kFreshPrefix + plain, plain})
    if (const auto it = last_matched_.find(key); it != last_matched_.end()) return it->second;
  return std::nullopt;
}

OriginalEstimate TrialOracle::estimateOriginal(const Selection& all, const Speculation& next) {
  const std::string key = kOriginalPrefix + selectionKey(all);
  std::size_t cursor = 0;
  FailureRate seen;
  estimating_original_ = true;
  // The rate of the original is estimated with matches against the first
  // failure, which becomes the reference as soon as it is seen.
  // A run that timed out before any failed ends the estimate: more runs
  // would each cost a whole timeout to say the same (shrink explains it).
  const bool hang = config_.expected.family == FailureFamily::Timeout;
  bool timed_out = false;
  const OriginalEstimate estimate = minrepro::estimateOriginal(
      [&](std::size_t count, std::size_t spare) {
        if (timed_out) return std::vector<bool>{};
        const std::size_t before = stats_.timeouts;
        auto results = resultsFor(all, key, count, spare, cursor, 0, next);
        timed_out = !hang && !reference_.failed() && stats_.timeouts > before;
        return results;
      },
      seen, config_.flaky, activeJobs());
  estimating_original_ = false;
  if (!seen.deterministic()) rate_.contradict(seen.contradiction());
  rate_.add(seen.failures(), seen.passes(), all.samples.size());
  if (estimate.failures > 0) monotonicity_.add(all, true);
  return estimate;
}

std::future<std::vector<TrialRecord>> TrialOracle::startFreshOriginals(const Selection& all, std::size_t runs) {
  checkLimits(runs);
  std::vector<TrialRecord> records(runs);
  std::vector<TrialSpec> specs;
  for (TrialRecord& record : records) {
    record.number = ++trial_number_;
    specs.push_back(prepare(all, record.number, false, true));
  }
  return std::async(std::launch::async, [this, specs = std::move(specs), records = std::move(records)]() mutable {
    for (std::size_t i = 0; i < records.size(); ++i) records[i].outcome = executor_.run(specs[i]);
    return std::move(records);
  });
}

void TrialOracle::finishFreshOriginals(const Selection& all, std::vector<TrialRecord> records) {
  if (limits_.stop && limits_.stop->load()) throw RunStopped(RunStopped::Reason::Interrupted, "interrupted");
  // No round of their own: they ran beside the forked runs' rounds.
  const std::string key = kFreshPrefix + kOriginalPrefix + selectionKey(all);
  for (TrialRecord& record : records) {
    record = finishTrial(std::move(record), key);
    if (record.used) mark(all, record.mark, &record);
    std::error_code ec;
    fs::remove_all(trialDir(record.number), ec);
  }
}

void TrialOracle::rateFromFreshOriginalOnly(const Selection& all) {
  const auto known = results_.find(kFreshPrefix + kOriginalPrefix + selectionKey(all));
  std::size_t failures = 0, runs = 0;
  if (known != results_.end())
    for (bool failed : known->second) ++runs, failures += failed ? 1 : 0;
  rate_ = FailureRate{};
  seen_answers_.clear();
  monotonicity_ = decltype(monotonicity_){&TrialOracle::keepsAll};
  if (failures > 0 && failures < runs)
    rate_.contradict("the original passed in " + std::to_string(runs - failures) + " of " + std::to_string(runs) +
                     " plain runs");
  rate_.add(failures, runs - failures, all.samples.size());
  if (failures > 0) monotonicity_.add(all, true);
}

std::size_t TrialOracle::freshOriginalRuns(const Selection& all) const {
  const auto known = results_.find(kFreshPrefix + kOriginalPrefix + selectionKey(all));
  return known == results_.end() ? 0 : known->second.size();
}

OriginalEstimate TrialOracle::runOriginalFresh(const Selection& all, std::size_t runs) {
  const std::string key = kFreshPrefix + kOriginalPrefix + selectionKey(all);
  std::size_t cursor = 0;
  OriginalEstimate estimate;
  for (bool failed : resultsFor(all, key, runs, 0, cursor, 0, {})) {
    ++estimate.runs;
    estimate.failures += failed;
  }
  return estimate;
}

bool TrialOracle::confirm(const Selection& selection) {
  // Results of a speculative confirmation run (resultsFor) come first.
  const std::string key = kConfirmPrefix + selectionKey(selection);
  std::size_t cursor = 0;
  FailureRate copy = rate_;
  auto runs = [&](std::size_t count, std::size_t spare) {
    return resultsFor(selection, key, count, spare, cursor, 0, {});
  };
  return decideCandidate(runs, copy, config_.flaky, jobs_, selection.samples.size()).interesting &&
         other_failures_[key] == 0;
}

}  // namespace minrepro
