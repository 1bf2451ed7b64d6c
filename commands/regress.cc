#include "commands/regress.h"

#include "core/case_config.h"
#include "core/disk_space.h"
#include "core/errors.h"
#include "core/text_lines.h"
#include "engine/archive/manifest.h"
#include "engine/archive/tar_gz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace minrepro {
namespace {

// Names become file names in a directory kept under version control.
bool validName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// NAME.expect's word ("fail" when there is no file). Only a small regular
// file is read: a FIFO or a device put there would block or never end, and
// its name comes back instead, which the row reports as an error.
std::string readExpect(const fs::path& file) {
  // O_NOFOLLOW: a NAME.expect that links elsewhere (/etc/shadow) is not read.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? "fail" : errno == ELOOP ? "(a symbolic link)" : "(unreadable)";
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  std::string text(regular ? static_cast<std::size_t>(std::min<off_t>(st.st_size, 256)) : 0, '\0');
  const ssize_t n = regular ? ::read(fd, text.data(), text.size()) : 0;
  ::close(fd);
  if (!regular) return "(not a regular file)";
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  std::istringstream words(text);
  std::string word;
  words >> word;
  return word.empty() ? "fail" : text::printableInLine(word);
}

struct Row {
  std::string name, expected, got;
  bool same = false;
  bool other_torch = false;  // ran under a torch other than the archive's (engine/torch_versions.h)
};

// What the case did, in the table's words: the expectation when every run
// met it, else what the first run that did not met did instead.
Row rerun(const fs::path& archive, const VerifyOptions& base) {
  // The name as the terminal shows it: a set cloned from elsewhere may name
  // a case with an escape sequence or a bidi control (probe 28).
  Row row{text::printableInLine(archive.filename().string().substr(0, archive.filename().string().size() - 7)),
          readExpect(fs::path(archive).replace_extension("").replace_extension(".expect")), "", false};
  if (row.expected != "fail" && row.expected != "pass") {
    row.got = "error: " + row.name + ".expect must say fail or pass";
    return row;
  }
  VerifyOptions o = base;
  o.archive = archive;
  o.expect = row.expected == "pass" ? Expect::Pass : Expect::Fail;
  try {
    const VerifyResult r = verifyArchive(o, nullptr);
    row.same = r.allAsExpected();
    if (row.same) row.got = row.expected;
    for (const auto& run : r.runs)
      if (!run.as_expected && row.got.empty())
        row.got = std::to_string(r.asExpected()) + "/" + std::to_string(r.runs.size()) + " as expected; " + run.detail;
    for (const auto& run : r.neighbour_runs)
      if (!run.as_expected && row.got.empty()) row.got = "neighbour " + run.neighbour + ": " + run.detail;
    row.other_torch = !r.torch.matches;
    if (row.other_torch)
      row.got += " [under PyTorch " + r.torch.running_torch + "; made with " + r.manifest.torch + "]";
  } catch (const BadInputError& e) {
    row.got = std::string("error: ") + e.what();
  }
  return row;
}

void printTable(const std::vector<Row>& rows, std::ostream& out) {
  std::size_t width = 4;
  for (const auto& r : rows) width = std::max(width, r.name.size());
  out << std::left << std::setw(static_cast<int>(width)) << "name"
      << "  expected  got\n";
  for (const auto& r : rows)
    out << std::left << std::setw(static_cast<int>(width)) << r.name << "  " << std::setw(8) << r.expected << "  "
        << r.got << (r.same ? "" : "   <-- differs") << "\n";
}

}  // namespace

void checkRegressionTarget(const fs::path& dir, const std::string& name) {
  if (!validName(name))
    throw BadInputError("regression case name '" + name +
                        "': use letters, digits, '-', '_' and '.' (e.g. --name class4)");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw BadInputError(dir.string() + ": the regression set (--add-to) is not a directory; give a directory");
  for (const char* ending : {".tar.gz", ".expect"}) {
    const fs::path file = dir / (name + ending);
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0) continue;
    if (!S_ISREG(st.st_mode))
      throw BadInputError(file.string() +
                          ": a case of the regression set is a link, a directory or a device, which minrepro "
                          "neither follows nor replaces; remove it, or give another --name");
    const std::string word = std::string_view(ending) == ".expect" ? readExpect(file) : "";
    const bool ours = word.empty() ? madeByMinrepro(file) : word == "fail" || word == "pass";
    if (!ours)
      throw BadInputError(file.string() +
                          ": exists and is not a case minrepro wrote; remove it, or give another --name");
  }
}

std::string regressionName(const fs::path& config, const std::string& name) {
  return name.empty() ? fs::absolute(config).parent_path().filename().string() : name;
}

namespace {
// The failure an archive records ("" when it has no readable signature.txt).
std::string recordedFailure(const std::vector<ArchiveEntry>& entries, const fs::path& archive) {
  for (const ArchiveEntry& e : entries)
    if (e.name == "signature.txt") try {
        return parseManifest(e.contents, archive.string() + ":signature.txt").signature.summary();
      } catch (const std::exception&) {
        return "";
      }
  return "";
}

std::string recordedFailure(const fs::path& archive) {
  try {
    return recordedFailure(readTarGz(archive), archive);
  } catch (const std::exception&) {
    return "";
  }
}

// `name`, unless the set holds a case of that name that records another
// failure: then the first of NAME-2, NAME-3, ... free or recording this one.
std::string freeRegressionName(const fs::path& dir, const std::string& name, const std::string& failure) {
  for (int n = 1;; ++n) {
    const std::string candidate = n == 1 ? name : name + "-" + std::to_string(n);
    const fs::path held = dir / (candidate + ".tar.gz");
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(held, ec)) || recordedFailure(held) == failure) return candidate;
  }
}
}  // namespace

void addToRegressionSet(const fs::path& archive, const fs::path& dir, const std::string& name) {
  checkRegressionTarget(dir, name);
  const std::vector<ArchiveEntry> entries = readTarGz(archive);  // only a readable archive is kept
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw BadInputError("cannot create the regression directory " + dir.string() + ": " + ec.message());
  writeTarGz(dir / (name + ".tar.gz"), entries);
  // The user's word on a case already there (pass: fixed) stays; regress
  // then says whether the new archive still fails.
  if (readExpect(dir / (name + ".expect")) == "pass") return;
  // A new file renamed over the name: a hard link to it keeps its own content.
  const fs::path expect = dir / (name + ".expect"), partial = dir / (name + ".expect.partial");
  std::ofstream file(partial, std::ios::trunc);
  file << "fail\n";
  file.close();
  std::error_code renamed;
  const std::string written = file ? "" : std::strerror(errno);
  if (file) fs::rename(partial, expect, renamed);
  if (!file || renamed) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw Error(ExitStatus::TrialsCannotStart, "cannot write " + expect.string() + " (" +
                                                   (renamed ? renamed.message() : written) +
                                                   "): the regression set holds the archive but not what it expects");
  }
}

void addShrunkCase(const fs::path& config, const std::string& output, const fs::path& dir, std::string name,
                   std::ostream& out, const fs::path& case_dir) {
  const fs::path archive = output.empty() ? loadCase(config, case_dir).output : fs::absolute(output);
  // Another bug under the same name (two zero-config runs, both named after
  // their directory) takes the next free name instead of replacing it.
  const std::string asked = regressionName(config, name);
  name = freeRegressionName(dir, asked, recordedFailure(archive));
  addToRegressionSet(archive, dir, name);
  const std::string expect = readExpect(dir / (name + ".expect"));
  out << "added '" << name << "' to the regression set " << dir.string();
  if (name != asked) out << " ('" << asked << "' there records another failure)";
  out << (expect == "pass"
              ? " (its expect file says pass, as you wrote: kept; regress tells whether it still fails)"
              : " (expected: fail; write 'pass' into " + (dir / (name + ".expect")).string() + " once fixed)")
      << "\n";
}

int runRegress(const fs::path& dir, const VerifyOptions& base, std::ostream& out) {
  requireUsableTmpdir();
  std::vector<fs::path> archives;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.is_regular_file() && file.size() > 7 && file.ends_with(".tar.gz")) archives.push_back(entry.path());
  }
  if (ec || archives.empty())
    throw BadInputError(dir.string() + (ec ? ": " + ec.message() : ": no NAME.tar.gz cases") +
                        "; add cases with minrepro shrink --config case.yaml --add-to " + dir.string());
  std::sort(archives.begin(), archives.end());
  // Said first: the cases' own code runs (and --sandbox on without bwrap stops here).
  const std::string how = base.sandbox == SandboxMode::Auto ? chooseSandbox(SandboxMode::Auto, false).describe +
                                                                  " (archives your minrepro made, unchanged: without)"
                                                            : chooseSandbox(base.sandbox, false).describe;
  out << "regress " << text::printableInLine(dir.string()) << ": each case " << how << "\n";
  std::vector<Row> rows;
  for (const auto& archive : archives) {
    rows.push_back(rerun(archive, base));
    if (base.cancelled())  // that case's runs were stopped: no verdict on it
      throw RunStopped(RunStopped::Reason::Interrupted, "interrupted during " + archive.filename().string() +
                                                            ", after " + std::to_string(rows.size() - 1) + " of " +
                                                            std::to_string(archives.size()) +
                                                            " case(s); nothing of the archives is left extracted");
  }
  printTable(rows, out);
  const auto differ = std::count_if(rows.begin(), rows.end(), [](const Row& r) { return !r.same; });
  out << rows.size() << " case(s), " << differ << " differ\n";
  // A failing case that passed under another torch is not fixed: exit 4
  // when those are the only differences (docs/guide.md, "regress").
  const auto unjudged = std::count_if(rows.begin(), rows.end(),
                                      [](const Row& r) { return !r.same && r.other_torch && r.expected == "fail"; });
  if (unjudged > 0)
    out << unjudged << " of them ran under a torch other than their archive's: give --python a Python with it\n";
  return differ == 0 ? 0 : unjudged == differ ? 4 : 1;
}

}  // namespace minrepro
