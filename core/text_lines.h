// Small string helpers shared by the readers of trial output and logs
// (engine/error_readers, engine/log_streams, engine/failure_signature).
// Header-only: they are a few lines each and run on every line of a log.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace minrepro::text {

using Lines = std::vector<std::string>;

// The first 2 KiB of a line are enough to read an error. Longer lines are
// progress bars or printed tensors, and libstdc++'s std::regex recurses once
// per character matched by a '*': a 100 KB line overflows an 8 MB stack.
constexpr std::size_t kMaxLine = 2048;

// `line` without its terminal colour and cursor sequences (CSI: ESC '['
// parameters, a final byte from '@' to '~'): a coloured traceback (rich,
// loguru, Python 3.13 on a terminal, FORCE_COLOR) reads as a plain one.
inline void removeColor(std::string& line) {
  std::size_t at = line.find('\x1b');
  if (at == std::string::npos) return;
  std::string out = line.substr(0, at);
  for (std::size_t i = at; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t end = i + 2;
      while (end < line.size() && !(line[end] >= '@' && line[end] <= '~')) ++end;
      i = end;  // past the final byte (or the line's end, a sequence cut off)
      continue;
    }
    out += line[i];
  }
  line = std::move(out);
}

// Lines without their '\n' (and '\r') and colours, each cut at kMaxLine.
inline Lines splitLines(const std::string& text) {
  Lines lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, std::min(end - start, kMaxLine));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    removeColor(line);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// The UTF-8 bytes of a control at `s[i]` that no byte check sees, else 0:
// a bidirectional control (U+061C, U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069: a right-to-left override in a file name or a message
// makes a terminal or a viewer show text in another order than it is) or
// a C1 control (U+0080..U+009F: terminals that honour them take U+009B as
// ESC [, the start of an escape sequence), or an invisible or line-breaking
// one (U+200B..U+200D, U+2028, U+2029, U+2060, U+FEFF, the tag characters
// U+E0000..U+E007F: hidden text, or a line a log viewer breaks).
inline std::size_t hiddenControlAt(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  if (at(0) == 0xd8 && at(1) == 0x9c) return 2;
  if (at(0) == 0xc2 && at(1) >= 0x80 && at(1) <= 0x9f) return 2;
  if (at(0) == 0xef && at(1) == 0xbb && at(2) == 0xbf) return 3;
  if (at(0) == 0xf3 && at(1) == 0xa0 && (at(2) == 0x80 || at(2) == 0x81) && at(3) >= 0x80 && at(3) <= 0xbf) return 4;
  if (at(0) != 0xe2) return 0;
  if (at(1) == 0x80 && ((at(2) >= 0x8b && at(2) <= 0x8f) || (at(2) >= 0xa8 && at(2) <= 0xae))) return 3;
  if (at(1) == 0x81 && (at(2) == 0xa0 || (at(2) >= 0xa6 && at(2) <= 0xa9))) return 3;
  return 0;
}

// Whether any such control is in `s`.
inline bool holdsHiddenControl(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (hiddenControlAt(s, i) != 0) return true;
  return false;
}

// The length of the valid UTF-8 sequence at s[i] (1 for ASCII), or 0 where
// the bytes are no UTF-8: a stray continuation byte, a raw 8-bit C1 control
// (0x9b is CSI to a terminal that takes 8-bit controls), a cut, overlong or
// surrogate sequence. A Python source with such a byte does not compile.
inline std::size_t utf8SequenceAt(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned lead = at(0);
  if (lead < 0x80) return 1;
  const std::size_t n = lead >= 0xc2 && lead <= 0xdf   ? 2
                        : lead >= 0xe0 && lead <= 0xef ? 3
                        : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                       : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((at(k) & 0xc0) != 0x80) return 0;
  if ((lead == 0xe0 && at(1) < 0xa0) || (lead == 0xed && at(1) > 0x9f) || (lead == 0xf0 && at(1) < 0x90) ||
      (lead == 0xf4 && at(1) > 0x8f))
    return 0;
  return n;
}

// Text from a file or a process, made safe to print: every control byte
// but '\n' and '\t' (ESC, BEL, '\r', DEL, ...) as "\xNN", every
// bidirectional or C1 control as its bytes "\xNN\xNN\xNN", and every byte
// that is no UTF-8 (a raw 8-bit C1 control) as "\xNN". A signature.txt, an
// error message or a .expect file may carry escape sequences that set a
// terminal's title or colours, or rewrite the line above.
inline std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  static constexpr char kHex[] = "0123456789abcdef";
  const auto hex = [&](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (const std::size_t bidi = hiddenControlAt(s, i)) {
      for (std::size_t k = 0; k < bidi; ++k) hex(static_cast<unsigned char>(s[i + k]));
      i += bidi - 1;
      continue;
    }
    const char c = s[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      const std::size_t n = utf8SequenceAt(s, i);
      if (n == 0) {
        hex(byte);
        continue;
      }
      out.append(s.substr(i, n));
      i += n - 1;
    } else if ((byte >= 0x20 && byte != 0x7f) || c == '\n' || c == '\t') {
      out += c;
    } else {
      hex(byte);
    }
  }
  return out;
}

// A name shown within a line (a file of a directory someone else filled,
// such as a regression set cloned from elsewhere): printable, and '\n' and
// '\t' as "\x0a" and "\x09" too, so that it cannot start a line of its own
// (probe 41: "FORGED: ok" as a row of regress's table).
inline std::string printableInLine(std::string_view s) {
  std::string out;
  for (const char c : printable(s))
    out += c == '\n' ? std::string("\\x0a") : c == '\t' ? std::string("\\x09") : std::string(1, c);
  return out;
}

// A double-quoted string literal that Python and C++ both read back as
// `text`: backslashes and quotes escaped, newlines as \n.
inline std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// One word for /bin/sh: as it is when it holds only characters the shell
// reads literally, else single-quoted (a ' as '\'').
inline std::string shellWord(std::string_view text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_./=:@%+,-") == std::string_view::npos;
  if (plain) return std::string(text);
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

inline bool startsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

inline bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

template <std::size_t N>
bool containsAny(std::string_view s, const std::array<std::string_view, N>& parts) {
  for (auto part : parts)
    if (contains(s, part)) return true;
  return false;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `word` stands in `text` as a whole word: not inside a longer
// name of letters, digits and '_'.
inline bool hasWord(std::string_view text, std::string_view word) {
  const auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (auto at = text.find(word); !word.empty() && at != std::string_view::npos; at = text.find(word, at + 1))
    if ((at == 0 || !part(text[at - 1])) && (at + word.size() >= text.size() || !part(text[at + word.size()])))
      return true;
  return false;
}

// The entries of a colon-separated search path (PYTHONPATH), empty ones left out.
inline std::vector<std::string> searchPathEntries(std::string_view value) {
  std::vector<std::string> entries;
  for (std::size_t from = 0; from <= value.size();) {
    const std::size_t colon = std::min(value.find(':', from), value.size());
    if (colon > from) entries.emplace_back(value.substr(from, colon - from));
    from = colon + 1;
  }
  return entries;
}

inline bool isBlank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

}  // namespace minrepro::text
