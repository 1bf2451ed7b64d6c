#include "engine/torch_versions.h"

#include <regex>

namespace minrepro {

namespace {

std::string valueOf(const std::vector<std::pair<std::string, std::string>>& env, const std::string& key) {
  for (const auto& [k, v] : env)
    if (k == key) return v;
  return "";
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
    out.push_back("minrepro's LibTorch is " + libtorch + " but the trials' Python runs PyTorch " + pytorch +
                  ": a LibTorch older than the PyTorch that wrote a batch may not read it, and candidates are "
                  "written by LibTorch");
  return out;
}

}  // namespace minrepro
