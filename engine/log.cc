#include "engine/log.h"

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace minrepro {

void Log::openFile(const std::filesystem::path& file) { file_.open(file, std::ios::app); }

double Log::elapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Log::info(const std::string& line) {
  std::ostringstream stamped;
  stamped << "[" << std::fixed << std::setprecision(1) << std::setw(7) << elapsedSeconds() << "s] " << line;
  if (!quiet_) std::cerr << "minrepro: " << line << std::endl;
  if (file_) file_ << stamped.str() << std::endl;
}

void Log::detail(const std::string& line) {
  if (file_) file_ << "[" << std::fixed << std::setprecision(1) << std::setw(7) << elapsedSeconds() << "s]   " << line << std::endl;
}

}  // namespace minrepro
