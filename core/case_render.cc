// Writing a case back as case.yaml (the archive's, the best-so-far's): the
// same keys loadCase reads (core/case_config.cc), with paths relative to
// the directory the file goes to, so that the copy runs where it lands.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <string_view>

#include "core/case_config.h"
#include "core/text_lines.h"

namespace minrepro {

namespace fs = std::filesystem;

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
  if (!c.sample_axes.empty() || c.sample_lists.empty()) {
    out << YAML::Key << "tensors" << YAML::Value << YAML::BeginMap;
    for (const SampleAxis& a : c.sample_axes) out << YAML::Key << a.tensor << YAML::Value << a.axis;
    out << YAML::EndMap;
  }
  if (!c.sample_lists.empty()) out << YAML::Key << "lists" << YAML::Value << YAML::Flow << c.sample_lists;
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
    if (!c.sequence.mask.empty()) out << YAML::Key << "mask" << YAML::Value << c.sequence.mask;
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
  out << YAML::Key << "invariants" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "dtype" << YAML::Value
      << i.dtype << YAML::Key << "layout" << YAML::Value << i.layout << YAML::Key << "operator" << YAML::Value << i.op
      << YAML::Key << "sample_axis" << YAML::Value << i.sample_axis << YAML::EndMap;
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

void emitTrial(YAML::Emitter& out, const CaseConfig& c, const fs::path& dir, const std::string& model_name) {
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
    out << YAML::Key << "diagnostic" << YAML::Value << diagnosticSettingNames()[static_cast<std::size_t>(c.diagnostic)];
  if (!c.preload.empty()) out << YAML::Key << "preload" << YAML::Value << YAML::Flow << c.preload;
  if (!c.files.empty()) out << YAML::Key << "files" << YAML::Value << YAML::Flow << c.files;
  if (!c.exclude_files.empty()) out << YAML::Key << "exclude_files" << YAML::Value << YAML::Flow << c.exclude_files;
  if (c.command) emitSwitches(out, c.command->switches);
  out << YAML::EndMap;
}

void emitFailure(YAML::Emitter& out, const ExpectedFailure& e) {
  if (!e.family && e.op.empty() && e.message_regex.empty() && !e.any_ending) return;
  out << YAML::Key << "failure" << YAML::Value << YAML::BeginMap;
  if (e.family) out << YAML::Key << "family" << YAML::Value << familyName(*e.family);
  if (!e.op.empty()) out << YAML::Key << "operator" << YAML::Value << e.op;
  if (!e.message_regex.empty()) out << YAML::Key << "message" << YAML::Value << e.message_regex;
  if (e.any_ending) out << YAML::Key << "ending" << YAML::Value << "any";
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
  for (const auto& [name, value] : c.context) out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
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
    if (arg.rfind(kCaseDir, 0) == 0) path = (config.base_dir / arg.substr(kCaseDir.size())).string();
    const auto rel = relativeUnder(path, config.base_dir);
    std::error_code ec;
    if (rel && fs::is_regular_file(config.base_dir / *rel, ec)) files.push_back(*rel);
  }
  return files;
}

namespace {

std::string renderCaseWith(const CaseConfig& config, const fs::path& dir, const std::string& batch_name,
                           const std::string& model_name, bool escape_non_ascii) {
  YAML::Emitter out;
  if (escape_non_ascii) out.SetOutputCharset(YAML::EscapeNonAscii);
  out << YAML::BeginMap;
  out << YAML::Key << "batch" << YAML::Value << batch_name;
  emitSamples(out, config);
  emitTrial(out, config, dir, model_name);
  emitFailure(out, config.expected);
  emitReduction(out, config);
  emitRest(out, config);
  out << YAML::EndMap;
  if (!out.good()) throw std::runtime_error("cannot write the case: " + out.GetLastError());
  return "# minrepro case; every key is described in configs/README.md\n" + std::string(out.c_str()) + "\n";
}

}  // namespace

std::string renderCase(const CaseConfig& config, const fs::path& dir, const std::string& batch_name,
                       const std::string& model_name) {
  std::string text = renderCaseWith(config, dir, batch_name, model_name, false);
  // A name from the batch holding a bidirectional or other hidden control
  // (U+202E) is shown reordered by an editor: such a case is written with
  // every character past ASCII escaped ("\u202E"), which reads back as the
  // same name.
  if (text::holdsHiddenControl(text)) text = renderCaseWith(config, dir, batch_name, model_name, true);
  return text;
}

}  // namespace minrepro
