// case.yaml's sections, read into a CaseConfig with the primitives of
// core/case_yaml.h (whose messages point at the place); the executor kinds
// read their own keys (core/executor_keys/), and the case is written back by
// core/case_render.cc. Only what the file itself can show is checked here:
// the batch's contents are checked when it is opened, the pass names by the
// engine that runs the passes (engine/pipeline.h).
#include "core/case_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <set>
#include <utility>

#include "core/case_yaml.h"
#include "core/executor_keys/executor_keys.h"

namespace minrepro {

namespace fs = std::filesystem;

const std::vector<std::string>& diagnosticSettingNames() {
  static const std::vector<std::string> names{"auto", "on", "off", "cuda", "rocm"};
  return names;
}

namespace {

using namespace case_yaml;

const std::vector<std::string> kTopKeys{"batch",    "samples",  "trial",  "failure",    "reducers",
                                        "output",   "work_dir", "seed",   "context",    "flaky",
                                        "pipeline", "sequence", "values", "invariants", "executor"};
const std::vector<std::string> kSequenceKeys{"tensors", "padding", "lengths", "mask", "min_length"};
const std::vector<std::string> kTransformKeys{"type", "name", "tensor", "optional", "seed", "mean",
                                              "std",  "axis", "length", "value",    "dtype"};
const std::vector<std::string> kSwitchKeys{"name", "args", "off_args", "env", "off_env"};
const std::vector<std::string> kValuesKeys{"exclude", "trivial"};
const std::vector<std::string> kInvariantKeys{"dtype", "layout", "operator", "sample_axis"};
const std::vector<std::string> kPipelineKeys{"passes", "description"};
const std::vector<std::string> kSampleKeys{"tensors", "lists", "ids"};
const std::vector<std::string> kTrialKeys{"harness",     "command", "env",           "timeout",       "memory_limit_mb",
                                          "fork_server", "preload", "deterministic", "compile_cache", "switches",
                                          "diagnostic",  "files",   "exclude_files"};
const std::vector<std::string>& kDiagnosticSettings = diagnosticSettingNames();
const std::vector<std::string> kHarnessKeys{"model", "input", "target", "loss", "ignore_index", "transforms"};
const std::vector<std::string> kFailureKeys{"family", "operator", "message", "ending"};
const std::vector<std::string> kFlakyKeys{"enabled", "alpha", "initial_failures", "initial_runs", "max_passes"};
const std::vector<std::string> kLosses{"cross_entropy", "nll", "none"};

constexpr std::int64_t kMaxMemoryMiB = std::int64_t{1} << 40;  // bytes must fit in 64 bits

// ---------------------------------------------------------------- sections

// samples: {tensors: {name: axis}, lists: [path], ids: name}; absent: inferred
// from the batch when it is opened (CaseConfig::infer_samples).
void readSamples(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* section = top.find("samples");
  if (!section) {
    c.infer_samples = true;
    return;
  }
  const MapView samples(l, *section, kSampleKeys);
  const std::string expected = "a map of batch tensor name to sample axis (e.g. {input: 0})";
  if (const Value* lists = samples.find("lists"))
    c.sample_lists = stringList(l, *lists, "paths of lists with one entry per sample (e.g. [boxes, labels])");
  const Value* tensors = samples.find("tensors");
  if (!tensors && c.sample_lists.empty())
    fail(l, *section, "a map with 'tensors' (or 'lists')", "neither",
         "name the tensors that have a sample axis, e.g. tensors: {input: 0, target: 0}; or leave the samples "
         "section out and minrepro infers it from the batch");
  const Entries entries = tensors ? mapEntries(l, *tensors, expected) : Entries{};
  if (tensors && entries.empty() && c.sample_lists.empty())
    fail(l, *tensors, expected, "an empty map", "name at least one tensor of the batch that has a sample axis");
  for (const Entry& e : entries) {
    const auto axis = integer(l, e.value, "an integer sample axis (negative counts from the end)", INT_MIN, INT_MAX);
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
  h.model = existingFile(l, m.require("model", "the TorchScript model slice file"), "the TorchScript model slice");
  if (const Value* x = m.find("input")) h.input = nonEmpty(l, *x, "a batch key (string)");
  if (const Value* x = m.find("target")) h.target = scalar(l, *x, "a batch key (string), or \"\" for no loss");
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
               (suggestion(name, kKnown).empty() ? "; put code with braces in a script file"
                                                 : "; " + suggestion(name, kKnown)));
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
    fail(l, Value{v.node[0], v.path + "[0]", v.node[0].Mark()}, "the program to run (a path or a name on PATH)",
         "an empty string");
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
      fail(l, Value{e.value.node, e.value.path, e.key_mark}, "a variable name without '='", inQuotes(e.name));
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
  if (const Value* x = f.find("ending")) {
    const std::string ending = scalar(l, *x, "'same' or 'any'");
    if (ending != "same" && ending != "any")
      fail(l, *x, "'same' (the way the process ends must match: a signal, an exception, an exit status) or 'any'",
           inQuotes(ending), "");
    c.expected.any_ending = ending == "any";
  }
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

// 0.5 as "0.5", 520 as "520": the text the transform's parameters travel as.
std::string shortNumber(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", x);
  return text;
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
    c.sequence.tensors.push_back(
        {e.name, static_cast<int>(integer(l, e.value, "an integer axis", INT_MIN, INT_MAX)), 0});
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
  if (const Value* x = s.find("mask")) {
    c.sequence.mask = nonEmpty(l, *x, "the batch key of a [batch, length] mask whose rows are a prefix of ones");
    if (!c.sequence.lengths.empty())
      fail(l, *x, "either sequence.lengths or sequence.mask", "both",
           "keep the one that gives the samples' lengths (a lengths tensor, else a padding mask)");
  }
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
  static const std::map<std::string, std::vector<std::string>> params{{"normalize", {"mean", "std"}},
                                                                      {"noise", {"std"}},
                                                                      {"crop", {"axis", "length"}},
                                                                      {"pad", {"axis", "length", "value"}},
                                                                      {"cast", {"dtype"}}};
  return params;
}

TransformSpec readTransform(const Loader& l, const Value& v) {
  const MapView m(l, v, kTransformKeys);
  TransformSpec t;
  std::vector<std::string> types;
  for (const auto& [type, params] : transformParams()) types.push_back(type);
  const Value& type = m.require("type", "one of " + joinNames(types));
  t.type = scalar(l, type, "one of " + joinNames(types));
  if (!transformParams().count(t.type))
    fail(l, type, "one of " + joinNames(types), inQuotes(t.type), suggestion(t.type, types));
  t.name = t.type;
  if (const Value* x = m.find("name")) t.name = nonEmpty(l, *x, "a branch name");
  t.tensor = nonEmpty(l, m.require("tensor", "the batch key the transform applies to"), "a batch key");
  if (const Value* x = m.find("optional")) t.optional = boolean(l, *x);
  if (const Value* x = m.find("seed"))
    t.seed = static_cast<std::uint64_t>(
        integer(l, *x, "a non-negative integer", 0, std::numeric_limits<std::int64_t>::max()));
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

// trial.harness.transforms and trial.switches: lists whose names must be
// unique, and short: each branch is a variant compare runs and a unit the
// branches pass tries (probe 31: an archive's 5000 switches were days of
// compare's runs).
template <typename Item, typename ReadOne>
std::vector<Item> readBranchList(const Loader& l, const Value& v, ReadOne readOne) {
  constexpr std::size_t kMaxBranches = 64;
  if (!v.node.IsSequence()) fail(l, v, "a list of maps", describeFound(v.node));
  if (v.node.size() > kMaxBranches)
    fail(l, v, "at most " + std::to_string(kMaxBranches) + " branches", std::to_string(v.node.size()),
         "keep the branches the failure may depend on");
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
  if (const Value* x = h.find("transforms"))
    c.harness->transforms = readBranchList<TransformSpec>(l, *x, readTransform);
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
  fail(l, v, "the name of a pipeline in configs/pipelines or a pipeline file",
       "no pipeline " + inQuotes(name) + " (tried " + tried + ")",
       "set MINREPRO_PIPELINES to the directory of configs/pipelines, or list the passes with 'reducers'");
}

std::vector<std::string> readReducers(const Loader& l, const Value& v, std::vector<std::string>& places);

// `reducers: [...]` lists the passes; otherwise `pipeline` (default "default")
// names a file of configs/pipelines with `passes: [...]`.
void readPipeline(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* reducers = top.find("reducers");
  const Value* pipeline = top.find("pipeline");
  if (reducers && pipeline) fail(l, *pipeline, "either 'pipeline' or 'reducers'", "both", "remove one of them");
  if (reducers) {
    c.reducers = readReducers(l, *reducers, c.reducer_places);
    c.pipeline.clear();
    return;
  }
  if (pipeline) c.pipeline = nonEmpty(l, *pipeline, "a pipeline name (e.g. default) or file");
  const fs::path file = findPipeline(
      l, pipeline ? *pipeline : Value{YAML::Node(c.pipeline), "pipeline", YAML::Mark::null_mark()}, c.pipeline);
  const Loader pl{file.string(), file.parent_path()};
  const YAML::Node root = parseText(pl, readText(pl, file));
  const MapView m(pl, Value{root, "", root.Mark()}, kPipelineKeys);
  c.reducers = readReducers(pl, m.require("passes", "the list of passes"), c.reducer_places);
}

// The pass names and where each was written; whether a name is a pass is
// the engine's to say (engine/pipeline.h: checkPassNames), which holds the
// registry.
std::vector<std::string> readReducers(const Loader& l, const Value& v, std::vector<std::string>& places) {
  std::vector<std::string> names = stringList(l, v, "reducer names (e.g. [samples, values])");
  places.clear();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Value item = itemOf(v, i);
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      fail(l, item, "each reducer once", inQuotes(names[i]) + " again", "remove it");
    places.push_back(location(l, item.mark) + ": " + item.path);
  }
  return names;
}

std::map<std::string, std::string> readContext(const Loader& l, const Value& v) {
  std::map<std::string, std::string> context;
  for (const Entry& e : mapEntries(l, v, "a map of name to value")) {
    // Context is free-form text for the report; an empty value is kept as "".
    context[e.name] = e.value.node.IsNull() ? std::string() : scalar(l, e.value, "a single value (text)");
  }
  return context;
}

// executor: {kind, then each kind's own keys (core/executor_keys/)}.
void readExecutor(const Loader& l, const MapView& top, CaseConfig& c) {
  const Value* v = top.find("executor");
  if (!v) return;
  std::vector<std::string> allowed{"kind"};
  for (const ExecutorKeys* keys : allExecutorKeys())
    allowed.insert(allowed.end(), keys->names.begin(), keys->names.end());
  const MapView m(l, *v, allowed);
  if (const Value* x = m.find("kind")) {
    const std::string kind = scalar(l, *x, executorKindChoices());
    const std::optional<ExecutorKind> parsed = parseExecutorKind(kind);
    if (!parsed) fail(l, *x, executorKindChoices(), inQuotes(kind), suggestion(kind, executorKindNames()));
    c.executor.kind = *parsed;
  }
  for (const ExecutorKeys* keys : allExecutorKeys()) keys->read(l, m, c.executor);
}

void readOptional(const Loader& l, const MapView& top, CaseConfig& c) {
  readPipeline(l, top, c);
  readSequence(l, top, c);
  readValues(l, top, c);
  readInvariants(l, top, c);
  readBranches(l, top, c);
  c.output = c.base_dir / "repro.tar.gz";
  if (const Value* v = top.find("output")) c.output = resolved(l, *v, "a file name for the archive");
  c.work_dir = c.base_dir / "minrepro-work";
  if (const Value* v = top.find("work_dir")) c.work_dir = resolved(l, *v, "a directory name");
  if (const Value* v = top.find("seed"))
    c.seed = static_cast<std::uint64_t>(
        integer(l, *v, "a non-negative integer", 0, std::numeric_limits<std::int64_t>::max()));
  if (const Value* v = top.find("context")) c.context = readContext(l, *v);
  readExecutor(l, top, c);
}

}  // namespace

CaseConfig loadCase(const fs::path& case_file, const fs::path& base_dir, const fs::path& confined_to) {
  CaseConfig c;
  c.case_file = fs::absolute(case_file).lexically_normal();
  c.base_dir = base_dir.empty() ? c.case_file.parent_path() : fs::absolute(base_dir).lexically_normal();
  const Loader l{case_file.string(), c.base_dir, confined_to};
  const YAML::Node root = parseText(l, readText(l, case_file));
  rejectNul(l, root);
  // An empty document has no mark; point at the start of the file.
  const YAML::Mark start = root.Mark().is_null() ? YAML::Mark() : root.Mark();
  const MapView top(l, Value{root, "", start}, kTopKeys);
  c.batch = existingFile(l, top.require("batch", "the batch file"), "the batch, a torch.save'd dict of named tensors");
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

std::optional<std::string> withheldVariableName(const std::string& value) {
  constexpr std::string_view kOpen = "<secret:env-";
  if (!value.starts_with(kOpen) || !value.ends_with(">") || value.size() <= kOpen.size() + 1) return std::nullopt;
  return value.substr(kOpen.size(), value.size() - kOpen.size() - 1);
}

std::map<std::string, std::string> withWithheldFromHere(std::map<std::string, std::string> env) {
  for (auto it = env.begin(); it != env.end();) {
    const auto name = withheldVariableName(it->second);
    const char* here = name ? std::getenv(name->c_str()) : nullptr;
    if (name && !here) {
      it = env.erase(it);
      continue;
    }
    if (here) it->second = here;
    ++it;
  }
  return env;
}

std::string substituteEnvPlaceholders(std::string arg, const std::map<std::string, std::string>& env) {
  constexpr std::string_view kOpen = "{env:";
  for (std::size_t at = arg.find(kOpen); at != std::string::npos; at = arg.find(kOpen, at)) {
    const std::size_t close = arg.find('}', at);
    if (close == std::string::npos) break;
    const std::string name = arg.substr(at + kOpen.size(), close - at - kOpen.size());
    const auto own = env.find(name);
    const char* here = std::getenv(name.c_str());
    const std::string value = own != env.end() ? own->second : here ? here : "";
    arg.replace(at, close + 1 - at, value);
    at += value.size();
  }
  return arg;
}

}  // namespace minrepro
