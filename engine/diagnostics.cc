#include "engine/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <tuple>

namespace minrepro {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The word starting at `at` must be a whole word ("cuda" in "cuda 12.1", not in "nocuda").
bool wordAt(const std::string& text, std::size_t at, std::size_t len) {
  const auto isWordChar = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (at > 0 && isWordChar(text[at - 1])) return false;
  return at + len >= text.size() || !std::isalpha(static_cast<unsigned char>(text[at + len]));
}

// The version after the word: "cuda 12.1" -> "12.1", "cuda12.1" -> "12.1".
std::string versionAfter(const std::string& original, std::size_t end) {
  std::size_t i = end;
  while (i < original.size() && (original[i] == ' ' || original[i] == '\t' || original[i] == ':')) ++i;
  std::size_t j = i;
  while (j < original.size() && !std::isspace(static_cast<unsigned char>(original[j])) && original[j] != ',' &&
         original[j] != ';' && original[j] != ')')
    ++j;
  const std::string v = original.substr(i, j - i);
  return !v.empty() && std::isdigit(static_cast<unsigned char>(v[0])) ? v : std::string();
}

// Finds the first whole-word occurrence of any of `words`; returns the version after it.
bool findWord(const std::string& text, const std::string& original, std::initializer_list<std::string_view> words,
              std::string* version) {
  for (std::string_view w : words) {
    for (std::size_t at = text.find(w); at != std::string::npos; at = text.find(w, at + 1)) {
      if (!wordAt(text, at, w.size())) continue;
      *version = versionAfter(original, at + w.size());
      return true;
    }
  }
  return false;
}

}  // namespace

BackendInfo parseBackend(std::string_view text) {
  const std::string original(text);
  const std::string t = lower(text);
  BackendInfo info;
  if (findWord(t, original, {"rocm", "hip"}, &info.version)) {
    info.kind = Backend::Rocm;
  } else if (findWord(t, original, {"cuda"}, &info.version)) {
    info.kind = Backend::Cuda;
  } else if (findWord(t, original, {"cpu"}, &info.version)) {
    info.kind = Backend::Cpu;
    info.version.clear();
  }
  return info;
}

BackendInfo backendFromContext(const std::map<std::string, std::string>& context) {
  if (auto it = context.find("backend"); it != context.end()) {
    BackendInfo info = parseBackend(it->second);
    if (info.kind != Backend::Unknown) return info;
  }
  if (auto it = context.find("torch_build"); it != context.end()) {
    BackendInfo info = parseBackend(it->second);
    if (info.kind == Backend::Rocm) return info;
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> diagnosticEnvironment(const BackendInfo& backend) {
  switch (backend.kind) {
    case Backend::Cuda:
      return {{"CUDA_LAUNCH_BLOCKING", "1"}};
    case Backend::Rocm:
      // Wait before and after every kernel and copy; serialize kernel enqueue.
      return {{"AMD_SERIALIZE_KERNEL", "3"}, {"AMD_SERIALIZE_COPY", "3"}, {"HIP_LAUNCH_BLOCKING", "1"}};
    case Backend::Cpu:
    case Backend::Unknown:
      return {};
  }
  return {};
}

std::string describeDiagnosticMode(const BackendInfo& backend) {
  std::string name;
  switch (backend.kind) {
    case Backend::Cpu:
      return "CPU: no diagnostic variables (launches are already synchronous)";
    case Backend::Unknown:
      return "unknown backend: no diagnostic variables";
    case Backend::Cuda:
      name = "CUDA";
      break;
    case Backend::Rocm:
      name = "ROCm";
      break;
  }
  if (!backend.version.empty()) name += " " + backend.version;
  std::string line = name + ":";
  for (const auto& [key, value] : diagnosticEnvironment(backend)) line += " " + key + "=" + value;
  return line;
}

BackendInfo detectMachineBackend(const std::filesystem::path& dev_root) {
  std::error_code ec;
  const bool rocm = std::filesystem::exists(dev_root / "kfd", ec);
  const bool nvidia =
      std::filesystem::exists(dev_root / "nvidiactl", ec) || std::filesystem::exists(dev_root / "nvidia0", ec);
  if (rocm && nvidia) return {};
  if (rocm) return {Backend::Rocm, ""};
  if (nvidia) return {Backend::Cuda, ""};
  return {Backend::Cpu, ""};
}

std::string DiagnosticPlan::describe() const {
  if (env.empty()) return "none (" + why + ")";
  std::string line;
  for (const auto& [key, value] : env) line += (line.empty() ? "" : " ") + key + "=" + value;
  return line + " (" + why + ")";
}

std::string backendName(const BackendInfo& b) {
  switch (b.kind) {
    case Backend::Cpu:
      return "CPU";
    case Backend::Cuda:
      return "CUDA" + (b.version.empty() ? "" : " " + b.version);
    case Backend::Rocm:
      return "ROCm" + (b.version.empty() ? "" : " " + b.version);
    case Backend::Unknown:
      break;
  }
  return "unknown backend";
}

namespace {

// The captured context's backend, else this machine's, with where it came from.
std::pair<BackendInfo, std::string> recordedOrDetected(const CaseConfig& config,
                                                       const std::filesystem::path& dev_root) {
  const BackendInfo recorded = backendFromContext(config.context);
  if (recorded.kind != Backend::Unknown)
    return {recorded, "backend " + backendName(recorded) + " from the captured context"};
  const BackendInfo detected = detectMachineBackend(dev_root);
  if (detected.kind == Backend::Unknown)
    return {detected, "no backend in the case's context, and this machine has both NVIDIA and ROCm devices"};
  return {detected, "no backend in the case's context; " + backendName(detected) + " detected on this machine"};
}

}  // namespace

DiagnosticPlan planDiagnostics(const CaseConfig& config, const std::filesystem::path& dev_root) {
  DiagnosticPlan plan;
  switch (config.diagnostic) {
    case DiagnosticSetting::Off:
      plan.why = "trial.diagnostic: off";
      return plan;
    case DiagnosticSetting::Cuda:
    case DiagnosticSetting::Rocm:
      plan.backend.kind = config.diagnostic == DiagnosticSetting::Cuda ? Backend::Cuda : Backend::Rocm;
      plan.why = "trial.diagnostic: " + std::string(plan.backend.kind == Backend::Cuda ? "cuda" : "rocm");
      break;
    case DiagnosticSetting::Auto:
      if (config.harness) {
        // minrepro-trial never moves the batch or the model to a device.
        plan.backend.kind = Backend::Cpu;
        plan.why = "auto: the built-in harness runs on the CPU";
        return plan;
      }
      std::tie(plan.backend, plan.why) = recordedOrDetected(config, dev_root);
      plan.why = "auto: " + plan.why;
      break;
    case DiagnosticSetting::On:
      std::tie(plan.backend, plan.why) = recordedOrDetected(config, dev_root);
      plan.why = "on: " + plan.why;
      if (diagnosticEnvironment(plan.backend).empty())
        throw BadInputError(config.case_file.string() + ": trial.diagnostic: on, but the backend is " +
                            backendName(plan.backend) + " (" + plan.why.substr(4) +
                            "), which has no diagnostic variables; write 'auto' or 'off', or name the backend "
                            "('cuda' or 'rocm')");
      break;
  }
  plan.env = diagnosticEnvironment(plan.backend);
  return plan;
}

const std::vector<std::string>& diagnosticVariables() {
  static const std::vector<std::string> names = {"CUDA_LAUNCH_BLOCKING",       "AMD_SERIALIZE_KERNEL",
                                                 "AMD_SERIALIZE_COPY",         "HIP_LAUNCH_BLOCKING",
                                                 "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_NO_CUDA_MEMORY_CACHING",
                                                 "TORCH_USE_CUDA_DSA",         "CUDA_DEVICE_WAITS_ON_EXCEPTION"};
  return names;
}

void removeDiagnosticVariables(TrialSpec& spec) {
  for (const std::string& name : diagnosticVariables()) {
    spec.env_set.erase(name);
    spec.env_unset.push_back(name);
  }
}

}  // namespace minrepro
