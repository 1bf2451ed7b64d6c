// What a failed trial looks like, reduced to what must stay the same while
// the case shrinks: the family of the failure, the operator it names, and
// the FIRST error message (later messages are mostly consequences).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/process/process.h"
#include "core/text_lines.h"

namespace minrepro {

// One per line of core/failure_families.def.
enum class FailureFamily {
#define MINREPRO_FAILURE_FAMILY(enumerator, name, origin, check, avoid) enumerator,
#include "core/failure_families.def"
#undef MINREPRO_FAILURE_FAMILY
};

// "device-assert", "out-of-memory", ...; the names used in case.yaml and reports.
std::string familyName(FailureFamily family);
std::optional<FailureFamily> parseFamily(const std::string& name);

// Every family, in the order of the .def file.
const std::vector<FailureFamily>& allFailureFamilies();

// Whether case.yaml's failure.family may name it: an error or a way of
// ending, not a pass or a trial that could not start.
bool isExpectableFamily(FailureFamily family);

// What to check first for a failure of this family, and the conclusion to avoid.
struct FamilyAdvice {
  std::string check_first;
  std::string avoid;
};
FamilyAdvice familyAdvice(FailureFamily family);
struct FailureSignature;
// The family's advice, refined by the operator where the family's own is
// wrong for it: an index error in an embedding is a token id past the
// table (tokenizer and table disagree), not a class id past the output layer.
FamilyAdvice adviceFor(const FailureSignature& signature);

struct FailureSignature {
  FailureFamily family = FailureFamily::None;
  std::string op;           // suspect operator, e.g. "nll_loss"; empty when unknown
  std::string message;      // first error message, normalized (no addresses, pids, temp paths)
  std::string signal_name;  // "SIGABRT" when the trial died of a signal
  // Where the user's code raised it: the innermost frame outside the
  // libraries, by file name ("train.py:63 in <module>"); empty when the
  // output names none (a C++ harness, an error printed without a traceback).
  std::string place;

  bool failed() const { return family != FailureFamily::None; }
  // One line for logs and reports: "index-error in nll_loss: Target 4 is out of bounds."
  // (", killed by SIGABRT" after an error that ended the process by a signal).
  std::string summary() const;
  // How the process ended: "killed by SIGABRT", or "" (raised or exited).
  std::string ending() const { return signal_name.empty() ? "" : "killed by " + signal_name; }
};

// Classifies a trial's outcome from its exit and the first error in its output.
FailureSignature classify(const TrialOutcome& outcome);

// classify, for a case whose failure section pins the failure (a family,
// a message pattern): when the output's first error is not that one, the
// first later error that is. A step that prints a handled error's
// traceback (traceback.print_exc() for a skipped sample) and then dies of
// another fails as its failure section says, not as the handled one.
struct ExpectedFailure;
FailureSignature classifyAs(const TrialOutcome& outcome, const ExpectedFailure& expected);

// An error of a log that is not the first one, and why it was set aside.
struct SetAside {
  std::size_t line = 0;  // 1-based line of the log where it begins
  std::string where;     // "rank 0", "process 1", ...; empty: the process that wrote the log
  std::string kind;      // "collective timeout", "lost connection", "launcher summary",
                         // "death report", "later error"
  std::string summary;   // its own signature's summary
};

// What a log says about its first error (engine/log_streams chooses it
// across ranks and processes).
struct LogReading {
  FailureSignature signature;   // family None when the text holds no error
  std::size_t first_line = 0;   // 1-based line where the first error begins; 0 when none
  std::string first_line_text;  // that line (without a rank's or a logger's prefix)
  std::string where;            // the rank, process or DataLoader worker it happened in; empty: the main one
  std::string user_frame;       // the frame to open first: "/src/train.py:42 in step"; empty when unknown
  std::vector<SetAside> set_aside;
};
LogReading readLog(const std::string& text);
// The same from the log's lines, which it takes (a log held once).
LogReading readLog(text::Lines lines);

// Classifies text alone (a log file, captured stderr); family None when no
// error is found in it. The signature of readLog.
FailureSignature classifyText(const std::string& text);

// Removes what varies between runs of the same failure: hex addresses,
// pointers, pids, temp paths, line numbers inside the library.
std::string normalizeMessage(const std::string& message);

// The message with every number masked ("Target # is out of bounds."), and
// every list of numbers one list ("samples [#, ...]"): two failures whose
// messages differ only in sizes, indices or how many of them they name are
// the same bug.
std::string messageShape(const std::string& message);

// The expectations a user may state in case.yaml (all optional).
struct ExpectedFailure {
  std::optional<FailureFamily> family;
  std::string op;
  std::string message_regex;  // ECMAScript regex searched in the candidate's message
  // The candidate must name the original's operator too (invariants.operator
  // in case.yaml; relaxing it accepts the same family and message elsewhere).
  // The same place too (FailureSignature::place), where the family says
  // where it happened: "elsewhere" is what relaxing the operator accepts.
  bool require_original_op = true;
  // failure.ending: any. By default the way the process ended is part of
  // the failure: a process killed by a signal (which one) is not one that
  // raised an exception or exited with a status, whatever the message
  // (the same bounds check thrown inside an OpenMP region aborts; raised
  // serially, it is an exception a program may catch).
  bool any_ending = false;
};

struct SignatureMatch {
  bool matches = false;
  std::string why_not;  // for the log: "family out-of-memory, expected index-error"
};

// A candidate counts only when it fails the same way as the original: same
// family, same ending (the signal it died of, or none), same operator (when
// the original named one), raised at the same place of the user's code
// (when both name one; see placeMismatch), and a message that matches the
// user's pattern when given, otherwise the original's message shape. A
// different failure is a different bug and never matches.
// failure.message is searched (std::regex: it backtracks) in a thread of
// its own for at most 5 s, in the message's first 16 KiB: a pattern such as
// "(a+)+b" (one in a stranger's archive) takes exponential time on
// "aaaa...!", and kept compare and shrink busy for good, deaf to Ctrl-C.
// Past that, BadInputError naming the pattern (exit 2); a stop signal
// during the wait ends it as RunStopped (exit 130). A search that
// timed out goes on in its thread until the process ends:
// abandonedRegexSearch() says the command must end with std::_Exit (its
// destructors would pull the regex's memory from under it).
SignatureMatch matchSignature(const FailureSignature& original, const FailureSignature& candidate,
                              const ExpectedFailure& expected);
bool abandonedRegexSearch();

}  // namespace minrepro
