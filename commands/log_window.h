// Reading a log of any size in bounded memory (minrepro triage).
//
// A training log may hold millions of progress lines and a line without an
// end (a progress bar, /dev/zero). Every line is cut at text::kMaxLine. A
// log up to kExactBytes is kept whole; past that, only the lines near a
// line that may belong to an error are kept (kContext lines before and
// after any line naming an error, an exception, a traceback frame, a signal,
// a device, a rank, a failure...): the progress chatter between them is
// dropped, a blank line standing for each dropped run, and each kept line
// remembers its number in the log. Memory is then a fixed bound plus what
// the errors themselves take, whatever the log's length.
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
  // The 1-based line of the log that kept line `kept` (1-based) was.
  std::size_t numberInLog(std::size_t kept) const {
    return numbers.empty() || kept == 0 || kept > numbers.size() ? kept : numbers[kept - 1];
  }
};

inline constexpr std::size_t kExactBytes = std::size_t{16} << 20;
inline constexpr std::size_t kContext = 64;

// Whether a line may be part of an error as the error readers see one.
bool mayBelongToAnError(const std::string& line);

// Reads `in` as above.
LogLines readLogBounded(std::istream& in, std::size_t exact_bytes = kExactBytes);

}  // namespace minrepro
