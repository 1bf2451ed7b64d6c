// Reading a log of any size in bounded memory (minrepro triage).
//
// A training log may hold millions of progress lines and a line without an
// end (a progress bar, /dev/zero). Every line is cut at text::kMaxLine. A
// log up to kExactBytes is kept whole; past that, only the lines near a
// line that may belong to an error are kept (kContext lines before and
// after any line naming an error, an exception, a traceback frame, a signal,
// a device, a rank, a failure...): the progress chatter between them is
// dropped, a blank line standing for each dropped run, and each kept line
// remembers its number in the log.
//
// What the error readers make of a kept line costs about ten times its
// bytes, so the kept lines themselves are bounded too, whatever the log
// holds (a log that is nothing but tracebacks grew triage to gigabytes):
// the first kHeadBytes of them, where the first error is, and the last
// kTailBytes, where the process's death is reported; the lines between are
// counted and not read. Memory is then a fixed bound whatever the log.
#pragma once

#include <cstddef>
#include <deque>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "core/text_lines.h"

namespace minrepro {

struct LogLines {
  text::Lines lines;
  // 1-based number in the log of each line kept; empty when every line was kept.
  std::vector<std::size_t> numbers;
  std::size_t cut_lines = 0;  // lines longer than text::kMaxLine, kept in their first kMaxLine bytes
  std::size_t dropped = 0;    // lines dropped as far from any error
  // Lines near errors that were not read, between the first kHeadBytes of
  // kept lines and the last kTailBytes; the 1-based numbers of the first
  // and last of them.
  std::size_t not_read = 0, first_not_read = 0, last_not_read = 0;
  // The 1-based line of the log that kept line `kept` (1-based) was.
  std::size_t numberInLog(std::size_t kept) const {
    return numbers.empty() || kept == 0 || kept > numbers.size() ? kept : numbers[kept - 1];
  }
};

inline constexpr std::size_t kHeadBytes = std::size_t{6} << 20;
inline constexpr std::size_t kTailBytes = std::size_t{2} << 20;
inline constexpr std::size_t kExactBytes = kHeadBytes;
inline constexpr std::size_t kContext = 64;

// Whether a line may be part of an error as the error readers see one.
bool mayBelongToAnError(const std::string& line);

// Reads `in` as above.
LogLines readLogBounded(std::istream& in, std::size_t exact_bytes = kExactBytes, std::size_t head_bytes = kHeadBytes,
                        std::size_t tail_bytes = kTailBytes);

}  // namespace minrepro
