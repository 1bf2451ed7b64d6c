// Progress for the user (stderr) and the run's log file.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>

namespace minrepro {

// This process's peak resident memory so far (VmHWM), in bytes; 0 where
// /proc does not say.
std::uint64_t ownPeakMemoryBytes();

// --progress: the status line on a terminal and, where stderr is a pipe or
// a file (a Slurm job's log, `| tee`), a plain "progress:" line every few
// seconds; never: neither; always: the periodic lines on a terminal too.
enum class ProgressMode { Never, Auto, Always };

// "never", "auto" or "always"; throws BadInputError naming --progress otherwise.
ProgressMode parseProgressMode(const std::string& text);

class Log {
 public:
  explicit Log(bool quiet = false);
  void openFile(const std::filesystem::path& file);
  void info(const std::string& line);    // stderr (unless quiet) and file
  void detail(const std::string& line);  // file only
  // Where the run stands: redrawn in place on a terminal; elsewhere a
  // "progress:" line at most every `progress_seconds` (stderr and file).
  void status(const std::string& line);
  void setProgress(ProgressMode mode, double seconds);
  // What info() and status() show on stderr, from the line the file gets:
  // a terminal's output ends up in CI logs and pasted issues, so the run
  // shows it without secrets (engine/archive/scrub.h, scrubSecretsOnly);
  // the file keeps the original.
  void setScreenFilter(std::function<std::string(const std::string&)> filter) { screen_ = std::move(filter); }
  double elapsedSeconds() const;

 private:
  void clearStatus();
  bool quiet_;
  bool terminal_;
  bool status_shown_ = false;
  ProgressMode progress_ = ProgressMode::Auto;
  double progress_seconds_ = 30;
  double last_progress_ = 0;  // elapsed seconds at the last periodic line
  std::chrono::steady_clock::time_point start_;
  std::ofstream file_;
  std::function<std::string(const std::string&)> screen_;
  std::string onScreen(const std::string& line) const { return screen_ ? screen_(line) : line; }
};

}  // namespace minrepro
