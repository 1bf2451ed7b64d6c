// Progress lines for the user (stderr) and the run's log file.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

namespace minrepro {

class Log {
 public:
  explicit Log(bool quiet = false) : quiet_(quiet), start_(std::chrono::steady_clock::now()) {}
  void openFile(const std::filesystem::path& file);
  void info(const std::string& line);   // stderr (unless quiet) and file
  void detail(const std::string& line);  // file only
  double elapsedSeconds() const;

 private:
  bool quiet_;
  std::chrono::steady_clock::time_point start_;
  std::ofstream file_;
};

}  // namespace minrepro
