// case.yaml: loading, validation and writing.
//
// Every rejection is a CaseError of the form
//   <file>:<line>:<column>: <key.path>: expected <what>, found <what>[; <what to do>]
// so that a user can fix the case without reading this file. Lines and
// columns are printed 1-based (yaml-cpp's marks are 0-based).
#include "engine/case_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

namespace minrepro {

namespace fs = std::filesystem;

// Taken from the reducer registry itself, so a new reducer is accepted in
// case.yaml as soon as it is registered.
const std::vector<std::string>& knownReducers() {
  static const std::vector<std::string> names{
#define MINREPRO_REDUCER(name, factory, description) #name,
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER
  };
  return names;
}

namespace {

const std::vector<std::string> kTopKeys{"batch",  "samples",  "trial", "failure", "reducers",
                                        "output", "work_dir", "seed",  "context", "flaky"};
const std::vector<std::string> kSampleKeys{"tensors", "ids"};
const std::vector<std::string> kTrialKeys{"harness", "command", "env", "timeout",
                                          "memory_limit_mb", "fork_server", "preload", "deterministic"};
const std::vector<std::string> kHarnessKeys{"model", "input", "target", "loss", "ignore_index"};
const std::vector<std::string> kFailureKeys{"family", "operator", "message"};
const std::vector<std::string> kFlakyKeys{"enabled", "alpha", "initial_failures", "initial_runs", "max_passes"};
const std::vector<std::string> kLosses{"cross_entropy", "nll", "none"};

constexpr double kMaxTimeoutSeconds = 1e7;  // ~115 days; keeps milliseconds far from overflow
constexpr std::int64_t kMaxMemoryMiB = std::int64_t{1} << 40;  // bytes must fit in 64 bits

// ---------------------------------------------------------------- reporting

// A node of the YAML tree with where it came from.
struct Value {
  YAML::Node node;
  std::string path;  // dotted key path, "trial.timeout"; empty for the top level
  YAML::Mark mark;   // where to point: the value, or its key when the value is empty
};

struct Loader {
  std::string file;   // the case file as the user named it, for messages
  fs::path base_dir;  // relative paths in the case resolve against this
};

std::string location(const Loader& l, const YAML::Mark& mark) {
  if (mark.is_null()) return l.file;
  return l.file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

[[noreturn]] void fail(const Loader& l, const Value& v, const std::string& expected,
                       const std::string& found, const std::string& hint = "") {
  std::string msg = location(l, v.mark) + ": ";
  if (!v.path.empty()) msg += v.path + ": ";
  msg += "expected " + expected + ", found " + found;
  if (!hint.empty()) msg += "; " + hint;
  throw CaseError(msg);
}

std::string inQuotes(const std::string& s) {
  constexpr std::size_t kMax = 80;
  std::string out = "'";
  for (char ch : s.substr(0, kMax)) out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  return out + (s.size() > kMax ? "...'" : "'");
}

std::string describeFound(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return inQuotes(node.Scalar());
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Null: return "an empty value";
    default: return "nothing";
  }
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string joinPath(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Levenshtein distance, ignoring case and treating '-' and '_' alike.
std::size_t editDistance(const std::string& a, const std::string& b) {
  auto fold = [](char c) {
    return c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
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

struct Entry {
  std::string name;
  YAML::Mark key_mark;
  Value value;
};
using Entries = std::vector<Entry>;

Value valueOf(const Value& map, const YAML::Node& key, const YAML::Node& value) {
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

// A map of fixed keys: unknown keys are rejected up front, so a typo is
// reported as a typo and not as the key it was meant to be missing.
class MapView {
 public:
  MapView(const Loader& l, Value v, const std::vector<std::string>& allowed)
      : l_(l),
        v_(std::move(v)),
        entries_(mapEntries(l, v_, "a map with the keys " + joinNames(allowed))) {
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
    fail(l_, Value{v_.node, joinPath(v_.path, key), v_.mark}, expected,
         "no '" + key + "' key " + where, "add '" + key + ":' to this map");
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

std::int64_t integer(const Loader& l, const Value& v, const std::string& expected, std::int64_t min,
                     std::int64_t max) {
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
    ok = !text.empty() && ec == std::errc() && stop == text.data() + text.size() &&
         std::isfinite(s) && s > 0 && s <= kMaxTimeoutSeconds;
  }
  if (!ok)
    fail(l, v, "a positive number of seconds", describeFound(v.node),
         "write e.g. 'timeout: 60' or 'timeout: 2.5'");
  // Nearest millisecond, at least one: a tiny positive timeout must not become zero.
  return std::chrono::milliseconds(std::max<long long>(1, std::llround(s * 1000)));
}

fs::path existingFile(const Loader& l, const Value& v, const std::string& what) {
  const fs::path path = (l.base_dir / nonEmpty(l, v, what)).lexically_normal();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_regular_file(st)) return path;
  fail(l, v, what + " (an existing file)",
       (fs::is_directory(st) ? "a directory at " : "no file at ") + path.string(),
       "paths are relative to the case file's directory, " + l.base_dir.string());
}

fs::path resolved(const Loader& l, const Value& v, const std::string& what) {
  return (l.base_dir / nonEmpty(l, v, what)).lexically_normal();
}

std::vector<std::string> stringList(const Loader& l, const Value& v, const std::string& expected) {
  if (!v.node.IsSequence() || v.node.size() == 0)
    fail(l, v, "a non-empty list of " + expected,
         v.node.IsSequence() ? "an empty list" : describeFound(v.node),
         "write it as a list: [\"a\", \"b\"]");
  std::vector<std::string> items;
  for (const YAML::Node& item : v.node) {
    const std::string path = v.path + "[" + std::to_string(items.size()) + "]";
    items.push_back(scalar(l, Value{item, path, item.IsNull() ? v.mark : item.Mark()}, expected));
  }
  return items;
}

// ---------------------------------------------------------------- sections

void readSamples(const Loader& l, const MapView& top, CaseConfig& c) {
  const MapView samples(l, top.require("samples", "a map with 'tensors'"), kSampleKeys);
  const std::string expected = "a map of batch tensor name to sample axis (e.g. {input: 0})";
  const Value& tensors = samples.require("tensors", expected);
  const Entries entries = mapEntries(l, tensors, expected);
  if (entries.empty())
    fail(l, tensors, expected, "an empty map",
         "name at least one tensor of the batch that has a sample axis");
  for (const Entry& e : entries) {
    const auto axis = integer(l, e.value, "an integer sample axis (negative counts from the end)",
                              INT_MIN, INT_MAX);
    c.sample_axes.push_back(SampleAxis{e.name, static_cast<int>(axis)});
  }
  if (const Value* ids = samples.find("ids"))
    c.sample_ids = nonEmpty(l, *ids, "the batch key of a 1-D tensor of sample ids");
}

std::string readLoss(const Loader& l, const Value& v, const std::string& target) {
  const std::string loss = scalar(l, v, "one of " + joinNames(kLosses));
  if (std::find(kLosses.begin(), kLosses.end(), loss) == kLosses.end())
    fail(l, v, "one of " + joinNames(kLosses), inQuotes(loss), suggestion(loss, kLosses));
  if (target.empty() && loss != "none")
    fail(l, v, "'none' when no target is set", inQuotes(loss),
         "set trial.harness.target to the batch key of the targets, or use 'loss: none'");
  return loss;
}

HarnessTrial readHarness(const Loader& l, const Value& v) {
  const MapView m(l, v, kHarnessKeys);
  HarnessTrial h;
  h.model = existingFile(l, m.require("model", "the TorchScript model slice file"),
                         "the TorchScript model slice");
  if (const Value* x = m.find("input")) h.input = nonEmpty(l, *x, "a batch key (string)");
  if (const Value* x = m.find("target"))
    h.target = scalar(l, *x, "a batch key (string), or \"\" for no loss");
  h.loss = h.target.empty() ? "none" : "cross_entropy";
  if (const Value* x = m.find("loss")) h.loss = readLoss(l, *x, h.target);
  if (const Value* x = m.find("ignore_index"))
    h.ignore_index = integer(l, *x, "an integer class index", INT64_MIN, INT64_MAX);
  return h;
}

std::vector<std::string> readArgv(const Loader& l, const Value& v) {
  if (v.node.IsScalar())
    fail(l, v, "a list of strings (argv, never passed to a shell)", describeFound(v.node),
         "split it into a list, e.g. [\"python3\", \"step.py\", \"{batch}\"]");
  const std::vector<std::string> argv = stringList(l, v, "strings (argv, never passed to a shell)");
  if (argv.front().empty())
    fail(l, Value{v.node[0], v.path + "[0]", v.node[0].Mark()},
         "the program to run (a path or a name on PATH)", "an empty string");
  const auto hasBatch = [](const std::string& a) { return a.find("{batch}") != std::string::npos; };
  if (std::none_of(argv.begin(), argv.end(), hasBatch))
    fail(l, v, "an element containing '{batch}' (replaced by the candidate batch's path)", "none",
         "add \"{batch}\" where your program takes the batch file");
  // Trials run in their own directory: a relative path to a file of the case
  // would not be found there (and the "failure" would be a missing file).
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.empty() || a.front() == '/' || a.front() == '-' || a.find('{') != std::string::npos) continue;
    std::error_code ec;
    if (fs::is_regular_file(l.base_dir / a, ec))
      fail(l, Value{v.node[i], v.path + "[" + std::to_string(i) + "]", v.node[i].Mark()},
           "a path that works from the trial's own directory", "the relative path " + inQuotes(a),
           "write \"{case_dir}/" + a + "\" (trials run in their own directory)");
  }
  return argv;
}

std::map<std::string, std::string> readEnv(const Loader& l, const Value& v) {
  std::map<std::string, std::string> env;
  for (const Entry& e : mapEntries(l, v, "a map of variable name to string value")) {
    if (e.name.find('=') != std::string::npos)
      fail(l, Value{e.value.node, e.value.path, e.key_mark}, "a variable name without '='",
           inQuotes(e.name));
    env[e.name] = scalar(l, e.value, "a string value");
  }
  return env;
}

void readTrialKind(const Loader& l, const MapView& t, CaseConfig& c) {
  const Value* harness = t.find("harness");
  const Value* command = t.find("command");
  const Value* env = t.find("env");
  if ((harness != nullptr) == (command != nullptr))
    fail(l, t.self(), "exactly one of 'harness' (the built-in harness) or 'command' (your program)",
         harness ? "both" : "neither", harness ? "remove one of them" : "add one of them");
  if (harness && env)
    fail(l, *env, "'env' only with 'command'", "it with 'harness'",
         "remove it, or run your own program with 'command'");
  if (harness) {
    c.harness = readHarness(l, *harness);
    return;
  }
  c.command = CommandTrial{readArgv(l, *command), {}};
  if (env) c.command->env = readEnv(l, *env);
}

// trial.fork_server and trial.preload (engine/fork_server.h).
void readForkServer(const Loader& l, const MapView& t, CaseConfig& c) {
  if (const Value* v = t.find("deterministic")) {
    const std::string text = v->node.IsScalar() ? v->node.Scalar() : "";
    if (text != "true" && text != "false") fail(l, *v, "true or false", describeFound(v->node));
    c.deterministic = text == "true";
  }
  if (const Value* v = t.find("fork_server")) {
    const std::string text = v->node.IsScalar() ? v->node.Scalar() : "";
    if (text != "true" && text != "false") fail(l, *v, "true or false", describeFound(v->node));
    c.fork_server = text == "true";
  }
  const Value* v = t.find("preload");
  if (!v) return;
  if (!c.command)
    fail(l, *v, "'preload' only with 'command'", "it with 'harness'", "the harness's server loads LibTorch itself");
  static const std::regex kModule(R"([A-Za-z_]\w*(\.[A-Za-z_]\w*)*)");
  c.preload = stringList(l, *v, "Python module names");
  for (std::size_t i = 0; i < c.preload.size(); ++i)
    if (!std::regex_match(c.preload[i], kModule))
      fail(l, Value{v->node[i], v->path + "[" + std::to_string(i) + "]", v->node[i].Mark()},
           "a Python module name (e.g. numpy or mypkg.model)", inQuotes(c.preload[i]));
}

void readTrial(const Loader& l, const MapView& top, CaseConfig& c) {
  const MapView t(l, top.require("trial", "a map with 'harness' or 'command'"), kTrialKeys);
  readTrialKind(l, t, c);
  if (const Value* v = t.find("timeout")) c.timeout = seconds(l, *v);
  if (const Value* v = t.find("memory_limit_mb")) {
    const auto mib = integer(l, *v, "a whole number of MiB, 0 for no limit", 0, kMaxMemoryMiB);
    c.memory_limit_bytes = static_cast<std::uint64_t>(mib) << 20;
  }
  readForkServer(l, t, c);
}

// The families a case may expect: every failure family except "the trial
// could not start", which is never a property of the case.
std::vector<std::string> expectableFamilies() {
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(FailureFamily::StartFailure); ++i) {
    const auto f = static_cast<FailureFamily>(i);
    if (f != FailureFamily::None && f != FailureFamily::StartFailure)
      names.push_back(familyName(f));
  }
  return names;
}

FailureFamily readFamily(const Loader& l, const Value& v) {
  const std::vector<std::string> names = expectableFamilies();
  const std::string s = scalar(l, v, "a failure family");
  const std::optional<FailureFamily> f = parseFamily(s);
  if (!f || *f == FailureFamily::None || *f == FailureFamily::StartFailure)
    fail(l, v, "one of " + joinNames(names), inQuotes(s), suggestion(s, names));
  return *f;
}

std::string readRegex(const Loader& l, const Value& v) {
  const std::string expected = "an ECMAScript regular expression";
  const std::string pattern = nonEmpty(l, v, expected);
  try {
    std::regex re(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail(l, v, expected, inQuotes(pattern) + " (" + e.what() + ")",
         "escape ( ) [ ] { } . * + ? with a backslash (written \\\\ inside double quotes)");
  }
  return pattern;
}

void readFailure(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("failure");
  if (!v) return;
  const MapView f(l, *v, kFailureKeys);
  if (const Value* x = f.find("family")) c.expected.family = readFamily(l, *x);
  if (const Value* x = f.find("operator")) c.expected.op = nonEmpty(l, *x, "an operator name");
  if (const Value* x = f.find("message")) c.expected.message_regex = readRegex(l, *x);
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

void readFlaky(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("flaky");
  if (!v) return;
  const MapView f(l, *v, kFlakyKeys);
  FlakyOptions& o = c.flaky;
  if (const Value* x = f.find("enabled")) o.enabled = boolean(l, *x);
  if (const Value* x = f.find("alpha")) o.alpha = probability(l, *x);
  if (const Value* x = f.find("initial_failures"))
    o.initial_failures = static_cast<std::size_t>(integer(l, *x, "an integer from 1 to 1000", 1, 1000));
  if (const Value* x = f.find("initial_runs"))
    o.initial_runs = static_cast<std::size_t>(integer(l, *x, "an integer from 1 to 100000", 1, 100000));
  if (const Value* x = f.find("max_passes"))
    o.max_passes = static_cast<std::size_t>(integer(l, *x, "an integer from 1 to 100000", 1, 100000));
}

std::vector<std::string> readReducers(const Loader& l, const Value& v) {
  const std::vector<std::string>& known = knownReducers();
  std::vector<std::string> names = stringList(l, v, "reducer names (" + joinNames(known) + ")");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Value item{v.node[i], v.path + "[" + std::to_string(i) + "]", v.node[i].Mark()};
    if (std::find(known.begin(), known.end(), names[i]) == known.end())
      fail(l, item, "one of the reducers " + joinNames(known), inQuotes(names[i]),
           suggestion(names[i], known));
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      fail(l, item, "each reducer once", inQuotes(names[i]) + " again", "remove it");
  }
  return names;
}

std::map<std::string, std::string> readContext(const Loader& l, const Value& v) {
  std::map<std::string, std::string> context;
  for (const Entry& e : mapEntries(l, v, "a map of name to value")) {
    // Context is free-form text for the report; an empty value is kept as "".
    context[e.name] =
        e.value.node.IsNull() ? std::string() : scalar(l, e.value, "a single value (text)");
  }
  return context;
}

void readOptional(const Loader& l, const MapView& top, CaseConfig& c) {
  if (const Value* v = top.find("reducers")) c.reducers = readReducers(l, *v);
  c.output = c.base_dir / "repro.tar.gz";
  if (const Value* v = top.find("output"))
    c.output = resolved(l, *v, "a file name for the archive");
  c.work_dir = c.base_dir / "minrepro-work";
  if (const Value* v = top.find("work_dir")) c.work_dir = resolved(l, *v, "a directory name");
  if (const Value* v = top.find("seed"))
    c.seed = static_cast<std::uint64_t>(
        integer(l, *v, "a non-negative integer", 0, std::numeric_limits<std::int64_t>::max()));
  if (const Value* v = top.find("context")) c.context = readContext(l, *v);
}

// ---------------------------------------------------------------- file

std::string readText(const Loader& l, const fs::path& file) {
  std::error_code ec;
  if (fs::is_directory(file, ec))
    throw CaseError(l.file +
                    ": cannot read the case file: it is a directory; "
                    "pass the path of the case's YAML file");
  std::ifstream in(file, std::ios::binary);
  const int err = errno;
  if (!in)
    throw CaseError(l.file + ": cannot read the case file: " + std::strerror(err) +
                    "; check the path given with --config");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node parseText(const Loader& l, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {  // ParserException and its kin carry a mark
    throw CaseError(location(l, e.mark) + ": invalid YAML: " + e.msg +
                    "; fix the syntax at this line and column");
  }
}

}  // namespace

CaseConfig loadCase(const fs::path& case_file) {
  CaseConfig c;
  c.case_file = fs::absolute(case_file).lexically_normal();
  c.base_dir = c.case_file.parent_path();
  const Loader l{case_file.string(), c.base_dir};
  const YAML::Node root = parseText(l, readText(l, case_file));
  // An empty document has no mark; point at the start of the file.
  const YAML::Mark start = root.Mark().is_null() ? YAML::Mark() : root.Mark();
  const MapView top(l, Value{root, "", start}, kTopKeys);
  c.batch = existingFile(l, top.require("batch", "the batch file"),
                         "the batch, a torch.save'd dict of named tensors");
  readSamples(l, top, c);
  readTrial(l, top, c);
  readFailure(l, top, c);
  readFlaky(l, top, c);
  readOptional(l, top, c);
  return c;
}

// ---------------------------------------------------------------- rendering

namespace {

constexpr std::string_view kCaseDir = "{case_dir}/";

// `arg` relative to `dir` when it is an absolute path strictly inside it.
std::optional<fs::path> relativeUnder(const std::string& arg, const fs::path& dir) {
  const fs::path path = fs::path(arg).lexically_normal();
  if (!path.is_absolute() || dir.empty()) return std::nullopt;
  const fs::path rel = path.lexically_relative(dir.lexically_normal());
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel;
}

// A file under the case's directory is written as "{case_dir}/<relative>":
// the archive copies such files to the same place next to the case, and a
// trial runs in its own directory, so a bare relative path would not find
// them. Anything else (/usr/bin/python3) stays as given.
std::string portableArg(const std::string& arg, const fs::path& base_dir, const fs::path& dir) {
  for (const fs::path& root : {base_dir, dir})
    if (const auto rel = relativeUnder(arg, root)) return std::string(kCaseDir) + rel->string();
  return arg;
}

std::string formatSeconds(std::chrono::milliseconds timeout) {
  const long long ms = timeout.count();
  std::string text = std::to_string(ms / 1000);
  if (ms % 1000 == 0) return text;
  std::string frac = std::to_string(1000 + ms % 1000).substr(1);  // zero-padded to 3 digits
  while (frac.back() == '0') frac.pop_back();
  return text + "." + frac;
}

void emitSamples(YAML::Emitter& out, const CaseConfig& c) {
  out << YAML::Key << "samples" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "tensors" << YAML::Value << YAML::BeginMap;
  for (const SampleAxis& a : c.sample_axes) out << YAML::Key << a.tensor << YAML::Value << a.axis;
  out << YAML::EndMap;
  if (!c.sample_ids.empty()) out << YAML::Key << "ids" << YAML::Value << c.sample_ids;
  out << YAML::EndMap;
}

void emitHarness(YAML::Emitter& out, const HarnessTrial& h, const std::string& model_name) {
  out << YAML::Key << "harness" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << model_name;
  out << YAML::Key << "input" << YAML::Value << h.input;
  if (!h.target.empty()) {  // without a target the loss is "none" by default
    out << YAML::Key << "target" << YAML::Value << h.target;
    out << YAML::Key << "loss" << YAML::Value << h.loss;
  }
  out << YAML::Key << "ignore_index" << YAML::Value << h.ignore_index;
  out << YAML::EndMap;
}

void emitCommand(YAML::Emitter& out, const CaseConfig& c, const fs::path& dir) {
  out << YAML::Key << "command" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& arg : c.command->argv) out << portableArg(arg, c.base_dir, dir);
  out << YAML::EndSeq;
  if (c.command->env.empty()) return;
  out << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
  // Quoted so that "1" reads as the string it is, not as a number.
  for (const auto& [name, value] : c.command->env)
    out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
  out << YAML::EndMap;
}

void emitTrial(YAML::Emitter& out, const CaseConfig& c, const fs::path& dir,
               const std::string& model_name) {
  out << YAML::Key << "trial" << YAML::Value << YAML::BeginMap;
  if (c.harness) emitHarness(out, *c.harness, model_name);
  if (c.command) emitCommand(out, c, dir);
  out << YAML::Key << "timeout" << YAML::Value << formatSeconds(c.timeout);
  const std::uint64_t mib = (c.memory_limit_bytes + (1u << 20) - 1) >> 20;  // round up
  out << YAML::Key << "memory_limit_mb" << YAML::Value << mib;
  if (c.deterministic) out << YAML::Key << "deterministic" << YAML::Value << true;
  if (!c.fork_server) out << YAML::Key << "fork_server" << YAML::Value << false;
  if (!c.preload.empty()) out << YAML::Key << "preload" << YAML::Value << YAML::Flow << c.preload;
  out << YAML::EndMap;
}

void emitFailure(YAML::Emitter& out, const ExpectedFailure& e) {
  if (!e.family && e.op.empty() && e.message_regex.empty()) return;
  out << YAML::Key << "failure" << YAML::Value << YAML::BeginMap;
  if (e.family) out << YAML::Key << "family" << YAML::Value << familyName(*e.family);
  if (!e.op.empty()) out << YAML::Key << "operator" << YAML::Value << e.op;
  if (!e.message_regex.empty()) out << YAML::Key << "message" << YAML::Value << e.message_regex;
  out << YAML::EndMap;
}

void emitFlaky(YAML::Emitter& out, const FlakyOptions& f) {
  out << YAML::Key << "flaky" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << f.enabled;
  out << YAML::Key << "alpha" << YAML::Value << f.alpha;
  out << YAML::Key << "initial_failures" << YAML::Value << f.initial_failures;
  out << YAML::Key << "initial_runs" << YAML::Value << f.initial_runs;
  out << YAML::Key << "max_passes" << YAML::Value << f.max_passes;
  out << YAML::EndMap;
}

void emitRest(YAML::Emitter& out, const CaseConfig& c) {
  emitFlaky(out, c.flaky);
  out << YAML::Key << "reducers" << YAML::Value << YAML::Flow << c.reducers;
  out << YAML::Key << "output" << YAML::Value << "repro.tar.gz";  // work_dir stays the default
  out << YAML::Key << "seed" << YAML::Value << c.seed;
  if (c.context.empty()) return;
  out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : c.context)
    out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
  out << YAML::EndMap;
}

}  // namespace

std::vector<fs::path> commandCaseFiles(const CaseConfig& config) {
  std::vector<fs::path> files;
  if (!config.command) return files;
  for (const std::string& arg : config.command->argv) {
    std::string path = arg;
    if (arg.rfind(kCaseDir, 0) == 0)
      path = (config.base_dir / arg.substr(kCaseDir.size())).string();
    const auto rel = relativeUnder(path, config.base_dir);
    std::error_code ec;
    if (rel && fs::is_regular_file(config.base_dir / *rel, ec)) files.push_back(*rel);
  }
  return files;
}

std::string renderCase(const CaseConfig& config, const fs::path& dir, const std::string& batch_name,
                       const std::string& model_name) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "batch" << YAML::Value << batch_name;
  emitSamples(out, config);
  emitTrial(out, config, dir, model_name);
  emitFailure(out, config.expected);
  emitRest(out, config);
  out << YAML::EndMap;
  if (!out.good()) throw std::runtime_error("cannot write the case: " + out.GetLastError());
  return "# minrepro case; every key is described in configs/README.md\n" +
         std::string(out.c_str()) + "\n";
}

}  // namespace minrepro
