#include "engine/torch_versions.h"

#include <cstdlib>
#include <regex>
#include <sstream>

#include "core/process/process.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

std::string valueOf(const std::vector<std::pair<std::string, std::string>>& env, const std::string& key) {
  for (const auto& [k, v] : env)
    if (k == key) return v;
  return "";
}

// Whether version a's major.minor comes before b's ("1.13" before "2.13").
bool olderMinor(const std::string& a, const std::string& b) {
  const auto parts = [](const std::string& v) {
    const std::string minor = torchMinorVersion(v);
    const auto dot = minor.find('.');
    return std::pair<int, int>{std::stoi(minor.substr(0, dot)), std::stoi(minor.substr(dot + 1))};
  };
  return parts(a) < parts(b);
}

}  // namespace

std::string torchMinorVersion(const std::string& version) {
  static const std::regex kMinor(R"((\d+)\.(\d+))");
  std::smatch m;
  return std::regex_search(version, m, kMinor) ? m[1].str() + "." + m[2].str() : "";
}

std::vector<std::string> torchVersionMismatches(const std::map<std::string, std::string>& context,
                                                const std::vector<std::pair<std::string, std::string>>& environment,
                                                bool builtin_harness) {
  const std::string libtorch = valueOf(environment, "LibTorch");
  const std::string pytorch = valueOf(environment, "PyTorch");
  const std::string python = valueOf(environment, "PyTorch from");
  const bool python_has_torch = !torchMinorVersion(pytorch).empty();
  std::string captured;
  std::string captured_what;
  if (const auto it = context.find("pytorch"); it != context.end())
    captured = it->second, captured_what = "PyTorch";
  else if (const auto lt = context.find("libtorch"); lt != context.end())
    captured = lt->second, captured_what = "LibTorch";

  std::vector<std::string> out;
  const std::string trials = builtin_harness ? libtorch : pytorch;
  const std::string trials_what =
      builtin_harness ? "LibTorch " + libtorch + " (the built-in harness)" : "PyTorch " + pytorch + " (" + python + ")";
  const std::string caught = torchMinorVersion(captured);
  if (!caught.empty() && !torchMinorVersion(trials).empty() && caught != torchMinorVersion(trials))
    out.push_back("the case was captured with " + captured_what + " " + captured + " but the trials run " +
                  trials_what +
                  ": an error may differ between versions, or an API be missing (build minrepro against the torch "
                  "you train with, or give the trial command that torch's Python)");
  if (!builtin_harness && python_has_torch && !torchMinorVersion(libtorch).empty() &&
      torchMinorVersion(libtorch) != torchMinorVersion(pytorch))
    out.push_back("minrepro's LibTorch is " + libtorch + " but the trials' Python runs PyTorch " + pytorch + ": " +
                  (olderMinor(libtorch, pytorch)
                       ? "LibTorch reads the batch and may not read what a newer PyTorch saved"
                       : "LibTorch writes the candidates and the trials' older PyTorch may not read them") +
                  " (build minrepro against the torch the trials run)");
  return out;
}

std::vector<std::pair<std::string, std::string>> pythonTorchVersions(const std::string& python,
                                                                     const fs::path& scratch) {
  std::vector<std::pair<std::string, std::string>> env;
  TrialSpec spec;
  spec.argv = {python, "-c",
               "import sys, platform, torch\n"
               "print('Python', platform.python_version())\n"
               "print('PyTorch', torch.__version__)\n"
               "print('PyTorch CUDA', torch.version.cuda or 'none')\n"
               "print('PyTorch HIP (ROCm)', torch.version.hip or 'none')\n"};
  spec.work_dir = scratch;
  spec.timeout = std::chrono::seconds(60);
  const TrialOutcome out = LocalExecutor().run(spec);
  std::istringstream lines(out.stdout_text);
  for (std::string line; std::getline(lines, line);) {
    const auto space = line.rfind(' ');
    if (space != std::string::npos) env.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  if (!out.passed()) env.emplace_back("PyTorch", "not importable by " + python);
  env.emplace_back("PyTorch from", python);
  std::error_code ec;
  fs::remove_all(spec.work_dir, ec);
  return env;
}

std::optional<std::string> torchVersionOf(const std::string& python, const fs::path& scratch) {
  for (const auto& [name, value] : pythonTorchVersions(python, scratch))
    if (name == "PyTorch" && value.rfind("not importable", 0) != 0) return value;
  return std::nullopt;
}

namespace {

// "<home>/..." as scrubbed in the archive: this user's home, so that an
// archive verified by whoever made it finds the interpreter again.
std::string unscrubbedHome(const std::string& path) {
  const char* home = std::getenv("HOME");
  if (path.rfind("<home>", 0) != 0 || !home || !*home) return path;
  return home + path.substr(6);
}

bool sameMinor(const std::optional<std::string>& a, const std::string& b) {
  return a && !torchMinorVersion(*a).empty() && torchMinorVersion(*a) == torchMinorVersion(b);
}

}  // namespace

TorchChoice chooseArchiveTorch(const std::string& recorded_python, const std::string& recorded_torch,
                               const std::optional<std::string>& given_python, const std::string& default_python,
                               const fs::path& scratch, bool trust_recorded) {
  TorchChoice c;
  c.python = given_python.value_or(default_python);
  if (torchMinorVersion(recorded_torch).empty()) return c;  // an archive that records no torch: as before
  const auto runs_with = [&](const std::string& python, const std::optional<std::string>& torch) {
    c.python = python;
    c.running_torch = torch.value_or("none");
    c.matches = sameMinor(torch, recorded_torch);
  };
  if (given_python) {
    runs_with(*given_python, torchVersionOf(*given_python, scratch / "given"));
  } else {
    std::error_code ec;
    const std::string recorded = unscrubbedHome(recorded_python);
    std::optional<std::string> recorded_version;
    const bool on_path = recorded.find('/') == std::string::npos;  // "python3": looked up on PATH
    if (trust_recorded && !recorded.empty() && (on_path || fs::exists(recorded, ec)))
      recorded_version = torchVersionOf(recorded, scratch / "recorded");
    const std::optional<std::string> default_version = recorded == default_python && recorded_version
                                                           ? recorded_version
                                                           : torchVersionOf(default_python, scratch / "default");
    if (sameMinor(recorded_version, recorded_torch))
      runs_with(recorded, recorded_version);
    else
      runs_with(default_python, default_version);
  }
  c.line = c.matches ? "runs with PyTorch " + c.running_torch + " (" + c.python + "), as the archive was made"
                     : "the archive was made with PyTorch " + recorded_torch + " (" + recorded_python +
                           ") but runs with PyTorch " + c.running_torch + " (" + c.python +
                           (given_python     ? "): --python names another torch"
                            : trust_recorded ? "): no Python with that torch was found (the recorded one, the build's)"
                                             : "): the recorded Python is not started for an archive made elsewhere "
                                               "or changed since, and the build's has another torch") +
                           "; a run that does not reproduce may show the torch's difference, not a fix (give "
                           "--python a Python with PyTorch " +
                           torchMinorVersion(recorded_torch) + ")";
  c.checked = true;
  return c;
}

}  // namespace minrepro
