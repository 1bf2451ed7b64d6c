// The primitives every section of case.yaml is read with (core/case_yaml.h).
#include "core/case_yaml.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/errors.h"

namespace minrepro::case_yaml {

namespace {
constexpr double kMaxTimeoutSeconds = 1e7;  // ~115 days; keeps milliseconds far from overflow
}  // namespace

// ---------------------------------------------------------------- reporting

std::string location(const Loader& l, const YAML::Mark& mark) {
  if (mark.is_null()) return l.file;
  return l.file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

[[noreturn]] void fail(const Loader& l, const Value& v, const std::string& expected, const std::string& found,
                       const std::string& hint) {
  std::string msg = location(l, v.mark) + ": ";
  if (!v.path.empty()) msg += v.path + ": ";
  msg += "expected " + expected + ", found " + found;
  if (!hint.empty()) msg += "; " + hint;
  throw BadInputError(msg);
}

std::string inQuotes(const std::string& s) {
  constexpr std::size_t kMax = 80;
  std::string out = "'";
  for (char ch : s.substr(0, kMax)) out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  return out + (s.size() > kMax ? "...'" : "'");
}

std::string describeFound(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return inQuotes(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Null:
      return "an empty value";
    default:
      return "nothing";
  }
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string joinPath(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// Levenshtein distance, ignoring case and treating '-' and '_' alike.
static std::size_t editDistance(const std::string& a, const std::string& b) {
  auto fold = [](char c) { return c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t subst = diagonal + (fold(a[i - 1]) == fold(b[j - 1]) ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, subst});
    }
  }
  return row[b.size()];
}

// "did you mean 'timeout'?" when exactly one option is close enough to be a typo.
std::string suggestion(const std::string& word, const std::vector<std::string>& options) {
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::size_t best = limit + 1;
  std::vector<std::string> closest;
  for (const std::string& option : options) {
    const std::size_t d = editDistance(word, option);
    if (d < best) {
      closest.clear();
      best = d;
    }
    if (d == best) closest.push_back(option);
  }
  if (closest.size() != 1 || best >= word.size()) return "";
  return "did you mean '" + closest.front() + "'?";
}

// ---------------------------------------------------------------- maps

static Value valueOf(const Value& map, const YAML::Node& key, const YAML::Node& value) {
  // yaml-cpp gives an empty value the mark of whatever follows it: point at its key.
  const YAML::Mark mark = value.IsNull() ? key.Mark() : value.Mark();
  return Value{value, joinPath(map.path, key.Scalar()), mark};
}

// The entries of a map in file order; keys must be non-empty scalars, each once.
Entries mapEntries(const Loader& l, const Value& map, const std::string& expected) {
  if (!map.node.IsMap()) fail(l, map, expected, describeFound(map.node));
  Entries entries;
  std::set<std::string> seen;
  for (const auto& kv : map.node) {
    Value key{kv.first, map.path, kv.first.Mark()};
    if (!kv.first.IsScalar() || kv.first.Scalar().empty())
      fail(l, key, "a key name", kv.first.IsScalar() ? "an empty key" : describeFound(kv.first));
    const std::string& name = kv.first.Scalar();
    key.path = joinPath(map.path, name);
    if (!seen.insert(name).second) fail(l, key, "each key once", "it again", "remove one of them");
    entries.push_back(Entry{name, kv.first.Mark(), valueOf(map, kv.first, kv.second)});
  }
  return entries;
}

// ---------------------------------------------------------------- scalars

std::string scalar(const Loader& l, const Value& v, const std::string& expected) {
  if (!v.node.IsScalar()) fail(l, v, expected, describeFound(v.node));
  return v.node.Scalar();
}

std::string nonEmpty(const Loader& l, const Value& v, const std::string& expected) {
  std::string s = scalar(l, v, expected);
  if (s.empty()) fail(l, v, expected, "an empty string");
  return s;
}

// Strict decimal: yaml-cpp's own conversion would read 010 as octal and 0x10 as hex.
std::optional<std::int64_t> parseInt(const std::string& s) {
  const char* begin = s.data();
  const char* end = begin + s.size();
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') ++begin;
  std::int64_t n = 0;
  const auto [stop, ec] = std::from_chars(begin, end, n);
  if (begin == end || ec != std::errc() || stop != end) return std::nullopt;
  return n;
}

std::int64_t integer(const Loader& l, const Value& v, const std::string& expected, std::int64_t min, std::int64_t max) {
  std::optional<std::int64_t> n;
  if (v.node.IsScalar()) n = parseInt(v.node.Scalar());
  if (!n || *n < min || *n > max) fail(l, v, expected, describeFound(v.node));
  return *n;
}

std::chrono::milliseconds seconds(const Loader& l, const Value& v) {
  double s = 0;
  bool ok = false;
  if (v.node.IsScalar()) {
    const std::string& text = v.node.Scalar();
    const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), s);
    ok = !text.empty() && ec == std::errc() && stop == text.data() + text.size() && std::isfinite(s) && s > 0 &&
         s <= kMaxTimeoutSeconds;
  }
  if (!ok)
    fail(l, v, "a positive number of seconds", describeFound(v.node), "write e.g. 'timeout: 60' or 'timeout: 2.5'");
  // Nearest millisecond, at least one: a tiny positive timeout must not become zero.
  return std::chrono::milliseconds(std::max<long long>(1, std::llround(s * 1000)));
}

fs::path existingFile(const Loader& l, const Value& v, const std::string& what) {
  const fs::path path = (l.base_dir / nonEmpty(l, v, what)).lexically_normal();
  std::error_code ec;
  if (!l.confined_to.empty()) {
    const fs::path inside = fs::weakly_canonical(path, ec).lexically_relative(fs::weakly_canonical(l.confined_to, ec));
    if (inside.empty() || *inside.begin() == ".." || fs::symlink_status(path, ec).type() != fs::file_type::regular)
      fail(l, v, what + ", a regular file inside the archive", "a path that is not one",
           "an archive made elsewhere may read only its own files; nothing outside it was read");
  }
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return path;
  // A FIFO or a device is there, but is not a file minrepro can read twice (or at all).
  const std::string found = fs::is_directory(st)                                 ? "a directory at "
                            : fs::is_fifo(st)                                    ? "a FIFO (named pipe) at "
                            : fs::is_character_file(st) || fs::is_block_file(st) ? "a device at "
                            : fs::is_socket(st)                                  ? "a socket at "
                                                                                 : "no file at ";
  fail(l, v, what + " (an existing regular file)", found + path.string(),
       found == "no file at " ? "paths are relative to the case file's directory, " + l.base_dir.string()
                              : "save it to a regular file first (minrepro reads it many times)");
}

fs::path resolved(const Loader& l, const Value& v, const std::string& what) {
  return (l.base_dir / nonEmpty(l, v, what)).lexically_normal();
}

std::vector<std::string> stringList(const Loader& l, const Value& v, const std::string& expected) {
  if (!v.node.IsSequence() || v.node.size() == 0)
    fail(l, v, "a non-empty list of " + expected, v.node.IsSequence() ? "an empty list" : describeFound(v.node),
         "write it as a list: [\"a\", \"b\"]");
  std::vector<std::string> items;
  for (const YAML::Node& item : v.node) {
    const std::string path = v.path + "[" + std::to_string(items.size()) + "]";
    items.push_back(scalar(l, Value{item, path, item.IsNull() ? v.mark : item.Mark()}, expected));
  }
  return items;
}

bool boolean(const Loader& l, const Value& v) {
  const std::string text = v.node.IsScalar() ? v.node.Scalar() : "";
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  fail(l, v, "true or false", describeFound(v.node));
}

double probability(const Loader& l, const Value& v) {
  double p = 0;
  const std::string text = v.node.IsScalar() ? v.node.Scalar() : "";
  const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
  if (text.empty() || ec != std::errc() || stop != text.data() + text.size() || !(p > 0 && p < 1))
    fail(l, v, "a probability between 0 and 1 (exclusive)", describeFound(v.node), "e.g. 'alpha: 0.001'");
  return p;
}

double number(const Loader& l, const Value& v, const std::string& expected) {
  double x = 0;
  const std::string text = v.node.IsScalar() ? v.node.Scalar() : "";
  const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || stop != text.data() + text.size() || !std::isfinite(x))
    fail(l, v, expected, describeFound(v.node));
  return x;
}

Value itemOf(const Value& list, std::size_t i) {
  const YAML::Node item = list.node[i];
  return Value{item, list.path + "[" + std::to_string(i) + "]", item.IsNull() ? list.mark : item.Mark()};
}

// ---------------------------------------------------------------- file

std::string readText(const Loader& l, const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec))
    throw BadInputError(l.file +
                        ": cannot read the case file: it is a directory; "
                        "pass the path of the case's YAML file");
  std::ifstream in(file, std::ios::binary);
  const int err = errno;
  if (!in)
    throw BadInputError(l.file + ": cannot read the case file: " + std::strerror(err) +
                        "; check the path given with --config");
  // Read up to a bound, not to the end: a case is some kilobytes, and
  // /dev/zero, an endless pipe or a generated file of gigabytes as --config
  // had grown minrepro to all of the machine's memory. A pipe (--config
  // <(envsubst < case.yaml)) still works.
  constexpr std::size_t kMaxCaseBytes = std::size_t{4} << 20;
  std::string text(kMaxCaseBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxCaseBytes)
    throw BadInputError(l.file + ": the case file is larger than 4 MiB (a case is some kilobytes" +
                        std::string(fs::is_regular_file(file, ec) ? "" : "; this is no regular file") +
                        "): give the case's YAML file with --config");
  return text;
}

namespace {
constexpr std::size_t kMaxValues = 100'000;
constexpr int kMaxDepth = 64;

// Counts the values as every reader of the case walks them, an alias's
// anchor once per alias: a few lines of anchors whose aliases name each
// other expand to billions (an 840-byte case.yaml kept shrink busy for
// 31 s, one more level for minutes, and compare, mid-walk, answered no
// signal). A case has some hundred values and a few levels.
void boundTree(const Loader& l, const YAML::Node& node, std::size_t& values, int depth) {
  if (++values > kMaxValues || depth > kMaxDepth)
    throw BadInputError(
        location(l, node.Mark()) + ": the case holds more than " +
        (depth > kMaxDepth ? std::to_string(kMaxDepth) + " levels" : std::to_string(kMaxValues) + " values") +
        " (its aliases, *name, expanded); a case has some hundred: write it out without "
        "aliases that name one another, and without data that belongs in the batch");
  if (node.IsSequence())
    for (const auto& item : node) boundTree(l, item, values, depth + 1);
  if (node.IsMap())
    for (const auto& kv : node) {
      boundTree(l, kv.first, values, depth + 1);
      boundTree(l, kv.second, values, depth + 1);
    }
}
}  // namespace

YAML::Node parseText(const Loader& l, const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {  // ParserException and its kin carry a mark
    throw BadInputError(location(l, e.mark) + ": invalid YAML: " + e.msg + "; fix the syntax at this line and column");
  }
  std::size_t values = 0;
  boundTree(l, root, values, 0);
  return root;
}

// A "\0" escape in a quoted string: a path, a name or an environment value
// holding a NUL is cut there by the system (work_dir: "wo\0rk" made "wo"),
// so no string of a case may hold one.
void rejectNul(const Loader& l, const YAML::Node& node) {
  if (node.IsScalar() && node.Scalar().find('\0') != std::string::npos)
    throw BadInputError(location(l, node.Mark()) +
                        ": a NUL character (\"\\0\") in a string; no path, name or value "
                        "may hold one: remove it");
  if (node.IsSequence())
    for (const auto& item : node) rejectNul(l, item);
  if (node.IsMap())
    for (const auto& kv : node) {
      rejectNul(l, kv.first);
      rejectNul(l, kv.second);
    }
}

}  // namespace minrepro::case_yaml
