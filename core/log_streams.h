// The first error of a log that several processes wrote.
//
// A distributed job's log holds every rank's output, often prefixed with the
// rank ("[rank1]: ..." from torchrun, "[default1]:" from its --tee, "[1,0]<stderr>:"
// from Open MPI, "1: " from srun --label) and interleaved line by line, then
// the launcher's own summary. A crash on one rank shows up on the others as
// collective timeouts and closed connections, and torchrun's "Root Cause
// (first observed failure)" is the first rank to exit, which is often one
// that timed out waiting. So the log is split into one stream per rank, the
// errors of every stream are read (engine/error_readers), and the first
// error is the earliest one that a process raised; reports of a death stand
// in for it only when the process that died printed nothing, and timeouts
// and lost connections only when nothing else is there. Everything else is
// set aside, with its rank, as a consequence.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/error_readers.h"
#include "core/text_lines.h"

namespace minrepro {

struct LoggedError {
  RawError error;            // as read in its stream (line and end relative to that stream)
  std::size_t log_line = 0;  // 0-based line of the whole log where the error begins
  std::string stream;        // "rank 1" when the log's lines carried the rank; else empty
  std::string line_text;     // that line, without its rank and logging prefixes

  // The process the error belongs to: named by a wrapper ("process 1",
  // "DataLoader worker process 0"), else by the stream's prefix; empty for
  // the process that wrote the log.
  std::string where() const;
};

struct FirstErrorChoice {
  std::optional<LoggedError> first;
  std::vector<LoggedError> set_aside;  // every other error, in the order of the log
};

// `set_aside` is filled only when `list_set_aside` (triage); a trial's
// signature needs the first error alone, and its output may be long.
// The lines are taken (moved into their streams): a log of gigabytes is
// held once.
FirstErrorChoice chooseFirstError(text::Lines lines, bool list_set_aside);

// "collective timeout", "lost connection", "launcher summary",
// "death report" or "later error": why an error was set aside.
std::string setAsideKind(const RawError& error);

}  // namespace minrepro
