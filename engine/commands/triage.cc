#include "engine/commands/triage.h"

#include <array>
#include <filesystem>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>



namespace minrepro {
namespace {

// Offsets where each line starts; a line ends at the next '\n'.
std::vector<std::size_t> lineStarts(const std::string& text) {
  std::vector<std::size_t> starts{0};
  for (auto at = text.find('\n'); at != std::string::npos && at + 1 < text.size(); at = text.find('\n', at + 1))
    starts.push_back(at + 1);
  return starts;
}

std::string lineAt(const std::string& text, std::size_t start) {
  const std::size_t end = text.find('\n', start);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

bool isBlank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// The classifier returns the first error it meets while reading line by
// line, and every reader decides from the line where the error starts (the
// header of a traceback, the terminate line, the kernel assertion...). So
// "the first k lines hold an error" is false up to that line and true from
// it on: a binary search over prefixes finds it without a second parser.
std::size_t firstErrorLineIndex(const std::string& text, const std::vector<std::size_t>& starts) {
  std::size_t lo = 0, hi = starts.size() - 1;  // the error starts in line [lo, hi]
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const std::size_t prefix_end = mid + 1 < starts.size() ? starts[mid + 1] : text.size();
    if (classifyText(text.substr(0, prefix_end)).failed()) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

// A bare LibTorch what() is only recognised at its "Exception raised from"
// line; the message itself is the line above it.
std::size_t messageLineFor(const std::string& text, const std::vector<std::size_t>& starts, std::size_t index) {
  if (lineAt(text, starts[index]).rfind("Exception raised from ", 0) != 0) return index;
  for (std::size_t i = index; i-- > 0;)
    if (!isBlank(lineAt(text, starts[i]))) return i;
  return index;
}

bool containsAny(const std::string& text, std::initializer_list<std::string_view> parts) {
  for (auto part : parts)
    if (text.find(part) != std::string::npos) return true;
  return false;
}

std::string backendName(Backend backend) {
  switch (backend) {
    case Backend::Cuda: return "CUDA (NVIDIA)";
    case Backend::Rocm: return "ROCm (HIP)";
    default: return "not named by the log (CPU, or no GPU wording)";
  }
}

// docs/method.md, "Diagnostic mode", "Failure families", "ROCm": what to do next on this stack. ROCm keeps the cuda
// device name, so its switches must not be confused with NVIDIA's.
std::vector<std::string> nextSteps(const Triage& t) {
  std::vector<std::string> steps;
  if (t.signature.family == FailureFamily::DeviceAssert) {
    steps.push_back("restart the process before anything else: after a device-side assert the process's GPU "
                    "context is unusable (a restart fixes neither a bad target nor a bad index)");
    if (t.backend == Backend::Rocm)
      steps.push_back("to move the error to its launch, rerun once with AMD_SERIALIZE_KERNEL=3 "
                      "(HIP_LAUNCH_BLOCKING=1 on older ROCm); CUDA_LAUNCH_BLOCKING is NVIDIA's and does nothing here");
    else
      steps.push_back("to move the error to its launch, rerun once with CUDA_LAUNCH_BLOCKING=1 (for diagnosis "
                      "only; not on a ROCm stack)");
  }
  if (t.backend == Backend::Unknown && t.signature.family == FailureFamily::OutOfMemory)
    steps.push_back("this is host memory unless the message names the GPU");
  steps.push_back("reduce the failing batch to a minimal case: minrepro shrink --config case.yaml");
  return steps;
}

// A log has no exit status, but the fatal-signal reports of Python's
// faulthandler and of the shell say how the process died; the classifier
// (which sees the signal itself in a trial) has nothing to read there.
std::optional<std::size_t> fatalSignalLine(const std::string& text, const std::vector<std::size_t>& starts) {
  static const std::array<std::string_view, 6> kReports = {
      "Fatal Python error: Segmentation fault", "Fatal Python error: Aborted", "Fatal Python error: Bus error",
      "Segmentation fault (core dumped)",       "Aborted (core dumped)",       "Bus error (core dumped)"};
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::string line = lineAt(text, starts[i]);
    for (auto report : kReports)
      if (line.find(report) != std::string::npos) return i;
  }
  return std::nullopt;
}

}  // namespace

Backend detectBackend(const std::string& text) {
  if (containsAny(text, {"HIP error", "hipError", "HIP out of memory", "HIP kernel errors", ".hip:", "rocdevice",
                         "HSA_STATUS", "ROCm", "AMD_SERIALIZE_KERNEL", "HIP_LAUNCH_BLOCKING"}))
    return Backend::Rocm;
  if (containsAny(text, {"CUDA error", "cudaError", "CUDA out of memory", "CUDA kernel errors", ".cu:", "cuda:",
                         "CUDA_LAUNCH_BLOCKING", "NVIDIA", "no kernel image is available"}))
    return Backend::Cuda;
  return Backend::Unknown;
}

Triage triageText(const std::string& text) {
  Triage t;
  t.signature = classifyText(text);
  t.backend = detectBackend(text);
  const std::vector<std::size_t> starts = lineStarts(text);
  if (!t.signature.failed()) {
    if (const auto line = fatalSignalLine(text, starts)) {
      t.signature.family = FailureFamily::Signal;
      t.first_line = *line + 1;
      t.first_line_text = lineAt(text, starts[*line]);
      t.signature.message = normalizeMessage(t.first_line_text);
    }
    return t;
  }
  const std::size_t index = messageLineFor(text, starts, firstErrorLineIndex(text, starts));
  t.first_line = index + 1;
  t.first_line_text = lineAt(text, starts[index]);
  return t;
}

std::string renderTriage(const Triage& t, const std::string& source) {
  std::ostringstream out;
  if (!t.signature.failed()) {
    out << source << ": no error found (no traceback, uncaught exception, kernel assertion or error line)\n";
    return out.str();
  }
  const auto [check, avoid] = familyAdvice(t.signature.family);
  constexpr std::size_t kShown = 300;  // a printed tensor on the error line is not worth reading
  const std::string shown = t.first_line_text.size() > kShown ? t.first_line_text.substr(0, kShown) + "..."
                                                               : t.first_line_text;
  out << "first error:         " << source << ":" << t.first_line << ": " << shown << "\n"
      << "family:              " << familyName(t.signature.family) << "\n"
      << "suspect operator:    " << (t.signature.op.empty() ? "(not named by the log)" : t.signature.op) << "\n"
      << "first message:       " << t.signature.message << "\n"
      << "backend:             " << backendName(t.backend) << "\n"
      << "first check:         " << check << "\n"
      << "conclusion to avoid: " << avoid << "\n"
      << "later messages are read as consequences of this first error, not as causes\n";
  for (const auto& step : nextSteps(t)) out << "next: " << step << "\n";
  return out.str();
}

int runTriage(const std::string& path, std::istream& in, std::ostream& out) {
  std::ostringstream text;
  if (path == "-") {
    text << in.rdbuf();
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file || std::filesystem::is_directory(path))
      throw BadInputError("cannot read " + path + ": no such file or not readable; give a log file, or '-' to "
                          "read standard input");
    text << file.rdbuf();
  }
  const Triage t = triageText(text.str());
  out << renderTriage(t, path == "-" ? "stdin" : path);
  return t.signature.failed() ? 0 : 1;
}

}  // namespace minrepro
