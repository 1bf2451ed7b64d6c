#include "reducers/selection_text.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <sstream>

namespace minrepro {

namespace {

std::string encodeName(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

std::optional<std::string> decodeName(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    const auto [end, error] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (error != std::errc() || end != text.data() + i + 3) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

// Ascending indices as "a-b" runs and single values, comma-separated.
std::string encodeRanges(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(values[i]);
    if (j > i) out += '-' + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::int64_t> parseInt(const std::string& text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::vector<std::int64_t>> decodeRanges(const std::string& text) {
  std::vector<std::int64_t> out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const auto dash = part.find('-', 1);  // not a leading minus
    const auto first = parseInt(part.substr(0, dash));
    const auto last = dash == std::string::npos ? first : parseInt(part.substr(dash + 1));
    if (!first || !last || *last < *first || (!out.empty() && *first <= out.back())) return std::nullopt;
    for (std::int64_t v = *first; v <= *last; ++v) out.push_back(v);
  }
  return out;
}

// One field of the text into `s`; false when it is malformed.
bool parseField(const std::string& key, const std::string& value, Selection& s) {
  if (key == "samples") {
    auto v = decodeRanges(value);
    if (!v) return false;
    s.samples = std::move(*v);
  } else if (key == "window") {
    const auto dash = value.find('-');
    const auto b = parseInt(value.substr(0, dash)),
               e = dash == std::string::npos ? std::nullopt : parseInt(value.substr(dash + 1));
    if (!b || !e) return false;
    s.seq_begin = *b;
    s.seq_end = *e;
  } else if (key == "lengths") {
    std::istringstream in(value);
    for (std::string pair; std::getline(in, pair, ',');) {
      const auto colon = pair.find(':');
      const auto sample = parseInt(pair.substr(0, colon));
      const auto length = colon == std::string::npos ? std::nullopt : parseInt(pair.substr(colon + 1));
      if (!sample || !length) return false;
      s.lengths[*sample] = *length;
    }
  } else if (key == "off") {
    std::istringstream in(value);
    for (std::string name; std::getline(in, name, ',');) {
      auto decoded = decodeName(name);
      if (!decoded) return false;
      s.branches_off.insert(*decoded);
    }
  } else if (key.rfind("values.", 0) == 0) {
    auto name = decodeName(key.substr(7));
    auto v = decodeRanges(value);
    if (!name || !v) return false;
    s.values_kept[*name] = std::move(*v);
  } else {
    return false;
  }
  return true;
}

}  // namespace

std::string selectionText(const Selection& s) {
  std::string text = "samples=" + encodeRanges(s.samples);
  if (s.seq_end > 0) text += ";window=" + std::to_string(s.seq_begin) + "-" + std::to_string(s.seq_end);
  if (!s.lengths.empty()) {
    text += ";lengths=";
    for (const auto& [sample, length] : s.lengths)
      text += (text.back() == '=' ? "" : ",") + std::to_string(sample) + ":" + std::to_string(length);
  }
  if (!s.branches_off.empty()) {
    text += ";off=";
    for (const auto& name : s.branches_off) text += (text.back() == '=' ? "" : ",") + encodeName(name);
  }
  for (const auto& [tensor, kept] : s.values_kept) text += ";values." + encodeName(tensor) + "=" + encodeRanges(kept);
  return text;
}

std::optional<Selection> parseSelectionText(const std::string& text) {
  Selection s;
  std::istringstream in(text);
  bool samples = false;
  for (std::string field; std::getline(in, field, ';');) {
    const auto eq = field.find('=');
    if (eq == std::string::npos || !parseField(field.substr(0, eq), field.substr(eq + 1), s)) return std::nullopt;
    samples = samples || field.rfind("samples=", 0) == 0;
  }
  if (!samples) return std::nullopt;
  return s;
}

}  // namespace minrepro
