// The work directory of a run (see the header for why).
#include "engine/work_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/content_hash.h"
#include "core/disk_space.h"
#include "core/paths.h"
#include "core/process/containment.h"
#include "core/process/process.h"
#include "core/text_lines.h"
#include "engine/archive/tar_gz.h"
#include "engine/case_branches.h"
#include "engine/journal.h"
#include "harness/trial_main.h"
#include "reducers/selection_text.h"

namespace fs = std::filesystem;

namespace minrepro {

// What would otherwise fail only after the whole reduction, or be reduced as
// if it were the bug: found before the first trial, as bad input (exit 2).
void checkWorkDirAndModel(const CaseConfig& config) {
  std::error_code ec;
  if (fs::exists(config.work_dir, ec) && !fs::is_directory(config.work_dir, ec))
    throw BadInputError(config.work_dir.string() +
                        ": the work directory (work_dir or --work-dir) is a file; give a "
                        "directory (made when missing)");
  const fs::path work = fs::weakly_canonical(config.work_dir, ec);
  for (const auto& [file, what] : {std::pair{config.batch, "the failing batch"},
                                   std::pair{config.harness ? config.harness->model : fs::path(), "the model"}}) {
    if (file.empty()) continue;
    const fs::path real = fs::weakly_canonical(file, ec);
    if (!work.empty() && isWithin(real, work))
      throw BadInputError(file.string() + ": " + what + " lies inside the work directory " + config.work_dir.string() +
                          ", whose trials/ and best/ a run clears and rewrites; move it out, or give another "
                          "--work-dir");
  }
  if (config.harness) checkModelLoads(config.harness->model);
}

namespace {
constexpr const char* kWorkDirMark = ".minrepro-work";

// Whether an earlier run left the directory (before the mark existed):
// every run takes its lock file first, and the file stays.
bool leftByARun(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "lock", ec);
}
}  // namespace

void claimWorkDir(const fs::path& work_dir) {
  const std::string what = work_dir.string() + ": the work directory (work_dir or --work-dir) ";
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec || !fs::is_directory(work_dir, ec))
    throw BadInputError(what + "cannot be made (" + (ec ? ec.message() : std::string("not a directory")) +
                        "); give a directory this user may write");
  if (fs::exists(work_dir / kWorkDirMark, ec)) return;
  std::vector<std::string> held;
  for (fs::directory_iterator it(work_dir, ec), end; !ec && it != end && held.size() < 4; it.increment(ec))
    if (it->path().filename() != "slurm-preflight")  // the Slurm executor's probe, made before the run opens
      held.push_back(it->path().filename().string());
  if (!held.empty() && !leftByARun(work_dir)) {
    std::string names;
    for (std::size_t i = 0; i < std::min<std::size_t>(held.size(), 3); ++i) names += (i ? ", " : "") + held[i];
    throw BadInputError(what + "holds files minrepro did not write (" + names + (held.size() > 3 ? ", ..." : "") +
                        "); a run clears and rewrites trials/, best/, case.yaml, its log, journal and reports "
                        "there: give a new or empty directory");
  }
  std::ofstream(work_dir / kWorkDirMark) << "a minrepro work directory: runs clear and rewrite what is here\n";
}

// The work directory, made when missing, and writable: a symlink loop, a
// read-only place or a full disk is bad input naming work_dir, not an
// internal error in the middle of the run.
void makeWorkDir(const fs::path& work_dir) {
  const std::string what = work_dir.string() + ": the work directory (work_dir or --work-dir) ";
  claimWorkDir(work_dir);
  const fs::path probe = work_dir / (".minrepro-write-check-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw BadInputError(what + "cannot be written (" + std::strerror(errno) +
                        "); give a directory this user may write");
  ::close(fd);
  ::unlink(probe.c_str());
}

// Before the first trial, what a run needs free (#43.6): each running
// trial writes a candidate of up to the batch's size beside its output,
// best/ holds one more, and the log, the journal and the reports a few MB;
// where the archive goes, a few MB beside the kept batch. Too little is
// said now, naming the place, rather than as trials that die one by one.
void checkRoomForTheRun(const CaseConfig& config, std::size_t jobs) {
  constexpr std::uintmax_t kWorkMargin = 16'000'000, kArchiveMargin = 4'000'000;
  std::error_code ec;
  const std::uintmax_t batch = fs::file_size(config.batch, ec);
  requireSpace(config.work_dir, (jobs + 2) * (ec ? 0 : batch) + kWorkMargin, "the trials' batches, outputs and logs",
               "free some space there, or give another --work-dir");
  requireSpace(config.output.parent_path(), kArchiveMargin, "the archive",
               "free some space there, or write the archive elsewhere (--output)");
}

namespace {

// "repro.tar.gz.4242.123456.partial" of `output`: the pid that wrote it.
std::optional<pid_t> partialWriter(const fs::path& file, const fs::path& output) {
  const std::string name = file.filename().string(), prefix = output.filename().string() + ".";
  if (!name.starts_with(prefix) || !name.ends_with(".partial")) return std::nullopt;
  const std::string middle = name.substr(prefix.size(), name.size() - prefix.size() - 8);
  const std::size_t dot = middle.find('.');
  if (dot == std::string::npos || dot == 0 || middle.find_first_not_of("0123456789.") != std::string::npos)
    return std::nullopt;
  return static_cast<pid_t>(std::stol(middle.substr(0, dot)));
}

}  // namespace

std::size_t removeStalePartials(const CaseConfig& config) {
  std::size_t removed = 0;
  std::error_code ec;
  const auto remove = [&](const fs::path& file) { removed += fs::remove(file, ec) ? 1 : 0; };
  for (const fs::path& dir : {config.work_dir, config.work_dir / "best"})
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".partial" || it->path().extension() == ".tmp") remove(it->path());
  ec.clear();
  for (fs::directory_iterator it(config.output.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<pid_t> writer = partialWriter(it->path(), config.output);
    if (writer && ::kill(*writer, 0) != 0 && errno == ESRCH) remove(it->path());
  }
  return removed;
}

// A run killed with SIGKILL could not end its trials' escaped descendants
// nor remove its trial directories: the next run in the directory does,
// once the lock says no run is using it. Tags of this run's trials carry
// the work directory from here on. Returns the processes it killed.
std::size_t cleanUpAfterKilledRun(const fs::path& work_dir) {
  const std::string scope = fs::weakly_canonical(work_dir).string();
  setTrialScope(scope);
  const std::size_t killed = killLeftovers(scope, work_dir / "trials");
  std::error_code ec;
  for (fs::directory_iterator it(work_dir / "trials", ec), end; !ec && it != end; it.increment(ec))
    removeTrialTemp(it->path());  // a short temporary directory under /tmp, linked from the trial's
  fs::remove_all(work_dir / "trials", ec);
  return killed;
}

namespace {

// A symbolic link, or a regular file with another name elsewhere: minrepro
// makes neither in its work directory, and writing there would write
// through it into what it points at.
bool plantedLink(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  return S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink > 1);
}

}  // namespace

std::size_t removePlantedLinks(const fs::path& work_dir) {
  std::size_t removed = 0;
  std::error_code ec;
  // Every directory minrepro writes into (best/, neighbours/, trace/, probe/,
  // op/...), without following links; the torch.compile caches are the
  // compilers' own, and trials/ is removed whole before this.
  for (fs::recursive_directory_iterator it(work_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    if (it.depth() == 0 && (path.filename() == "compile-cache" || path.filename() == "trials")) {
      it.disable_recursion_pending();
      // Itself a link (probe 25: the trials' compilers wrote into its target).
      if (plantedLink(path) && ::unlink(path.c_str()) == 0) ++removed;
      continue;
    }
    if ((it.depth() > 0 || path.filename() != "lock") && plantedLink(path) && ::unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

// What identifies a run for --resume: the case file, the batch and the
// settings that change which trials are run.
std::string runIdentity(const CaseConfig& config) {
  std::ostringstream id;
  id << "case=" << contentHash(readFileBytes(config.case_file)) << " batch=" << contentHashOfFile(config.batch)
     << " flaky=" << config.flaky.enabled << "/" << config.flaky.alpha;
  return id.str();
}

// The best case so far, always valid on disk: batch and case file each
// written to a temp file and renamed. Written when the run ends (the
// archive's batch is this one), on SIGUSR1 and by --materialize-best, not at
// every acceptance: the journal records each accepted selection, and a
// batch of gigabytes rewritten at every step would cost more than the
// trials. Nothing reduced: the user's own file, as the trials ran it.
fs::path writeBestSoFar(const CaseConfig& config, const BatchStore& batch, const Selection& best) {
  const fs::path dir = config.work_dir / "best";
  fs::create_directories(dir);
  if (selectionKey(best) == selectionKey(fullSelection(batch))) {
    std::error_code gone;
    fs::remove(dir / "batch.pt.partial", gone);
    fs::copy_file(config.batch, dir / "batch.pt.partial", fs::copy_options::overwrite_existing);
    fs::rename(dir / "batch.pt.partial", dir / "batch.pt");
  } else {
    batch.writeCandidate(best, dir / "batch.pt");
  }
  const fs::path tmp = dir / "case.yaml.partial";
  std::error_code gone;
  fs::remove(tmp, gone);
  {
    std::ofstream out(tmp);
    out << renderCase(bakeBranches(config, best.branches_off), config.base_dir, "batch.pt",
                      config.harness ? config.harness->model.string() : "");
  }
  fs::rename(tmp, dir / "case.yaml");
  return dir / "batch.pt";
}

std::string goOnLine(const CaseConfig& config, const fs::path& start_dir, const std::vector<std::string>& start_command,
                     const std::vector<std::string>& options) {
  return "to go on from here (the trials so far are replayed, not run again): " +
         resumeCommand(config, start_dir, start_command, options);
}

// --materialize-best: best/ from the journal of a run that is not running
// (killed with SIGKILL, or ended), without a trial.
ExitStatus materializeBest(const CaseConfig& config, bool quiet) {
  const auto batch = BatchStore::open(config);
  std::optional<WorkDirLock> lock;
  try {
    lock.emplace(config.work_dir);
  } catch (const BadInputError& e) {
    throw BadInputError(std::string(e.what()) + "; a running shrink writes best/ when sent SIGUSR1 (kill -USR1 PID)");
  }
  // best/ a link planted since (probe 29: written through, the user's files replaced).
  removePlantedLinks(config.work_dir);
  const auto text = Journal::lastAccepted(config.work_dir, runIdentity(config));
  if (!text)
    throw BadInputError((config.work_dir / "journal.txt").string() +
                        ": no candidate was accepted yet: the best case "
                        "so far is the original batch (" +
                        config.batch.string() + ")");
  const auto selection = parseSelectionText(*text);
  const bool in_range = selection && !selection->samples.empty() && selection->samples.back() < batch->sampleCount();
  if (!in_range)
    throw BadInputError((config.work_dir / "journal.txt").string() +
                        ": its last accepted candidate cannot be read "
                        "(the journal was edited or is not this batch's); run shrink again without --resume");
  const fs::path written = writeBestSoFar(config, *batch, *selection);
  if (!quiet)
    std::cout << "minrepro: wrote " << written.parent_path().string() << " (" << selection->samples.size()
              << " samples; run it with minrepro shrink --config " << (written.parent_path() / "case.yaml").string()
              << ", or resume the run with --resume)\n";
  return ExitStatus::Reduced;
}

namespace {

// "minrepro" when the shell finds one on PATH, else this program's own path
// (a minrepro run by its full path would otherwise print a line that fails).
std::string minreproCommand() {
  if (resolveProgram("minrepro").find('/') != std::string::npos) return "minrepro";
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "minrepro" : text::shellWord(self.string());
}

}  // namespace

std::string resumeCommand(const CaseConfig& config, const fs::path& start_dir,
                          const std::vector<std::string>& start_command, const std::vector<std::string>& options) {
  std::string places = " --work-dir " + text::shellWord(config.work_dir.string()) + " --output " +
                       text::shellWord(config.output.string()) + " --resume";
  for (const std::string& option : options) places += " " + text::shellWord(option);
  if (start_command.empty())
    return minreproCommand() + " shrink --config " + text::shellWord(config.case_file.string()) + places;
  // The zero-config start's case.yaml lies in the work directory with paths
  // relative to where it started, and --resume compares it as written: the
  // line repeats the --batch command as typed, from where it was typed.
  std::string line = "cd " + text::shellWord(start_dir.string()) + " && " + minreproCommand() + " shrink --batch " +
                     text::shellWord(config.batch.string()) + places + " --";
  for (const std::string& arg : start_command) line += " " + text::shellWord(arg);
  return line;
}

}  // namespace minrepro
