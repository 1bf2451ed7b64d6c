// How a minrepro command ends. Every error the library throws is one of the
// types below, one per exit status, and commands/run_command.h maps
// them to the status in one place: a new error needs no new catch anywhere.
#pragma once

#include <stdexcept>
#include <string>

namespace minrepro {

// The exit statuses of every command (docs/guide.md, "Exit status").
enum class ExitStatus : int {
  Reduced = 0,                  // archive written (verify, regress, compare: everything as expected)
  InternalError = 1,            // a bug of minrepro's: please report; also "not as expected" for verify/regress/triage
  BadInput = 2,                 // case.yaml, batch, archive, options or paths wrong: nothing (more) was run
  DoesNotReproduce = 3,         // the original does not fail (or not as expected)
  TrialsCannotStart = 4,        // the trial program could not be started, or a file system is full
  BudgetSpent = 5,              // --max-trials or --max-time ended the run; archive of the best so far written
  ArchiveDoesNotReproduce = 6,  // archive written, but repro.py did not fail the same way on its own
  Interrupted = 130,            // SIGINT, SIGTERM or SIGHUP; archive of the best so far written when there was one
};

// The base of every error a command may end with; `what()` is printed as is
// after "minrepro COMMAND: error: ", so it says what is wrong, where, and
// what to do.
class Error : public std::runtime_error {
 public:
  Error(ExitStatus status, const std::string& what) : std::runtime_error(what), status_(status) {}
  ExitStatus status() const { return status_; }

 private:
  ExitStatus status_;
};

// Bad input from the user (exit 2): a case file, batch, archive, journal,
// option or path that cannot be used. The message names the file and, where
// there is one, the key, line and column.
class BadInputError : public Error {
 public:
  explicit BadInputError(const std::string& what) : Error(ExitStatus::BadInput, what) {}
};

// The original case does not fail, or not the way case.yaml expects (exit 3).
class DoesNotReproduceError : public Error {
 public:
  explicit DoesNotReproduceError(const std::string& what) : Error(ExitStatus::DoesNotReproduce, what) {}
};

// A trial could not be started (missing program, no permission, no Slurm):
// the run stops (exit 4).
class TrialStartError : public Error {
 public:
  explicit TrialStartError(const std::string& what) : Error(ExitStatus::TrialsCannotStart, what) {}
};

// The run must stop before its natural end (exit 5 for a budget, 130 for a
// signal). Shrink catches it to write the best case so far; anywhere else it
// ends the command with its status.
class RunStopped : public Error {
 public:
  enum class Reason { Interrupted, TrialBudget, TimeBudget };
  RunStopped(Reason reason, const std::string& what)
      : Error(reason == Reason::Interrupted ? ExitStatus::Interrupted : ExitStatus::BudgetSpent, what),
        reason(reason) {}
  Reason reason;
};

}  // namespace minrepro
