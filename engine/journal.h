// The run's journal: every trial outcome and every accepted state, appended
// and synced to <work_dir>/journal.txt as it happens, so that a run killed at
// any moment (kill -9 included) can resume without repeating finished trials.
//
// Resume replays: the search is deterministic given trial results, so a
// resumed run asks for the same candidates in the same order and gets the
// journaled results back, until the journal runs out and live trials take over.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/content_hash.h"
#include "core/errors.h"

namespace minrepro {

struct JournalTrial {
  std::string candidate;  // content hash of the candidate
  bool matched = false;   // failed the same way as the original
  std::string summary;    // signature summary or "pass"
};

// One run per work directory: a second shrink on the same one would move
// the first's journal aside and both would append to it and to the log.
// Held for the run's life as an flock on <dir>/lock, which names the
// holder's pid; the kernel drops it when the process ends, even by SIGKILL,
// so a killed run leaves nothing to clean up before --resume.
class WorkDirLock {
 public:
  // Throws BadInputError (exit 2) naming the process that holds it.
  explicit WorkDirLock(const std::filesystem::path& dir);
  ~WorkDirLock();
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;

 private:
  int fd_ = -1;
};

class Journal {
 public:
  // Opens <dir>/journal.txt. Without resume an existing journal is moved
  // aside (journal.txt.old); with resume its trials are loaded for replay and
  // its identity line must equal `identity` (same case, same settings).
  Journal(const std::filesystem::path& dir, const std::string& identity, bool resume);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void recordTrial(const JournalTrial& trial);
  // An accepted candidate and what it keeps (reducers/selection_text.h):
  // the best case so far can be written from the journal alone.
  void recordAccepted(const std::string& candidate, std::size_t samples, const std::string& selection);
  // The original's failure, as one line of text (see TrialOracle).
  void recordReference(const std::string& text);
  const std::string& loadedReference() const { return loaded_reference_; }

  // Journaled trial results of a candidate, in the order they were run.
  const std::map<std::string, std::vector<bool>>& loaded() const { return loaded_; }
  // Per candidate, the loaded trials that failed another way (not a pass, not a timeout).
  const std::map<std::string, std::size_t>& loadedOtherFailures() const { return loaded_other_; }
  std::size_t loadedTrials() const { return loaded_trials_; }
  // Whether an earlier run's journal was moved aside (a run without resume
  // in a work directory that had one): said in the log, so that starting
  // over is never silent.
  bool movedEarlierAside() const { return moved_earlier_aside_; }

  // The selection text of the last candidate accepted in <dir>/journal.txt,
  // read without opening it for a run; nullopt when none was accepted.
  // Throws BadInputError when there is no journal or it is another case's.
  static std::optional<std::string> lastAccepted(const std::filesystem::path& dir, const std::string& identity);

 private:
  void append(const std::string& line);
  void load(const std::filesystem::path& file, const std::string& identity);

  int fd_ = -1;
  std::map<std::string, std::vector<bool>> loaded_;
  std::map<std::string, std::size_t> loaded_other_;
  std::size_t loaded_trials_ = 0;
  std::string loaded_reference_;
  bool moved_earlier_aside_ = false;
};

}  // namespace minrepro
