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
    for (const std::string& arg : config.command->argv)
      if (!arg.empty() && arg.front() == '/') files.push_back({arg, "a file the trial command names"});
  return files;
}

std::string refuse(const fs::path& output, const std::string& why) {
  return output.string() + ": the archive (output or --output) " + why;
}

void checkDirectoryWritable(const fs::path& output) {
  const fs::path dir = output.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw BadInputError(output.string() + ": the archive's directory " + dir.string() +
                        " does not exist; create it, or give another output or --output");
  // The archive is written to a temp file beside it, then renamed: that must work.
  const fs::path probe = dir / (".minrepro-output-check-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw BadInputError(output.string() + ": cannot write in " + dir.string() + " (" + std::strerror(errno) +
                        "); give an output or --output where this user may write");
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void checkArchiveOutput(const CaseConfig& config, bool force) {
  const fs::path& output = config.output;
  struct stat st {};
  const bool exists = ::lstat(output.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    throw BadInputError(refuse(output, "is a directory; give a file name, e.g. " + (output / "repro.tar.gz").string()));
  if (exists && S_ISLNK(st.st_mode))
    throw BadInputError(refuse(output, "is a symbolic link; give the path of a new or regular file instead"));
  if (exists && !S_ISREG(st.st_mode))
    throw BadInputError(refuse(output, "is not a regular file (a device, FIFO or socket); give a new file's path"));
  checkDirectoryWritable(output);
  if (!exists) return;
  std::error_code ec;
  for (const auto& [file, what] : filesTheRunReads(config))
    if (fs::equivalent(output, file, ec))
      throw BadInputError(refuse(output, "is " + what + " (" + file.string() +
                                             "): writing the archive there would destroy it; give another output "
                                             "or --output, e.g. " +
                                             (output.parent_path() / "repro.tar.gz").string()));
  if (!force && !madeByMinrepro(output))
    throw BadInputError(refuse(output,
                               "exists and is not an archive minrepro wrote; give another output or "
                               "--output, or --force to replace it"));
}

}  // namespace minrepro
