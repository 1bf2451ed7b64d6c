#include "engine/log.h"

#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/errors.h"
#include "core/text_lines.h"

namespace minrepro {

Log::Log(bool quiet)
    : quiet_(quiet), terminal_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

void Log::openFile(const std::filesystem::path& file) {
  file_.open(file, std::ios::app);
  file_ << "==== minrepro run" << std::endl;
}

double Log::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

namespace {
std::string stamp(double seconds) {
  std::ostringstream s;
  s << "[" << std::fixed << std::setprecision(1) << std::setw(7) << seconds << "s] ";
  return s.str();
}
}  // namespace

void Log::clearStatus() {
  if (status_shown_) std::cerr << "\r\033[K";
  status_shown_ = false;
}

void Log::info(const std::string& line) {
  if (!quiet_) {
    clearStatus();
    std::cerr << "minrepro: " << text::printable(onScreen(line)) << std::endl;
  }
  if (file_) file_ << stamp(elapsedSeconds()) << text::printable(line) << std::endl;
}

void Log::detail(const std::string& line) {
  if (file_) file_ << stamp(elapsedSeconds()) << "  " << text::printable(line) << std::endl;
}

ProgressMode parseProgressMode(const std::string& text) {
  if (text == "never") return ProgressMode::Never;
  if (text == "auto") return ProgressMode::Auto;
  if (text == "always") return ProgressMode::Always;
  throw BadInputError("--progress must be never, auto or always, found '" + text + "'");
}

void Log::setProgress(ProgressMode mode, double seconds) {
  progress_ = mode;
  progress_seconds_ = seconds;
}

void Log::status(const std::string& line) {
  if (quiet_ || progress_ == ProgressMode::Never) return;
  if (terminal_) {
    std::cerr << "\r\033[K" << text::printable(onScreen(line)) << std::flush;
    status_shown_ = true;
  }
  const double now = elapsedSeconds();
  if ((terminal_ && progress_ != ProgressMode::Always) || now - last_progress_ < progress_seconds_) return;
  last_progress_ = now;
  clearStatus();
  std::cerr << "minrepro: progress: " << text::printable(onScreen(line)) << std::endl;
  if (file_) file_ << stamp(now) << "progress: " << text::printable(line) << std::endl;
}

std::uint64_t ownPeakMemoryBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:  123456 kB"
  return 0;
}

}  // namespace minrepro
