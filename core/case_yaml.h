// Reading case.yaml (and a pipeline file) with messages that point at the
// place: every rejection is a BadInputError of the form
//   <file>:<line>:<column>: <key.path>: expected <what>, found <what>[; <what to do>]
// so that a user can fix the case without reading minrepro's code. Lines and
// columns are printed 1-based (yaml-cpp's marks are 0-based). The sections
// (core/case_config.cc) and each executor kind's keys (core/executor_keys/)
// are read with these primitives and nothing else.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minrepro::case_yaml {

namespace fs = std::filesystem;

// A node of the YAML tree with where it came from.
struct Value {
  YAML::Node node;
  std::string path;  // dotted key path, "trial.timeout"; empty for the top level
  YAML::Mark mark;   // where to point: the value, or its key when the value is empty
};

struct Loader {
  std::string file;   // the case file as the user named it, for messages
  fs::path base_dir;  // relative paths in the case resolve against this
  // When set, every file the case names must be a regular file inside it:
  // the case of an archive made elsewhere reads only the archive's own files
  // (probe 43: compare parsed a user's file that `pipeline:` named).
  fs::path confined_to = {};
};

// "case.yaml:3:10", or the file alone when the mark is null.
std::string location(const Loader& l, const YAML::Mark& mark);

[[noreturn]] void fail(const Loader& l, const Value& v, const std::string& expected, const std::string& found,
                       const std::string& hint = "");

// 'text' quoted for a message, newlines escaped, at most 80 characters.
std::string inQuotes(const std::string& s);
// What a node is, for "found ...": its text, "a list", "a map", "an empty value".
std::string describeFound(const YAML::Node& node);
std::string joinNames(const std::vector<std::string>& names);           // "a, b, c"
std::string joinPath(const std::string& path, const std::string& key);  // "trial" + "timeout" = "trial.timeout"
// "did you mean 'timeout'?" when exactly one option is close enough to be a typo; else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& options);

struct Entry {
  std::string name;
  YAML::Mark key_mark;
  Value value;
};
using Entries = std::vector<Entry>;

// The entries of a map in file order; keys must be non-empty scalars, each once.
Entries mapEntries(const Loader& l, const Value& map, const std::string& expected);

// A map of fixed keys: unknown keys are rejected up front, so a typo is
// reported as a typo and not as the key it was meant to be missing.
class MapView {
 public:
  MapView(const Loader& l, Value v, const std::vector<std::string>& allowed)
      : l_(l), v_(std::move(v)), entries_(mapEntries(l, v_, "a map with the keys " + joinNames(allowed))) {
    for (const Entry& e : entries_) checkKnown(e, allowed);
  }

  const Value& self() const { return v_; }

  const Value* find(const std::string& key) const {
    for (const Entry& e : entries_)
      if (e.name == key) return &e.value;
    return nullptr;
  }

  // A missing key is reported at the map that should hold it.
  const Value& require(const std::string& key, const std::string& expected) const {
    if (const Value* v = find(key)) return *v;
    const std::string where = v_.path.empty() ? "at the top level" : "in " + v_.path;
    fail(l_, Value{v_.node, joinPath(v_.path, key), v_.mark}, expected, "no '" + key + "' key " + where,
         "add '" + key + ":' to this map");
  }

 private:
  void checkKnown(const Entry& e, const std::vector<std::string>& allowed) const {
    if (std::find(allowed.begin(), allowed.end(), e.name) != allowed.end()) return;
    const std::string hint = suggestion(e.name, allowed);
    fail(l_, Value{e.value.node, e.value.path, e.key_mark}, "one of the keys " + joinNames(allowed),
         "unknown key " + inQuotes(e.name), hint.empty() ? "remove it or fix its name" : hint);
  }

  const Loader& l_;
  Value v_;
  Entries entries_;
};

std::string scalar(const Loader& l, const Value& v, const std::string& expected);
std::string nonEmpty(const Loader& l, const Value& v, const std::string& expected);
// Strict decimal: yaml-cpp's own conversion would read 010 as octal and 0x10 as hex.
std::optional<std::int64_t> parseInt(const std::string& s);
std::int64_t integer(const Loader& l, const Value& v, const std::string& expected, std::int64_t min, std::int64_t max);
std::chrono::milliseconds seconds(const Loader& l, const Value& v);  // positive, to the nearest millisecond
bool boolean(const Loader& l, const Value& v);
double probability(const Loader& l, const Value& v);                          // in (0, 1)
double number(const Loader& l, const Value& v, const std::string& expected);  // finite
// A path relative to the case's directory: an existing regular file / any path.
fs::path existingFile(const Loader& l, const Value& v, const std::string& what);
fs::path resolved(const Loader& l, const Value& v, const std::string& what);
std::vector<std::string> stringList(const Loader& l, const Value& v, const std::string& expected);
Value itemOf(const Value& list, std::size_t i);  // the i-th item of a list, with its path and mark

// The file's text and its YAML tree; no string of it may hold a NUL.
std::string readText(const Loader& l, const fs::path& file);
YAML::Node parseText(const Loader& l, const std::string& text);
void rejectNul(const Loader& l, const YAML::Node& node);

}  // namespace minrepro::case_yaml
