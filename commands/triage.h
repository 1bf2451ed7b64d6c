// `minrepro triage LOG`: reads a log or captured stderr, finds the FIRST
// error in it (docs/method.md, "The first error and its context": what follows is mostly its consequences) and says
// what to check first and which conclusion to avoid (docs/method.md, "Failure families").
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

#include "commands/log_window.h"
#include "core/errors.h"
#include "core/failure_signature.h"
#include "engine/diagnostics.h"

namespace minrepro {

// The log's reading (first error, where it happened, the frame to open,
// what was set aside) and what triage adds to it.
// first_line_text (LogReading's): the line where the first error begins,
// as written in the log.
struct Triage : LogReading {
  Backend backend = Backend::Unknown;
  std::size_t cut_lines = 0;  // lines longer than text::kMaxLine, read only in their first kMaxLine bytes
  std::size_t dropped = 0;    // lines of a large log dropped as far from any error (commands/log_window.h)
  // Lines near errors past the bound on what is read (log_window.h): how
  // many, and the 1-based numbers of the first and last.
  std::size_t not_read = 0, first_not_read = 0, last_not_read = 0;
};

// Reads the log with readLog, the same reader as the trials' signatures.
Triage triageText(const std::string& text);

// Which GPU stack wrote the text, from its wording (HIP/HSA vs CUDA):
// Cuda, Rocm or Unknown.
Backend detectBackend(const std::string& text);
Backend detectBackend(const text::Lines& lines);

// Reads a log of any size in bounded memory (commands/log_window.h)
// and triages it; line numbers are the log's own.
Triage triageStream(std::istream& in, std::size_t exact_bytes = kExactBytes);

// The human-readable result; `source` names the log ("train.log", "stdin").
std::string renderTriage(const Triage& triage, const std::string& source);

// The command: `path` is a file or "-" for stdin. Exit status 0 an error was
// found, 1 no error in the text; BadInputError (exit 2) when the log cannot be read.
int runTriage(const std::string& path, std::istream& in, std::ostream& out);

}  // namespace minrepro
