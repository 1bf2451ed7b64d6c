// shrink checks its own archive before it says it is done.
//
// An archive that does not reproduce on its own is worse than none: the
// maintainer who receives it sees a pass, or another error, and the bug is
// closed as "cannot reproduce". So the archive just written is extracted
// into an empty directory outside the case and work directories (as
// `minrepro verify` does) and repro.py is run K times as plain processes in
// the normal configuration (no diagnostic variables, no fork server), each
// outcome compared with the failure signature.txt records. A failure that
// was deterministic in the trials must reproduce in every run; a flaky one
// in at least one of K runs, K chosen from its rate so that a faithful
// archive fails at least once with probability 1 - alpha.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/flaky.h"
#include "core/process/job_slots.h"

namespace minrepro {

struct SelfCheck {
  bool ran = false;                                 // false: not checked, see skipped
  std::string skipped = "the run was interrupted";  // why it did not run
  int runs = 0;
  int reproduced = 0;
  int op_runs = 0;         // runs of op/repro_op.py (engine/op_step/op_step.h): 1, none for a flaky call
  int op_reproduced = 0;   // of those, failed like the case (operator aside)
  int other_failures = 0;  // runs of either that failed another way: never accepted, even for a flaky case
  bool require_every_run = true;
  std::string first_difference;  // the first run that did not reproduce, in one line
  std::string missing_file;      // a file that run's output says it could not find
  std::string error;             // the check itself could not run (bad archive, no Python, no torch)
  // What of this shell the runs did not get, as a maintainer would not have
  // it: "PYTHONPATH's /home/u/lib", "MY_FLAG". Named when a run did not reproduce.
  std::vector<std::string> not_given;
  // Files of the case (a bundled file's original, the user's batch) that a
  // run read at their place on this machine, by an absolute path the
  // archive cannot redirect: a maintainer has none of them. Any fails the check.
  std::vector<std::string> originals_read;
  // Paths at the case's places (SelfCheckWatch) that a run only looked at
  // (stat'ed, listed) or read without the archive carrying them.
  std::vector<std::string> places_touched;
  bool output_names_not_given = false;  // the first differing run's output names one of not_given

  // The runs did not reproduce for want of what the archive does not carry
  // (a file read where it lies, a missing file, a variable its output
  // names): no sign that the minimal case itself fails only in the trials.
  // Why it failed, in words without paths (signature.txt's not-alone:).
  std::string failedWhy() const;
  bool lostToWhatTheArchiveLacks() const { return touchedTheCase() || !missing_file.empty() || output_names_not_given; }
  bool touchedTheCase() const { return !originals_read.empty() || !places_touched.empty(); }
  // false: a failure so rare that the runs allowed (30) could miss it on a
  // faithful archive; none failing is then no verdict.
  bool conclusive = true;

  bool passed() const;
  // Ran, and showed that the archive does not reproduce on its own (exit 6).
  bool failed() const;
  // "reproduced on its own in 3 of 3 runs (plain processes, extracted into an empty directory)"
  std::string describe() const;
};

struct SelfCheckPlan {
  int runs = 3;
  bool require_every_run = true;
  bool conclusive = true;
  // A flaky failure's runs stop at the first that fails alike (the op step's
  // first check of a call: it only decides whether to go on).
  bool enough_after_one = false;
};

// Runs and rule for a case of `size` samples whose trials failed at `rate`
// and whose original passed `plain_passes` times as a plain process: every
// run must fail when flakiness handling is off or nothing ever passed.
SelfCheckPlan planSelfCheck(const FailureRate& rate, const FlakyOptions& flaky, std::size_t plain_passes,
                            std::size_t size);

// Where and how many at once the self-check's runs go: at most `bound`'s
// size (null: one at a time), each holding one of `slots` too when given
// (shared with the op step).
struct SelfCheckSlots {
  JobSlots* bound = nullptr;
  JobSlots* slots = nullptr;
};

// What the self-check watches its runs read: with the file tracer
// (engine/archive/bundle.h), whether they open any of `originals` (the
// bundled files' sources, the user's batch) where they lie on this machine,
// or open, stat or list anything at `places` (the directories that hold
// them) but under `environment` (the Python's own directories: a venv in
// the case's directory). A step that asks whether the user's flag file
// exists, or lists the user's directory, fails on a maintainer's machine as
// surely as one that reads a file there.
struct SelfCheckWatch {
  std::string trace_library;  // "": not watched
  std::vector<std::filesystem::path> originals;
  std::vector<std::filesystem::path> places;
  std::vector<std::filesystem::path> environment;
};

// The watch for an archive made from `originals` and run by `python`:
// their directories are the places, but one that also holds what any run
// looks at (the root, the home directory, a temporary directory) is
// watched only at the originals themselves.
SelfCheckWatch watchTheCase(std::string trace_library, const std::vector<std::filesystem::path>& originals,
                            const std::string& python);

// Extracts `archive` into a fresh temporary directory and runs its repro.py
// `plan.runs` times with `python`, stopping when `cancel` is set; never
// throws. op/repro_op.py is not run: the op step, beside it, runs it alone.
// `env`: variables the runs get, as the maintainer would set them (the
// values of trial.env that the archive leaves out as secrets). What the
// archive does not carry they do not get from this process: of its
// environment only what any machine's has (PATH, HOME, locale, temporary
// directory, the GPU's and the math libraries' settings, the Python
// environment in use), without the user's own PYTHONPATH directories
// (repro.py sets PYTHONPATH to the archive's copies; directories of
// installed packages and of torch stay). `watch`: see SelfCheckWatch.
SelfCheck checkArchiveAlone(const std::filesystem::path& archive, const SelfCheckPlan& plan, const std::string& python,
                            std::chrono::milliseconds timeout, const std::atomic<bool>* cancel = nullptr,
                            SelfCheckSlots slots = {}, const std::map<std::string, std::string>& env = {},
                            const SelfCheckWatch& watch = {});

// The path a run's output says it could not open ("" when none): Python's
// FileNotFoundError, torch.jit.load's and torch.load's messages.
std::string missingFileIn(const std::string& output);

// Whether a run of an archive gets this variable of minrepro's environment:
// one any machine has (the locale, PATH, the GPU's settings) that names no
// secret. The self-check's runs and the sandboxed runs of an archive made
// elsewhere (verify, compare, regress) get only those: a stranger's code
// sees no token of the user's shell.
bool inheritedByArchiveRuns(const std::string& name);

}  // namespace minrepro
