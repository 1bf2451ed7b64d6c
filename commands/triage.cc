#include "commands/triage.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "commands/log_window.h"
#include "core/text_lines.h"
#include "engine/archive/scrub.h"

#include <sys/stat.h>

namespace minrepro {
namespace {

mode_t fileMode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode : 0;
}

// Where the 1-based line `number` starts; a line ends at the next '\n'.
std::size_t lineStart(const std::string& text, std::size_t number) {
  std::size_t start = 0;
  for (std::size_t line = 1; line < number && start != std::string::npos; ++line) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  return start == std::string::npos ? text.size() : start;
}

std::string lineAt(const std::string& text, std::size_t start) {
  const std::size_t end = text.find('\n', start);
  std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

bool containsAny(const std::string& text, std::initializer_list<std::string_view> parts) {
  for (auto part : parts)
    if (text.find(part) != std::string::npos) return true;
  return false;
}

std::string backendName(Backend backend) {
  switch (backend) {
    case Backend::Cuda:
      return "CUDA (NVIDIA)";
    case Backend::Rocm:
      return "ROCm (HIP)";
    default:
      return "not named by the log (CPU, or no GPU wording)";
  }
}

// A crash has no Python error to read: where it happened decides what to look at.
std::vector<std::string> signalSteps(const Triage& t) {
  std::vector<std::string> steps;
  if (t.signature.family != FailureFamily::Signal) return steps;
  const bool in_worker = t.where.find("DataLoader worker") != std::string::npos;
  if (in_worker && t.signature.signal_name == "SIGBUS")
    steps.push_back(
        "a bus error in a DataLoader worker is most often shared memory running out (check the size of "
        "/dev/shm; docker run --shm-size) or a memory-mapped file shrinking while it is read");
  if (in_worker)
    steps.push_back(
        "the crash is in a DataLoader worker: check the dataset's __getitem__ and the native code it "
        "calls (decoders, extensions) for the sample it was loading; rerun with num_workers=0 to get the "
        "crash in the main process, with its frames");
  if (t.user_frame.empty())
    steps.push_back(
        "rerun once with PYTHONFAULTHANDLER=1 (python -X faulthandler) to get the Python frames of "
        "the crash");
  return steps;
}

// docs/method.md, "Diagnostic mode", "Failure families", "ROCm": what to do next on this stack. ROCm keeps the cuda
// device name, so its switches must not be confused with NVIDIA's.
std::vector<std::string> nextSteps(const Triage& t) {
  std::vector<std::string> steps;
  if (t.signature.family == FailureFamily::DeviceAssert) {
    steps.push_back(
        "restart the process before anything else: after a device-side assert the process's GPU "
        "context is unusable (a restart fixes neither a bad target nor a bad index)");
    if (t.backend == Backend::Rocm)
      steps.push_back(
          "to move the error to its launch, rerun once with AMD_SERIALIZE_KERNEL=3 "
          "(HIP_LAUNCH_BLOCKING=1 on older ROCm); CUDA_LAUNCH_BLOCKING is NVIDIA's and does nothing here");
    else
      steps.push_back(
          "to move the error to its launch, rerun once with CUDA_LAUNCH_BLOCKING=1 (for diagnosis "
          "only; not on a ROCm stack)");
  }
  if (t.backend == Backend::Unknown && t.signature.family == FailureFamily::OutOfMemory)
    steps.push_back("this is host memory unless the message names the GPU");
  for (auto& step : signalSteps(t)) steps.push_back(std::move(step));
  if (t.where.rfind("rank ", 0) == 0 || t.where.rfind("local rank ", 0) == 0)
    steps.push_back("fix the error of " + t.where +
                    " first: the other ranks' timeouts and closed connections are "
                    "their waits for it");
  steps.push_back("reduce the failing batch to a minimal case: minrepro shrink --config case.yaml");
  return steps;
}

std::string shorten(const std::string& line) {
  constexpr std::size_t kShown = 300;  // a printed tensor on the error line is not worth reading
  return line.size() > kShown ? line.substr(0, kShown) + "..." : line;
}

// "2 collective timeouts (rank 1, rank 2), 1 launcher summary": the kinds set
// aside, in the order first met, with the processes they came from. A log of
// 80 000 ranks names the first few places of each kind and counts the rest,
// so the line stays readable and the count stays linear in the log.
std::string countKinds(const std::vector<SetAside>& set_aside) {
  constexpr std::size_t kPlacesNamed = 8;
  struct Kind {
    std::string name;
    std::size_t count = 0;
    std::vector<std::string> named_places;
    std::unordered_set<std::string> places;
  };
  std::vector<Kind> kinds;
  std::unordered_map<std::string, std::size_t> index_of;
  for (const SetAside& other : set_aside) {
    auto [at, is_new] = index_of.try_emplace(other.kind, kinds.size());
    if (is_new) kinds.emplace_back().name = other.kind;
    Kind& kind = kinds[at->second];
    ++kind.count;
    if (other.where.empty() || !kind.places.insert(other.where).second) continue;
    if (kind.named_places.size() < kPlacesNamed) kind.named_places.push_back(other.where);
  }
  std::string text;
  for (const Kind& kind : kinds) {
    text += (text.empty() ? "" : ", ") + std::to_string(kind.count) + " " + kind.name + (kind.count > 1 ? "s" : "");
    if (kind.named_places.empty()) continue;
    text += " (";
    for (std::size_t j = 0; j < kind.named_places.size(); ++j) text += (j ? ", " : "") + kind.named_places[j];
    if (kind.places.size() > kind.named_places.size())
      text += " and " + std::to_string(kind.places.size() - kind.named_places.size()) + " more";
    text += ")";
  }
  return text;
}

// What was read as a consequence of the first error, so that the rank-0
// timeout at the end of the log is seen for what it is.
void renderSetAside(std::ostream& out, const Triage& t, const std::string& source) {
  if (t.set_aside.empty()) {
    out << "set aside:           nothing (the first error is the only one in the log)\n";
    return;
  }
  out << "set aside:           " << t.set_aside.size()
      << " read as consequences of the first error: " << countKinds(t.set_aside) << "\n";
  constexpr std::size_t kListed = 8;
  for (std::size_t i = 0; i < t.set_aside.size() && i < kListed; ++i) {
    const SetAside& other = t.set_aside[i];
    out << "  " << source << ":" << other.line << (other.where.empty() ? "" : " (" + other.where + ")") << ": "
        << other.kind << ": " << shorten(other.summary) << "\n";
  }
  if (t.set_aside.size() > kListed) out << "  ... and " << t.set_aside.size() - kListed << " more\n";
  for (const SetAside& other : t.set_aside)
    if (other.kind == "launcher summary" && !t.where.empty() && other.where != t.where)
      out << "note: the launcher's \"Root Cause (first observed failure)\" names " << other.where
          << ", the first process to exit; the first error happened in " << t.where << "\n";
}

}  // namespace

Backend detectBackend(const text::Lines& lines) {
  for (const std::string& line : lines)
    if (const Backend b = detectBackend(line); b != Backend::Unknown) return b;
  return Backend::Unknown;
}

Backend detectBackend(const std::string& text) {
  if (containsAny(text, {"HIP error", "hipError", "HIP out of memory", "HIP kernel errors", ".hip:", "rocdevice",
                         "HSA_STATUS", "ROCm", "AMD_SERIALIZE_KERNEL", "HIP_LAUNCH_BLOCKING"}))
    return Backend::Rocm;
  if (containsAny(text, {"CUDA error", "cudaError", "CUDA out of memory", "CUDA kernel errors",
                         ".cu:", "cuda:", "CUDA_LAUNCH_BLOCKING", "NVIDIA", "no kernel image is available"}))
    return Backend::Cuda;
  return Backend::Unknown;
}

Triage triageStream(std::istream& in, std::size_t exact_bytes) {
  LogLines log = readLogBounded(in, exact_bytes);
  Triage t;
  t.cut_lines = log.cut_lines;
  t.dropped = log.dropped;
  t.not_read = log.not_read;
  t.first_not_read = log.first_not_read;
  t.last_not_read = log.last_not_read;
  t.backend = detectBackend(log.lines);
  const std::vector<std::size_t> numbers = std::move(log.numbers);
  static_cast<LogReading&>(t) = readLog(std::move(log.lines));
  const LogLines map{{}, numbers, 0, 0};
  t.first_line = map.numberInLog(t.first_line);
  for (SetAside& other : t.set_aside) other.line = map.numberInLog(other.line);
  return t;
}

Triage triageText(const std::string& text) {
  std::istringstream in(text);
  Triage t = triageStream(in);
  if (t.signature.failed()) t.first_line_text = lineAt(text, lineStart(text, t.first_line));
  return t;
}

namespace {
// What triage read of lines longer than kMaxLine; "" when none was.
std::string cutLinesNote(const Triage& t) {
  if (t.cut_lines == 0) return "";
  return "note: " + std::to_string(t.cut_lines) + " line(s) longer than " + std::to_string(text::kMaxLine) +
         " bytes were read in their first " + std::to_string(text::kMaxLine) + " bytes only\n";
}
}  // namespace

std::string renderTriage(const Triage& t, const std::string& source) {
  std::ostringstream out;
  if (!t.signature.failed()) {
    out << source << ": no error found (no traceback, uncaught exception, kernel assertion, fatal-signal report "
        << "or error line)\n";
    out << cutLinesNote(t);  // an error past a line's first bytes is not read
    return out.str();
  }
  const auto [check, avoid] = adviceFor(t.signature);
  out << "first error:         " << source << ":" << t.first_line << ": " << shorten(t.first_line_text) << "\n";
  if (!t.where.empty()) out << "in:                  " << t.where << "\n";
  out << "family:              " << familyName(t.signature.family) << "\n";
  if (t.signature.family == FailureFamily::Signal && !t.signature.signal_name.empty())
    out << "signal:              " << t.signature.signal_name << "\n";
  // torch.compile's errors name the stage that failed where others name an operator.
  out << (t.signature.family == FailureFamily::CompileError ? "compiler stage:      " : "suspect operator:    ")
      << (t.signature.op.empty() ? "(not named by the log)" : t.signature.op) << "\n"
      << "first message:       " << t.signature.message << "\n"
      << "open first:          " << (t.user_frame.empty() ? "(no frame of your code in the log)" : t.user_frame) << "\n"
      << "backend:             " << backendName(t.backend) << "\n"
      << "first check:         " << check << "\n"
      << "conclusion to avoid: " << avoid << "\n";
  renderSetAside(out, t, source);
  for (const auto& step : nextSteps(t)) out << "next: " << step << "\n";
  if (t.dropped > 0)
    out << "note: the log is over " << (kExactBytes >> 20) << " MiB: " << t.dropped << " line(s) more than " << kContext
        << " lines away from anything that reads like an error were skipped\n";
  if (t.not_read > 0)
    out << "note: the log holds more lines near errors than triage reads (" << ((kHeadBytes + kTailBytes) >> 20)
        << " MiB): " << t.not_read << " of them, lines " << t.first_not_read << " to " << t.last_not_read
        << ", were not read; the first " << (kHeadBytes >> 20) << " MiB, where the first error is, and the last "
        << (kTailBytes >> 20) << " MiB were\n";
  out << cutLinesNote(t);
  return out.str();
}

// The log's line `number` as written (rank and logger prefixes kept), read
// again from the file; "" when it cannot be.
std::string lineOfFile(const std::string& path, std::size_t number) {
  std::ifstream file(path, std::ios::binary);
  for (std::size_t skipped = 1; skipped < number && file; ++skipped)
    file.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  std::string line(text::kMaxLine, '\0');
  file.get(line.data(), static_cast<std::streamsize>(line.size() + 1), '\n');
  line.resize(file ? static_cast<std::size_t>(file.gcount()) : 0);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

int runTriage(const std::string& path, std::istream& in, std::ostream& out) {
  // The log held once, as lines of at most kMaxLine bytes (a training log
  // may be gigabytes, a line of it a megabyte of progress bar).
  Triage t;
  if (path == "-") {
    t = triageStream(in);
  } else {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)))
      throw BadInputError(path +
                          " is a device or a socket, not a log file; give a log file, or '-' with the log on "
                          "standard input");
    std::ifstream file(path, std::ios::binary);
    if (!file || std::filesystem::is_directory(path))
      throw BadInputError("cannot read " + path +
                          ": no such file or not readable; give a log file, or '-' to "
                          "read standard input");
    t = triageStream(file);
  }
  if (t.signature.failed() && path != "-" && S_ISREG(fileMode(path)))
    t.first_line_text = lineOfFile(path, t.first_line);
  // What triage prints is pasted into issues: a token or a URL's password
  // the log quotes is scrubbed, as shrink's and verify's lines are (probe 28).
  out << text::printable(scrubSecretsOnly(renderTriage(t, path == "-" ? "stdin" : path), machineScrubContext()));
  return t.signature.failed() ? 0 : 1;
}

}  // namespace minrepro
