#include "engine/trial_spec.h"

#include <cstdlib>
#include <regex>

#include "engine/case_branches.h"
#include "harness/trial_main.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string substitutePlaceholders(std::string arg, const fs::path& batch, const fs::path& work_dir,
                                   const fs::path& case_dir) {
  const std::pair<std::string, std::string> subs[] = {
      {"{batch}", batch.string()}, {"{workdir}", work_dir.string()}, {"{case_dir}", case_dir.string()}};
  for (const auto& [key, value] : subs) {
    for (auto pos = arg.find(key); pos != std::string::npos; pos = arg.find(key, pos + value.size()))
      arg.replace(pos, key.size(), value);
  }
  return arg;
}

namespace {

std::string withCaseDir(std::string value, const fs::path& case_dir) {
  constexpr std::string_view kKey = "{case_dir}";
  for (auto pos = value.find(kKey); pos != std::string::npos; pos = value.find(kKey, pos + case_dir.string().size()))
    value.replace(pos, kKey.size(), case_dir.string());
  return value;
}

// torch.compile's caches live under TMPDIR by default, which is each
// trial's own: every trial compiled from scratch (16-54 s a trial where a
// warm cache takes 6-10 s). They are keyed by the graph, its shapes and the
// settings, so sharing them between trials changes nothing a trial tests,
// as a user's own runs share /tmp/torchinductor_USER. Where the user or the
// case names a cache directory, it is theirs.
void shareCompileCaches(const CaseConfig& config, TrialSpec& spec) {
  const fs::path caches = fs::absolute(config.work_dir) / "compile-cache";
  for (const auto& [name, dir] :
       {std::pair{"TORCHINDUCTOR_CACHE_DIR", "inductor"}, std::pair{"TRITON_CACHE_DIR", "triton"}})
    if (!spec.env_set.contains(name) && std::getenv(name) == nullptr) spec.env_set[name] = (caches / dir).string();
}

}  // namespace

TrialSpec trialSpecFor(const CaseConfig& config, const std::string& trial_binary, const TrialInput& input) {
  TrialSpec spec;
  if (config.harness) {
    spec.argv = harnessArgv(trial_binary, withBranches(*config.harness, input.branches_off), input.batch.string());
  } else {
    const CommandTrial command = withBranches(*config.command, input.branches_off);
    // An archive's case names its withheld secrets: their values come from where this runs.
    const std::map<std::string, std::string> env = withWithheldFromHere(command.env);
    for (const auto& arg : command.argv)
      spec.argv.push_back(
          substituteEnvPlaceholders(substitutePlaceholders(arg, input.batch, input.dir, config.base_dir), env));
    // A value may name the case's directory (the archive's PYTHONPATH: {case_dir}/external/...).
    for (const auto& [name, value] : env) spec.env_set[name] = withCaseDir(value, config.base_dir);
  }
  // Determinism switches, recorded in the report: the case's seed, and the
  // trial's own number for trials that want a fresh seed each time.
  spec.env_set["MINREPRO_SEED"] = std::to_string(config.seed);
  spec.env_set["MINREPRO_TRIAL"] = std::to_string(input.number);
  spec.env_set["PYTHONHASHSEED"] = std::to_string(config.seed);
  if (config.command && config.share_compile_cache) shareCompileCaches(config, spec);
  if (config.deterministic) {
    spec.env_set["MINREPRO_DETERMINISTIC"] = "1";
    spec.env_set["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8";  // cuBLAS needs it for deterministic results
  }
  spec.work_dir = input.dir;
  spec.timeout = config.timeout;
  spec.address_space_limit_bytes = config.memory_limit_bytes;
  return spec;
}

bool isPythonProgram(const std::string& program) {
  static const std::regex kPython("python[0-9.]*");
  return std::regex_match(fs::path(program).filename().string(), kPython);
}

std::string defaultTrialBinary() { return besideSelf("minrepro-trial").string(); }

}  // namespace minrepro
