#include "engine/diagnostics.h"

#include <algorithm>
#include <cctype>

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
    case Backend::Cpu: return "CPU: no diagnostic variables (launches are already synchronous)";
    case Backend::Unknown: return "unknown backend: no diagnostic variables";
    case Backend::Cuda: name = "CUDA"; break;
    case Backend::Rocm: name = "ROCm"; break;
  }
  if (!backend.version.empty()) name += " " + backend.version;
  std::string line = name + ":";
  for (const auto& [key, value] : diagnosticEnvironment(backend)) line += " " + key + "=" + value;
  return line;
}

}  // namespace minrepro
