// The work directory of a run: checked and made before the first trial,
// cleaned of what a run killed with SIGKILL left, the identity --resume
// compares, and best/ (the best case so far, always valid on disk),
// written at the run's end, on SIGUSR1 and by --materialize-best.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "core/errors.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

// What would otherwise fail only after the whole reduction: a work
// directory that is a file, a batch or model inside the work directory
// (which a run clears), a model that does not load (exit 2).
void checkWorkDirAndModel(const CaseConfig& config);

// The work directory made when missing, or taken when it is one: empty,
// marked as minrepro's (.minrepro-work, written here), or left by an
// earlier run (its lock file). A directory that holds
// anything else (`--work-dir .` in a project) is BadInputError (exit 2),
// naming what it holds: a run clears and rewrites trials/, best/,
// case.yaml, its log, journal and reports there. So is one that cannot be
// made or written (a read-only place, a path under a file).
void claimWorkDir(const std::filesystem::path& work_dir);

// claimWorkDir, and writable, else BadInputError naming work_dir.
void makeWorkDir(const std::filesystem::path& work_dir);

// Too little free space where the trials or the archive go: DiskFullError
// (exit 4) naming the place, before the first trial.
void checkRoomForTheRun(const CaseConfig& config, std::size_t jobs);

// What a killed run left half-written: best/'s and the work directory's
// temporary files, and the archive's "OUTPUT.PID.N.partial" of a process
// that is gone. Returns how many were removed.
std::size_t removeStalePartials(const CaseConfig& config);

// Ends what a run killed with SIGKILL left (its trials' escaped
// descendants, its trial directories); returns the processes it killed.
std::size_t cleanUpAfterKilledRun(const std::filesystem::path& work_dir);

// Removes the symbolic links and the second names of other files found in
// the work directory and the directories in it (not the lock, which handles
// its own; not the compile caches):
// minrepro makes none there, and writing its files would write through them
// into the user's. Run once the lock is held. Returns how many it removed.
std::size_t removePlantedLinks(const std::filesystem::path& work_dir);

// What identifies a run for --resume.
std::string runIdentity(const CaseConfig& config);

// work_dir/best/ for `best`; returns its batch file.
std::filesystem::path writeBestSoFar(const CaseConfig& config, const BatchStore& batch, const Selection& best);

// The command that goes on from an interrupted or budget-bound run: the
// same case and work directory with --resume (its trials replayed from
// the journal, not run again).
// A zero-config start (the directory it was typed in and its command after
// --) repeats its --batch command. `options`: the run's other options as
// typed (--no-op-repro, --jobs 4), which the resumed run repeats.
std::string resumeCommand(const CaseConfig& config, const std::filesystem::path& start_dir = {},
                          const std::vector<std::string>& start_command = {},
                          const std::vector<std::string>& options = {});

// resumeCommand and what it does, as a stopped run's last line says it:
// "to go on from here (the trials so far are replayed, not run again):
// COMMAND", the command last, so that the line's end is what to paste.
std::string goOnLine(const CaseConfig& config, const std::filesystem::path& start_dir = {},
                     const std::vector<std::string>& start_command = {}, const std::vector<std::string>& options = {});

// --materialize-best: best/ from the journal of a run that is not running.
ExitStatus materializeBest(const CaseConfig& config, bool quiet);

}  // namespace minrepro
