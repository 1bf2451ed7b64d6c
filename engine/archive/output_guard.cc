// Where the archive may be written (see the header for why).
#include "engine/archive/output_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "engine/archive/tar_gz.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// The files a run reads, each with what it is to the user.
std::vector<std::pair<fs::path, std::string>> filesTheRunReads(const CaseConfig& config) {
  std::vector<std::pair<fs::path, std::string>> files = {{config.case_file, "the case file"},
                                                         {config.batch, "the failing batch"}};
  if (config.harness) files.push_back({config.harness->model, "the model"});
  for (const fs::path& file : commandCaseFiles(config))
    files.push_back({config.base_dir / file, "a file the trial reads"});
  if (config.command)
    for (const std::string& given : config.command->argv) {
      const std::string arg = argumentPath(given);
      if (!arg.empty() && arg.front() == '/') files.push_back({arg, "a file the trial command names"});
    }
  return files;
}

void checkDirectoryWritable(const fs::path& output, const std::string& what) {
  const fs::path dir = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw BadInputError(output.string() + ": the directory of " + what + ", " + dir.string() +
                        ", does not exist; create it, or give another path");
  // The file is written to a temp file beside it, then renamed: that must work.
  const fs::path probe = dir / (".minrepro-output-check-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw BadInputError(output.string() + ": cannot write in " + dir.string() + " (" + std::strerror(errno) +
                        "); give a path where this user may write");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void checkOutputPath(const fs::path& output, const std::string& what,
                     const std::vector<std::pair<fs::path, std::string>>& inputs, bool force, bool ours,
                     const std::string& existing) {
  const auto refuse = [&](const std::string& why) { return output.string() + ": " + what + " " + why; };
  struct stat st {};
  const bool exists = ::lstat(output.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw BadInputError(refuse("is a directory; give a file's path inside it"));
  if (exists && S_ISLNK(st.st_mode))
    throw BadInputError(refuse("is a symbolic link; give the path of a new or regular file instead"));
  if (exists && !S_ISREG(st.st_mode))
    throw BadInputError(refuse("is not a regular file (a device, FIFO or socket); give a new file's path"));
  checkDirectoryWritable(output, what);
  if (!exists) return;
  std::error_code ec;
  for (const auto& [file, is] : inputs)
    if (fs::equivalent(output, file, ec))
      throw BadInputError(refuse("is " + is + " (" + file.string() +
                                 "): writing there would destroy it, even with --force; give another path"));
  if (!force && !ours) throw BadInputError(refuse(existing + "; give another path, or --force to replace it"));
}

std::string argumentPath(const std::string& arg) {
  const auto eq = arg.find('=');
  return arg.rfind("-", 0) == 0 && eq != std::string::npos ? arg.substr(eq + 1) : arg;
}

void checkArchiveOutput(const CaseConfig& config, bool force) {
  const fs::path& output = config.output;
  struct stat st {};
  const bool exists = ::lstat(output.c_str(), &st) == 0;
  const bool regular = exists && S_ISREG(st.st_mode);
  if (exists && S_ISDIR(st.st_mode))
    throw BadInputError(output.string() + ": the archive (output or --output) is a directory; give a file name, e.g. " +
                        (output / "repro.tar.gz").string());
  checkOutputPath(output, "the archive (output or --output)", filesTheRunReads(config), force,
                  regular && madeByMinrepro(output), "exists and is not an archive minrepro wrote");
}

std::string outputTakenDuringRun(const fs::path& output, bool force) {
  struct stat st {};
  if (::lstat(output.c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode)) return "is now a symbolic link";
  if (!S_ISREG(st.st_mode)) return "is now not a regular file";
  if (!force && !madeByMinrepro(output)) return "now holds a file that is not an archive minrepro wrote";
  return "";
}

}  // namespace minrepro
