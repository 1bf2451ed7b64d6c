// Free space and the error of a full file system (see the header for why).
#include "core/disk_space.h"

#include "core/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <system_error>

namespace minrepro {

namespace fs = std::filesystem;

std::optional<std::uintmax_t> availableBytes(const fs::path& path) {
  fs::path at = path.empty() ? fs::current_path() : fs::absolute(path);
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  const fs::space_info info = fs::space(at, ec);
  if (ec) return std::nullopt;
  return info.available;
}

std::string spaceText(std::uintmax_t bytes) {
  std::ostringstream text;
  const auto show = [&](double value, const char* unit) {
    text << std::fixed << std::setprecision(value < 10 ? 1 : 0) << value << " " << unit;
  };
  if (bytes < 1'000'000)
    text << (bytes + 999) / 1000 << " KB";
  else if (bytes < 1'000'000'000)
    show(static_cast<double>(bytes) / 1e6, "MB");
  else
    show(static_cast<double>(bytes) / 1e9, "GB");
  return text.str();
}

namespace {

std::string fullMessage(const fs::path& path, const std::string& writing, const std::string& to_do) {
  const std::optional<std::uintmax_t> free = availableBytes(path);
  return "no space left on the file system of " + path.string() + " (" +
         (free ? spaceText(*free) + " free" : std::string("free space unknown")) + ") " + writing + ": " + to_do;
}

}  // namespace

DiskFullError::DiskFullError(const fs::path& path, const std::string& writing, const std::string& to_do)
    : Error(ExitStatus::TrialsCannotStart, fullMessage(path, writing, to_do)) {}

void requireSpace(const fs::path& path, std::uintmax_t needed, const std::string& what_for, const std::string& to_do) {
  const std::optional<std::uintmax_t> free = availableBytes(path);
  if (free && *free < needed) throw DiskFullError(path, "for " + what_for + " (" + spaceText(needed) + ")", to_do);
}

void requireRoomAfterRun(const fs::path& run_dir, const std::string& what_ran) {
  constexpr std::uintmax_t kRoomForARun = 1 << 20;
  const std::optional<std::uintmax_t> free = availableBytes(run_dir);
  if (!free || *free >= kRoomForARun) return;
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  const fs::path full = !ec && isWithin(run_dir, tmp) ? tmp : run_dir.parent_path();
  throw DiskFullError(full, "when " + what_ran + " ended",
                      "free space there, or set TMPDIR to a directory with room; no verdict is given");
}

void requireUsableTmpdir() {
  const char* value = std::getenv("TMPDIR");
  if (value == nullptr || *value == '\0') return;
  const fs::path dir(value);
  std::error_code ec;
  std::string wrong;
  if (!fs::exists(dir, ec))
    wrong = "does not exist";
  else if (!fs::is_directory(dir, ec))
    wrong = "is not a directory";
  else if (::access(dir.c_str(), W_OK | X_OK) != 0)
    wrong = "cannot be written into";
  if (!wrong.empty())
    throw Error(ExitStatus::TrialsCannotStart, "TMPDIR=" + dir.string() + " " + wrong +
                                                   ": the archive is extracted and run there; set TMPDIR to a "
                                                   "writable directory, or unset it");
}

}  // namespace minrepro
