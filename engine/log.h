// Progress for the user (stderr) and the run's log file.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace minrepro {

// This process's peak resident memory so far (VmHWM), in bytes; 0 where
// /proc does not say.
std::uint64_t ownPeakMemoryBytes();

class Log {
 public:
  explicit Log(bool quiet = false);
  void openFile(const std::filesystem::path& file);
  void info(const std::string& line);    // stderr (unless quiet) and file
  void detail(const std::string& line);  // file only
  // A live status line, redrawn in place on a terminal; not shown otherwise
  // (plain log lines carry the progress there).
  void status(const std::string& line);
  double elapsedSeconds() const;

 private:
  void clearStatus();
  bool quiet_;
  bool terminal_;
  bool status_shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::ofstream file_;
};

}  // namespace minrepro
