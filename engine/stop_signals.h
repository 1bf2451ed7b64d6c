// The signals a run answers: SIGINT, SIGTERM and SIGHUP (the terminal of
// an overnight run went away) stop launching trials, end the running ones
// and write the best case so far; SIGUSR1 writes the best case so far and
// goes on; SIGPIPE (stdout or stderr closed under us: `| tee` gone) must
// not end the run. Kept apart from the conductor (engine/shrink.cc): the
// handlers only set flags, which the run reads between rounds.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <csignal>

#include "core/stop_asked.h"  // set by SIGINT, SIGTERM and SIGHUP; the oracle and the archive step read it

namespace minrepro {

// Whether SIGUSR1 came since the last call (and clears it).
bool takeBestAsked();

// Until a command installs its own (below): SIGINT, SIGTERM and SIGHUP end
// minrepro at once with the documented status 130, as they would by their
// default action but for the status (143 for SIGTERM, which reads as a
// crash in a job scheduler's log). Nothing is being written then that a
// stop could finish: a case is being read, or a command answers alone.
void exitOnStopSignals();

// A process group that such an exit kills first: a Slurm client that
// submits nothing, waiting on a controller that may not answer, runs in a
// group of its own and would outlive the command (probe 37). 0: none.
void setGroupKilledOnExit(pid_t group);

// Installs the handlers for one run and restores the previous ones when it
// ends. Handlers, not SIG_IGN, so that trials start with the default
// dispositions (exec resets handled signals; ignored ones would stay
// ignored). A run inside a run (the op step's reduction) keeps a stop
// asked of the outer one.
class StopOnSignals {
 public:
  // What the first stop signal says at once (a run of shrink writes its
  // best case; verify, compare and regress give no verdict).
  static constexpr const char* kShrinkStops =
      "\nminrepro: signal received: ending the running trials; the best case so far is written next\n";
  static constexpr const char* kRunsStop = "\nminrepro: signal received: ending the running run; no verdict is given\n";
  explicit StopOnSignals(const char* said = kShrinkStops);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  static constexpr std::array<int, 5> kSignals{SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGUSR1};
  std::array<struct sigaction, 5> old_{};
  static inline int depth_ = 0;
};

}  // namespace minrepro
