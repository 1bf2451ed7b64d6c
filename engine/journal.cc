#include "engine/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace minrepro {

namespace {
constexpr const char* kMagic = "minrepro-journal 1";
}

WorkDirLock::WorkDirLock(const fs::path& dir) {
  const fs::path file = dir / "lock";
  // The lock's pid is written into it: never through a link planted there
  // (a symbolic link, or a second name of a user's file), which minrepro
  // never makes; that name is replaced by a file of its own.
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  struct stat st {};
  if ((fd_ < 0 && errno == ELOOP) || (fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_nlink > 1)) {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(file.c_str());
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  if (fd_ < 0)
    throw BadInputError("cannot open " + file.string() + ": " + std::strerror(errno) +
                        " (is the work directory writable?)");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    const std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "unknown";
    throw BadInputError("the work directory " + dir.string() + " is in use by another minrepro run (pid " +
                        pid.substr(0, pid.find('\n')) + "); wait for it to end, or give this run its own --work-dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; a second run then names no holder.
  }
}

WorkDirLock::~WorkDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the file stays (removing it would race a waiting run)
}

Journal::Journal(const fs::path& dir, const std::string& identity, bool resume) {
  fs::create_directories(dir);
  const fs::path file = dir / "journal.txt";
  if (resume) {
    if (!fs::exists(file))
      throw BadInputError(file.string() + ": no journal to resume from; run without --resume to start afresh");
    load(file, identity);
  } else if (fs::exists(file)) {
    fs::rename(file, dir / "journal.txt.old");
    moved_earlier_aside_ = true;
  }
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw BadInputError(file.string() + ": cannot open the journal: " + std::strerror(errno));
  if (!resume)
    append(std::string(kMagic) + " " + identity);
  else
    append("resume");
}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

// A line is written with one write() and synced: after kill -9 the journal
// ends with whole lines, at most the last one torn (and then ignored).
void Journal::append(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw BadInputError(std::string("cannot write the journal: ") + std::strerror(errno));
  ::fdatasync(fd_);
}

void Journal::recordTrial(const JournalTrial& t) {
  append("trial " + t.candidate + " " + (t.matched ? "match" : "nomatch") + " " + t.summary);
}

void Journal::recordAccepted(const std::string& candidate, std::size_t samples, const std::string& selection) {
  append("accepted " + candidate + " " + std::to_string(samples) + " " + selection);
}

namespace {

// std::getline, but a line is kept only up to 64 KiB and the rest of it
// skipped: a journal is minrepro's own short lines, and a tampered one
// with a line of 300 MB took --resume to 700 MB (probe 25).
bool readLine(std::istream& in, std::string& line) {
  constexpr std::size_t kMaxLine = 64 * 1024;
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      if (line.empty()) in.setstate(std::ios::failbit);
      return !line.empty();
    }
    if (c == '\n') return true;
    if (line.size() < kMaxLine) line.push_back(static_cast<char>(c));
  }
}

}  // namespace

std::optional<std::string> Journal::lastAccepted(const fs::path& dir, const std::string& identity) {
  const fs::path file = dir / "journal.txt";
  std::ifstream in(file);
  std::string line;
  if (!in) throw BadInputError(file.string() + ": no journal here; give the work directory of the run (--work-dir)");
  if (!readLine(in, line) || line != std::string(kMagic) + " " + identity)
    throw BadInputError(file.string() + ": this journal belongs to another case or other settings (" +
                        line.substr(0, 80) + "); give the case and options of the run that wrote it");
  std::optional<std::string> last;
  while (readLine(in, line)) {
    if (in.eof() && !line.empty()) break;  // torn: the run was killed while writing it
    std::istringstream words(line);
    std::string kind, candidate, samples, selection;
    if (words >> kind >> candidate >> samples >> selection && kind == "accepted") last = selection;
  }
  return last;
}

void Journal::recordReference(const std::string& text) { append("reference " + text); }

void Journal::load(const fs::path& file, const std::string& identity) {
  std::ifstream in(file);
  std::string line;
  if (!readLine(in, line) || line != std::string(kMagic) + " " + identity)
    throw BadInputError(file.string() + ": this journal belongs to another case or other settings (" +
                        line.substr(0, 80) + "); run without --resume, or with the original case and options");
  while (readLine(in, line)) {
    if (in.eof() && !line.empty()) break;  // a torn last line (no newline): the trial did not finish
    if (line.rfind("reference ", 0) == 0 && loaded_reference_.empty()) loaded_reference_ = line.substr(10);
    std::istringstream words(line);
    std::string kind, candidate, verdict, family;
    words >> kind >> candidate >> verdict >> family;
    if (kind != "trial") continue;
    loaded_[candidate].push_back(verdict == "match");
    if (verdict != "match" && family != "pass" && family != "timeout") ++loaded_other_[candidate];
    ++loaded_trials_;
  }
}

}  // namespace minrepro
