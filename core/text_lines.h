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

// Lines without their '\n' (and '\r'), each cut at kMaxLine.
inline Lines splitLines(const std::string& text) {
  Lines lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, std::min(end - start, kMaxLine));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// Text from a file or a process, made safe to print: every control byte
// but '\n' and '\t' (ESC, BEL, '\r', DEL, ...) as "\xNN". A signature.txt,
// an error message or a .expect file may carry escape sequences that set a
// terminal's title or colours, or rewrite the line above.
inline std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte >= 0x20 && byte != 0x7f) || c == '\n' || c == '\t') {
      out += c;
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
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

inline bool isBlank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

}  // namespace minrepro::text
