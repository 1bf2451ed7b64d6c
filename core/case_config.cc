// case.yaml: loading, validation and writing.
//
// Every rejection is a BadInputError of the form
//   <file>:<line>:<column>: <key.path>: expected <what>, found <what>[; <what to do>]
// so that a user can fix the case without reading this file. Lines and
// columns are printed 1-based (yaml-cpp's marks are 0-based).
#include "core/case_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
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
#define MINREPRO_REDUCER(name, factory, key_writer, description) #name,
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER
  };
  return names;
}

namespace {

const std::vector<std::string> kTopKeys{"batch",    "samples",  "trial",    "failure",  "reducers",
                                        "output",   "work_dir", "seed",     "context",  "flaky",
                                        "pipeline", "sequence", "values",   "invariants", "executor"};
const std::vector<std::string> kExecutorKeys{"kind",       "partition", "gres",    "time",             "account",
                                             "extra_args", "retries",   "devices", "trials_per_device"};
const std::vector<std::string> kSequenceKeys{"tensors", "padding", "lengths", "min_length"};
const std::vector<std::string> kTransformKeys{"type", "name", "tensor", "optional", "seed", "mean", "std",
                                              "axis", "length", "value", "dtype"};
const std::vector<std::string> kSwitchKeys{"name", "args", "off_args", "env", "off_env"};
const std::vector<std::string> kValuesKeys{"exclude", "trivial"};
const std::vector<std::string> kInvariantKeys{"dtype", "layout", "operator", "sample_axis"};
const std::vector<std::string> kPipelineKeys{"passes", "description"};
const std::vector<std::string> kSampleKeys{"tensors", "ids"};
const std::vector<std::string> kTrialKeys{"harness", "command", "env", "timeout",
                                          "memory_limit_mb", "fork_server", "preload", "deterministic", "compile_cache",
                                          "switches", "diagnostic", "files", "exclude_files"};
const std::vector<std::string> kDiagnosticSettings{"auto", "on", "off", "cuda", "rocm"};
const std::vector<std::string> kHarnessKeys{"model", "input", "target", "loss", "ignore_index", "transforms"};
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
  // A FIFO or a device is there, but is not a file minrepro can read twice (or at all).
  const std::string found = fs::is_directory(st)           ? "a directory at "
                            : fs::is_fifo(st)              ? "a FIFO (named pipe) at "
                            : fs::is_character_file(st) || fs::is_block_file(st) ? "a device at "
                            : fs::is_socket(st)            ? "a socket at "
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

// Each element of an argv list: a `{name}` that is not one of minrepro's
// placeholders is refused, not passed through as text the program would
// get instead of a path.
void checkPlaceholders(const Loader& l, const Value& v, const std::vector<std::string>& args) {
  static const std::regex kPlaceholder(R"(\{([A-Za-z_][A-Za-z0-9_]*)\})");
  static const std::vector<std::string> kKnown{"batch", "workdir", "case_dir"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    for (std::sregex_iterator it(args[i].begin(), args[i].end(), kPlaceholder), end; it != end; ++it) {
      const std::string name = (*it)[1];
      if (std::find(kKnown.begin(), kKnown.end(), name) != kKnown.end()) continue;
      fail(l, Value{v.node[i], v.path + "[" + std::to_string(i) + "]", v.node[i].Mark()},
           "the placeholders {batch}, {workdir} or {case_dir}", inQuotes("{" + name + "}"),
           std::string("a placeholder minrepro does not know would reach the program as text") +
               (suggestion(name, kKnown).empty() ? "; put code with braces in a script file" : "; " +
                suggestion(name, kKnown)));
    }
  }
}

std::vector<std::string> readArgv(const Loader& l, const Value& v) {
  if (v.node.IsScalar())
    fail(l, v, "a list of strings (argv, never passed to a shell)", describeFound(v.node),
         "split it into a list, e.g. [\"python3\", \"step.py\", \"{batch}\"]");
  const std::vector<std::string> argv = stringList(l, v, "strings (argv, never passed to a shell)");
  checkPlaceholders(l, v, argv);
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
  c.command = CommandTrial{readArgv(l, *command), {}, {}};
  if (env) c.command->env = readEnv(l, *env);
}

// trial.deterministic, trial.fork_server and trial.preload (engine/executors/fork_server.h),
// trial.compile_cache.
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
  if (const Value* v = t.find("compile_cache")) {
    const std::string text = v->node.IsScalar() ? v->node.Scalar() : "";
    if (text != "shared" && text != "fresh") fail(l, *v, "shared or fresh", describeFound(v->node));
    c.share_compile_cache = text == "shared";
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

// trial.files and trial.exclude_files: globs under the case directory
// (engine/archive/bundle.h), for what the file trace cannot see or must not ship.
void readBundleGlobs(const Loader& l, const MapView& t, CaseConfig& c) {
  for (auto [key, list] : {std::pair{"files", &c.files}, std::pair{"exclude_files", &c.exclude_files}}) {
    const Value* v = t.find(key);
    if (!v) continue;
    *list = stringList(l, *v, "a list of globs relative to the case directory (e.g. [\"weights/*.pt\"])");
    for (std::size_t i = 0; i < list->size(); ++i) {
      const fs::path glob((*list)[i]);
      if (glob.empty() || glob.is_absolute() || *glob.lexically_normal().begin() == "..")
        fail(l, Value{v->node[i], v->path + "[" + std::to_string(i) + "]", v->node[i].Mark()},
             "a glob relative to the case directory, inside it", inQuotes((*list)[i]));
    }
  }
}

// trial.diagnostic: auto | on | off | cuda | rocm (engine/diagnostics.h).
DiagnosticSetting readDiagnostic(const Loader& l, const Value& v) {
  const std::string expected = "one of " + joinNames(kDiagnosticSettings);
  const std::string text = scalar(l, v, expected);
  const auto it = std::find(kDiagnosticSettings.begin(), kDiagnosticSettings.end(), text);
  if (it == kDiagnosticSettings.end()) fail(l, v, expected, inQuotes(text), suggestion(text, kDiagnosticSettings));
  return static_cast<DiagnosticSetting>(it - kDiagnosticSettings.begin());  // same order as the enum
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
  readBundleGlobs(l, t, c);
  if (const Value* v = t.find("diagnostic")) c.diagnostic = readDiagnostic(l, *v);
}

// The families a case may expect (core/failure_families.def): errors and
// ways of ending, never a pass or "the trial could not start".
std::vector<std::string> expectableFamilies() {
  std::vector<std::string> names;
  for (const FailureFamily f : allFailureFamilies())
    if (isExpectableFamily(f)) names.push_back(familyName(f));
  return names;
}

FailureFamily readFamily(const Loader& l, const Value& v) {
  const std::vector<std::string> names = expectableFamilies();
  const std::string s = scalar(l, v, "a failure family");
  const std::optional<FailureFamily> f = parseFamily(s);
  if (!f || !isExpectableFamily(*f)) fail(l, v, "one of " + joinNames(names), inQuotes(s), suggestion(s, names));
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

// ---------------------------------------------------------------- reduction

double number(const Loader& l, const Value& v, const std::string& expected) {
  double x = 0;
  const std::string text = v.node.IsScalar() ? v.node.Scalar() : "";
  const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || stop != text.data() + text.size() || !std::isfinite(x))
    fail(l, v, expected, describeFound(v.node));
  return x;
}

// 0.5 as "0.5", 520 as "520": the text the transform's parameters travel as.
std::string shortNumber(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", x);
  return text;
}

Value itemOf(const Value& list, std::size_t i) {
  const YAML::Node item = list.node[i];
  return Value{item, list.path + "[" + std::to_string(i) + "]", item.IsNull() ? list.mark : item.Mark()};
}

// sequence: {tensors: {name: axis}, padding: {name: value}, lengths: name, min_length: n}
void readSequence(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("sequence");
  if (!v) return;
  const MapView s(l, *v, kSequenceKeys);
  const std::string expected = "a map of batch tensor name to sequence axis (e.g. {tokens: 1, mask: 1})";
  const Value& tensors = s.require("tensors", expected);
  const Entries entries = mapEntries(l, tensors, expected);
  if (entries.empty()) fail(l, tensors, expected, "an empty map", "name the tensors that have a sequence axis");
  for (const Entry& e : entries)
    c.sequence.tensors.push_back({e.name, static_cast<int>(integer(l, e.value, "an integer axis", INT_MIN, INT_MAX)), 0});
  if (const Value* p = s.find("padding")) {
    for (const Entry& e : mapEntries(l, *p, "a map of sequence tensor name to padding value")) {
      auto it = std::find_if(c.sequence.tensors.begin(), c.sequence.tensors.end(),
                             [&](const SequenceTensor& t) { return t.tensor == e.name; });
      if (it == c.sequence.tensors.end())
        fail(l, Value{e.value.node, e.value.path, e.key_mark}, "a tensor named in sequence.tensors", inQuotes(e.name));
      it->pad = number(l, e.value, "a number (the value cut positions take)");
    }
  }
  if (const Value* x = s.find("lengths")) c.sequence.lengths = nonEmpty(l, *x, "the batch key of a 1-D length tensor");
  if (const Value* x = s.find("min_length"))
    c.sequence.min_length = integer(l, *x, "an integer >= 0", 0, std::numeric_limits<std::int64_t>::max());
}

std::string dtypeName(const Loader& l, const Value& v) {
  static const std::vector<std::string> kDtypes{"float16", "bfloat16", "float32", "float64", "int8",
                                                "uint8",   "int16",    "int32",   "int64",   "bool"};
  const std::string name = scalar(l, v, "a dtype name (" + joinNames(kDtypes) + ")");
  if (std::find(kDtypes.begin(), kDtypes.end(), name) == kDtypes.end())
    fail(l, v, "a dtype name (" + joinNames(kDtypes) + ")", inQuotes(name), suggestion(name, kDtypes));
  return name;
}

// The parameters each transform type takes (all required); `tensor` always is.
const std::map<std::string, std::vector<std::string>>& transformParams() {
  static const std::map<std::string, std::vector<std::string>> params{
      {"normalize", {"mean", "std"}}, {"noise", {"std"}}, {"crop", {"axis", "length"}},
      {"pad", {"axis", "length", "value"}}, {"cast", {"dtype"}}};
  return params;
}

TransformSpec readTransform(const Loader& l, const Value& v) {
  const MapView m(l, v, kTransformKeys);
  TransformSpec t;
  std::vector<std::string> types;
  for (const auto& [type, params] : transformParams()) types.push_back(type);
  const Value& type = m.require("type", "one of " + joinNames(types));
  t.type = scalar(l, type, "one of " + joinNames(types));
  if (!transformParams().count(t.type)) fail(l, type, "one of " + joinNames(types), inQuotes(t.type), suggestion(t.type, types));
  t.name = t.type;
  if (const Value* x = m.find("name")) t.name = nonEmpty(l, *x, "a branch name");
  t.tensor = nonEmpty(l, m.require("tensor", "the batch key the transform applies to"), "a batch key");
  if (const Value* x = m.find("optional")) t.optional = boolean(l, *x);
  if (const Value* x = m.find("seed"))
    t.seed = static_cast<std::uint64_t>(integer(l, *x, "a non-negative integer", 0, std::numeric_limits<std::int64_t>::max()));
  for (const std::string& key : transformParams().at(t.type)) {
    const Value& p = m.require(key, "the " + t.type + " transform's '" + key + "'");
    t.params[key] = key == "dtype" ? dtypeName(l, p) : shortNumber(number(l, p, "a number"));
  }
  for (const auto& [key, allowed] : transformParams())
    for (const std::string& p : allowed)
      if (key != t.type && m.find(p) && !t.params.count(p))
        fail(l, *m.find(p), "no '" + p + "' for a " + t.type + " transform", "it",
             "the keys of " + t.type + " are tensor, " + joinNames(transformParams().at(t.type)));
  if ((t.type == "crop" || t.type == "pad") && std::stod(t.params["length"]) < 1)
    fail(l, *m.find("length"), "a length >= 1", inQuotes(t.params["length"]));
  // normalize divides by std: 0 makes every input inf or nan, a failure of the case, not of the step.
  if (t.type == "normalize" && std::stod(t.params["std"]) == 0)
    fail(l, *m.find("std"), "a std other than 0 (normalize divides by it)", "0");
  return t;
}

CommandSwitch readSwitch(const Loader& l, const Value& v) {
  const MapView m(l, v, kSwitchKeys);
  CommandSwitch s;
  s.name = nonEmpty(l, m.require("name", "the switch's name"), "a branch name");
  auto strings = [&](const char* key) {
    const Value* x = m.find(key);
    if (!x) return std::vector<std::string>{};
    std::vector<std::string> args = stringList(l, *x, "arguments");
    checkPlaceholders(l, *x, args);
    return args;
  };
  s.args = strings("args");
  s.off_args = strings("off_args");
  if (const Value* x = m.find("env")) s.env = readEnv(l, *x);
  if (const Value* x = m.find("off_env")) s.off_env = readEnv(l, *x);
  if (s.args == s.off_args && s.env == s.off_env)
    fail(l, v, "a switch whose 'off' arguments or environment differ from its 'on' ones", "none that differ",
         "give args/env (on) and off_args/off_env (off)");
  return s;
}

// trial.harness.transforms and trial.switches: lists whose names must be unique.
template <typename Item, typename ReadOne>
std::vector<Item> readBranchList(const Loader& l, const Value& v, ReadOne readOne) {
  if (!v.node.IsSequence()) fail(l, v, "a list of maps", describeFound(v.node));
  std::vector<Item> items;
  std::set<std::string> names;
  for (std::size_t i = 0; i < v.node.size(); ++i) {
    items.push_back(readOne(l, itemOf(v, i)));
    if (!names.insert(items.back().name).second)
      fail(l, itemOf(v, i), "a unique branch name", inQuotes(items.back().name) + " again", "give it a 'name'");
  }
  return items;
}

void readValues(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("values");
  if (!v) return;
  const MapView m(l, *v, kValuesKeys);
  if (const Value* x = m.find("exclude")) c.values.exclude = stringList(l, *x, "batch keys");
  if (const Value* x = m.find("trivial"))
    for (const Entry& e : mapEntries(l, *x, "a map of batch key to trivial value"))
      c.values.trivial[e.name] = number(l, e.value, "a number");
}

void readInvariants(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("invariants");
  if (!v) return;
  const MapView m(l, *v, kInvariantKeys);
  if (const Value* x = m.find("dtype")) c.invariants.dtype = boolean(l, *x);
  if (const Value* x = m.find("layout")) c.invariants.layout = boolean(l, *x);
  if (const Value* x = m.find("operator")) c.expected.require_original_op = c.invariants.op = boolean(l, *x);
  if (const Value* x = m.find("sample_axis")) c.invariants.sample_axis = boolean(l, *x);
}

void readBranches(const Loader& l, const MapView& top, CaseConfig& c) {
  const MapView t(l, top.require("trial", "a map"), kTrialKeys);
  if (const Value* s = t.find("switches")) {
    if (!c.command)
      fail(l, *s, "'switches' only with 'command'", "it with 'harness'",
           "the built-in harness's branches are its transforms (trial.harness.transforms)");
    c.command->switches = readBranchList<CommandSwitch>(l, *s, readSwitch);
  }
  if (!c.harness) return;
  const MapView h(l, *t.find("harness"), kHarnessKeys);
  if (const Value* x = h.find("transforms")) c.harness->transforms = readBranchList<TransformSpec>(l, *x, readTransform);
}

// Where a pipeline named in case.yaml is looked for, in order.
std::vector<fs::path> pipelineDirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("MINREPRO_PIPELINES"); env && *env) dirs.emplace_back(env);
  if (const fs::path beside = besideSelf("pipelines"); beside.has_parent_path()) dirs.push_back(beside);
  dirs.push_back(fs::path(MINREPRO_SOURCE_DIR) / "configs" / "pipelines");
  return dirs;
}

fs::path findPipeline(const Loader& l, const Value& v, const std::string& name) {
  if (name.find('/') != std::string::npos || name.ends_with(".yaml"))
    return existingFile(l, v, "a pipeline file (passes: [...])");
  std::string tried;
  for (const fs::path& dir : pipelineDirs()) {
    std::error_code ec;
    if (fs::is_regular_file(dir / (name + ".yaml"), ec)) return dir / (name + ".yaml");
    tried += (tried.empty() ? "" : ", ") + (dir / (name + ".yaml")).string();
  }
  fail(l, v, "the name of a pipeline in configs/pipelines or a pipeline file", "no pipeline " + inQuotes(name) + " (tried " + tried + ")",
       "set MINREPRO_PIPELINES to the directory of configs/pipelines, or list the passes with 'reducers'");
}

std::vector<std::string> readReducers(const Loader& l, const Value& v);
std::string readText(const Loader& l, const fs::path& file);
YAML::Node parseText(const Loader& l, const std::string& text);

// `reducers: [...]` lists the passes; otherwise `pipeline` (default "default")
// names a file of configs/pipelines with `passes: [...]`.
void readPipeline(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* reducers = top.find("reducers");
  const Value* pipeline = top.find("pipeline");
  if (reducers && pipeline)
    fail(l, *pipeline, "either 'pipeline' or 'reducers'", "both", "remove one of them");
  if (reducers) {
    c.reducers = readReducers(l, *reducers);
    c.pipeline.clear();
    return;
  }
  if (pipeline) c.pipeline = nonEmpty(l, *pipeline, "a pipeline name (e.g. default) or file");
  const fs::path file = findPipeline(l, pipeline ? *pipeline : Value{YAML::Node(c.pipeline), "pipeline", YAML::Mark::null_mark()}, c.pipeline);
  const Loader pl{file.string(), file.parent_path()};
  const YAML::Node root = parseText(pl, readText(pl, file));
  const MapView m(pl, Value{root, "", root.Mark()}, kPipelineKeys);
  c.reducers = readReducers(pl, m.require("passes", "the list of passes"));
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

// executor.extra_args: sbatch options, except those the Slurm executor sets
// itself (its files and the job's directory are how outcomes come back).
std::vector<std::string> readSbatchArgs(const Loader& l, const Value& v) {
  std::vector<std::string> args = stringList(l, v, "sbatch options (e.g. [\"--qos=debug\"])");
  static const std::vector<std::string> kOwn{"--output", "--error", "--chdir", "--wrap", "--array", "--parsable",
                                             "--test-only", "--job-name", "-o", "-e", "-D", "-J", "-a"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = args[i].substr(0, args[i].find('='));
    if (args[i].empty() || args[i][0] != '-')
      fail(l, itemOf(v, i), "an sbatch option starting with '-'", inQuotes(args[i]), "write e.g. --qos=debug");
    if (std::find(kOwn.begin(), kOwn.end(), name) != kOwn.end())
      fail(l, itemOf(v, i), "an option minrepro does not set itself", inQuotes(args[i]),
           "remove it: each trial's job gets its own name, directory and output files");
  }
  return args;
}

// executor: {kind, partition, gres, time, account, extra_args, retries,
// devices, trials_per_device} (core/executor_config.h). Slurm keys are
// kept with kind: local, so --executor slurm can use them.
void readExecutor(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("executor");
  if (!v) return;
  const MapView m(l, *v, kExecutorKeys);
  ExecutorConfig& e = c.executor;
  if (const Value* x = m.find("kind")) {
    const std::string kind = scalar(l, *x, executorKindChoices());
    const std::optional<ExecutorKind> parsed = parseExecutorKind(kind);
    if (!parsed) fail(l, *x, executorKindChoices(), inQuotes(kind), suggestion(kind, executorKindNames()));
    e.kind = *parsed;
  }
  if (const Value* x = m.find("partition")) e.slurm.partition = nonEmpty(l, *x, "a Slurm partition name");
  if (const Value* x = m.find("gres")) e.slurm.gres = nonEmpty(l, *x, "a Slurm gres request (e.g. gpu:1)");
  if (const Value* x = m.find("account")) e.slurm.account = nonEmpty(l, *x, "a Slurm account name");
  if (const Value* x = m.find("time")) {
    static const std::regex kTime(R"((\d+-)?\d+(:\d+){0,2}|UNLIMITED|INFINITE)");
    e.slurm.time = nonEmpty(l, *x, "a Slurm time limit");
    if (!std::regex_match(e.slurm.time, kTime))
      fail(l, *x, "a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)", inQuotes(e.slurm.time));
  }
  if (const Value* x = m.find("extra_args")) e.slurm.extra_args = readSbatchArgs(l, *x);
  if (const Value* x = m.find("retries")) e.slurm.retries = static_cast<std::size_t>(integer(l, *x, "an integer from 0 to 100", 0, 100));
  if (const Value* x = m.find("devices")) {
    if (e.kind == ExecutorKind::Slurm)
      fail(l, *x, "no 'devices' with kind: slurm", "it", "ask Slurm for GPUs with 'gres: gpu:1'");
    e.devices = stringList(l, *x, "device ids (e.g. [0, 1])");
    for (std::size_t i = 0; i < e.devices.size(); ++i)
      if (std::find(e.devices.begin(), e.devices.begin() + i, e.devices[i]) != e.devices.begin() + i)
        fail(l, itemOf(*x, i), "each device once", inQuotes(e.devices[i]) + " again", "remove it");
  }
  if (const Value* x = m.find("trials_per_device"))
    e.trials_per_device = static_cast<std::size_t>(integer(l, *x, "an integer from 1 to 64", 1, 64));
}

void readOptional(const Loader& l, const MapView& top, CaseConfig& c) {
  readPipeline(l, top, c);
  readSequence(l, top, c);
  readValues(l, top, c);
  readInvariants(l, top, c);
  readBranches(l, top, c);
  c.output = c.base_dir / "repro.tar.gz";
  if (const Value* v = top.find("output"))
    c.output = resolved(l, *v, "a file name for the archive");
  c.work_dir = c.base_dir / "minrepro-work";
  if (const Value* v = top.find("work_dir")) c.work_dir = resolved(l, *v, "a directory name");
  if (const Value* v = top.find("seed"))
    c.seed = static_cast<std::uint64_t>(
        integer(l, *v, "a non-negative integer", 0, std::numeric_limits<std::int64_t>::max()));
  if (const Value* v = top.find("context")) c.context = readContext(l, *v);
  readExecutor(l, top, c);
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
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

YAML::Node parseText(const Loader& l, const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {  // ParserException and its kin carry a mark
    throw BadInputError(location(l, e.mark) + ": invalid YAML: " + e.msg +
                    "; fix the syntax at this line and column");
  }
}

// A "\0" escape in a quoted string: a path, a name or an environment value
// holding a NUL is cut there by the system (work_dir: "wo\0rk" made "wo"),
// so no string of a case may hold one.
void rejectNul(const Loader& l, const YAML::Node& node) {
  if (node.IsScalar() && node.Scalar().find('\0') != std::string::npos)
    throw BadInputError(location(l, node.Mark()) + ": a NUL character (\"\\0\") in a string; no path, name or value "
                        "may hold one: remove it");
  if (node.IsSequence())
    for (const auto& item : node) rejectNul(l, item);
  if (node.IsMap())
    for (const auto& kv : node) {
      rejectNul(l, kv.first);
      rejectNul(l, kv.second);
    }
}

}  // namespace

CaseConfig loadCase(const fs::path& case_file, const fs::path& base_dir) {
  CaseConfig c;
  c.case_file = fs::absolute(case_file).lexically_normal();
  c.base_dir = base_dir.empty() ? c.case_file.parent_path() : fs::absolute(base_dir).lexically_normal();
  const Loader l{case_file.string(), c.base_dir};
  const YAML::Node root = parseText(l, readText(l, case_file));
  rejectNul(l, root);
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
  if (c.harness)
    for (std::size_t i = 0; i < c.harness->transforms.size(); ++i)
      if (!c.harness->transforms[i].seed) c.harness->transforms[i].seed = c.seed + i;
  return c;
}

// ---------------------------------------------------------------- rendering

std::string formatSeconds(std::chrono::milliseconds timeout) {
  const long long ms = timeout.count();
  std::string text = std::to_string(ms / 1000);
  if (ms % 1000 == 0) return text;
  std::string frac = std::to_string(1000 + ms % 1000).substr(1);  // zero-padded to 3 digits
  while (frac.back() == '0') frac.pop_back();
  return text + "." + frac;
}

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
  if (!h.transforms.empty()) {
    out << YAML::Key << "transforms" << YAML::Value << YAML::BeginSeq;
    for (const TransformSpec& t : h.transforms) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "type" << YAML::Value << t.type;
      if (t.name != t.type) out << YAML::Key << "name" << YAML::Value << t.name;
      out << YAML::Key << "tensor" << YAML::Value << t.tensor;
      for (const auto& [key, value] : t.params) out << YAML::Key << key << YAML::Value << value;
      if (!t.optional) out << YAML::Key << "optional" << YAML::Value << false;
      if (t.seed && (t.type == "noise" || t.type == "crop")) out << YAML::Key << "seed" << YAML::Value << *t.seed;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

void emitSwitches(YAML::Emitter& out, const std::vector<CommandSwitch>& switches) {
  if (switches.empty()) return;
  out << YAML::Key << "switches" << YAML::Value << YAML::BeginSeq;
  for (const CommandSwitch& s : switches) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << s.name;
    for (const auto& [key, args] : {std::pair{"args", &s.args}, std::pair{"off_args", &s.off_args}})
      if (!args->empty()) out << YAML::Key << key << YAML::Value << YAML::Flow << *args;
    for (const auto& [key, env] : {std::pair{"env", &s.env}, std::pair{"off_env", &s.off_env}}) {
      if (env->empty()) continue;
      out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [name, value] : *env) out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

// sequence, values and invariants, each only when it differs from the default.
void emitReduction(YAML::Emitter& out, const CaseConfig& c) {
  if (!c.sequence.tensors.empty()) {
    out << YAML::Key << "sequence" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "tensors" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& t : c.sequence.tensors) out << YAML::Key << t.tensor << YAML::Value << t.axis;
    out << YAML::EndMap << YAML::Key << "padding" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& t : c.sequence.tensors) out << YAML::Key << t.tensor << YAML::Value << t.pad;
    out << YAML::EndMap;
    if (!c.sequence.lengths.empty()) out << YAML::Key << "lengths" << YAML::Value << c.sequence.lengths;
    out << YAML::Key << "min_length" << YAML::Value << c.sequence.min_length << YAML::EndMap;
  }
  if (!c.values.exclude.empty() || !c.values.trivial.empty()) {
    out << YAML::Key << "values" << YAML::Value << YAML::BeginMap;
    if (!c.values.exclude.empty()) out << YAML::Key << "exclude" << YAML::Value << YAML::Flow << c.values.exclude;
    if (!c.values.trivial.empty()) {
      out << YAML::Key << "trivial" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [name, value] : c.values.trivial) out << YAML::Key << name << YAML::Value << value;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  const Invariants& i = c.invariants;
  if (i.dtype && i.layout && i.op && i.sample_axis) return;
  out << YAML::Key << "invariants" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "dtype"
      << YAML::Value << i.dtype << YAML::Key << "layout" << YAML::Value << i.layout << YAML::Key << "operator"
      << YAML::Value << i.op << YAML::Key << "sample_axis" << YAML::Value << i.sample_axis << YAML::EndMap;
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
  if (!c.share_compile_cache) out << YAML::Key << "compile_cache" << YAML::Value << "fresh";
  if (c.diagnostic != DiagnosticSetting::Auto)
    out << YAML::Key << "diagnostic" << YAML::Value << kDiagnosticSettings[static_cast<std::size_t>(c.diagnostic)];
  if (!c.preload.empty()) out << YAML::Key << "preload" << YAML::Value << YAML::Flow << c.preload;
  if (!c.files.empty()) out << YAML::Key << "files" << YAML::Value << YAML::Flow << c.files;
  if (!c.exclude_files.empty()) out << YAML::Key << "exclude_files" << YAML::Value << YAML::Flow << c.exclude_files;
  if (c.command) emitSwitches(out, c.command->switches);
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

std::string caseRelativeArg(const std::string& arg, const fs::path& base_dir) {
  return portableArg(arg, base_dir, base_dir);
}

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
  emitReduction(out, config);
  emitRest(out, config);
  out << YAML::EndMap;
  if (!out.good()) throw std::runtime_error("cannot write the case: " + out.GetLastError());
  return "# minrepro case; every key is described in configs/README.md\n" +
         std::string(out.c_str()) + "\n";
}

}  // namespace minrepro
