// All process handling: Boost.Process for spawning, POSIX for process groups,
// resource limits and signals (Boost.Process v1 has no SIGTERM-then-SIGKILL
// for a group, and its wait_for is unreliable: boostorg/process#69).
#include "core/process/process.h"

#include "core/process/containment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace minrepro {

// Every signal by its name, as the kernel's headers have it ("SIGQUIT" for
// 3, "SIGRTMIN+2" past the classic ones), wherever minrepro prints one.
std::string signalName(int signal) {
  if (signal >= SIGRTMIN && signal <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(signal - SIGRTMIN);
  if (const char* abbrev = ::sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

namespace {

// "; stderr: 2147483648 bytes, the middle cut" when a stream was longer than what was read.
std::string cutNote(const TrialOutcome& outcome) {
  std::string note;
  const std::pair<const char*, std::pair<std::uint64_t, std::size_t>> streams[] = {
      {"stdout", {outcome.stdout_bytes, outcome.stdout_text.size()}},
      {"stderr", {outcome.stderr_bytes, outcome.stderr_text.size()}}};
  for (const auto& [name, sizes] : streams)
    if (sizes.first > sizes.second)
      note += std::string("; ") + name + ": " + std::to_string(sizes.first) + " bytes, read at its head and tail";
  return note;
}

std::string describeEnd(const TrialOutcome& outcome) {
  switch (outcome.end) {
    case TrialEnd::Exited:
      return "exit status " + std::to_string(outcome.exit_code);
    case TrialEnd::Signaled:
      return "killed by " + signalName(outcome.signal);
    case TrialEnd::TimedOut:
      return "timed out after " + std::to_string(outcome.duration.count()) + " ms";
    case TrialEnd::FailedToStart:
      return "failed to start: " + outcome.start_error;
    case TrialEnd::Cancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace

std::string describe(const TrialOutcome& outcome) { return describeEnd(outcome) + cutNote(outcome); }

void recordWaitStatus(int status, TrialOutcome& outcome) {
  if (WIFSIGNALED(status)) {
    outcome.end = TrialEnd::Signaled;
    outcome.signal = WTERMSIG(status);
  } else {
    outcome.end = TrialEnd::Exited;
    outcome.exit_code = WEXITSTATUS(status);
  }
}

void closeOnExecFrom3(int keep) {
  // close_range(CLOSE_RANGE_CLOEXEC) where the kernel has it (5.11), else one fcntl per possible descriptor.
  const auto mark = [](unsigned first, unsigned last) {
    if (first > last) return;
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, first, last, 4 /* CLOSE_RANGE_CLOEXEC */) == 0) return;
#endif
    struct rlimit files {};
    const unsigned top = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < 65536 ? files.rlim_cur : 65536;
    for (unsigned fd = first; fd <= last && fd < top; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  };
  if (keep < 3) return mark(3, ~0U);
  mark(3, static_cast<unsigned>(keep) - 1);
  mark(static_cast<unsigned>(keep) + 1, ~0U);
}

std::string resolveProgram(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate.string();
  }
  return "";
}

std::string readFileCapped(const fs::path& file, std::size_t cap) {
  std::ifstream in(file, std::ios::binary);
  std::string text(cap, '\0');
  in.read(text.data(), static_cast<std::streamsize>(cap));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

std::string readHeadAndTail(const fs::path& file, std::size_t cap, std::uint64_t* size) {
  // Only the regular file the trial was given: a sandboxed run may have
  // swapped it for a FIFO (opening it waited for ever, deaf to Ctrl-C), a
  // device or a link to a file of the user's.
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    if (size) *size = 0;
    return "";
  }
  std::error_code ec;
  const std::uint64_t length = fs::file_size(file, ec);
  if (size) *size = ec ? 0 : length;
  if (ec || length <= cap) return readFileCapped(file, cap);
  std::ifstream in(file, std::ios::binary);
  const std::size_t half = cap / 2;
  std::string head(half, '\0'), tail(half, '\0');
  in.read(head.data(), static_cast<std::streamsize>(half));
  head.resize(static_cast<std::size_t>(in.gcount()));
  in.clear();
  in.seekg(static_cast<std::streamoff>(length - half));
  in.read(tail.data(), static_cast<std::streamsize>(half));
  tail.resize(static_cast<std::size_t>(in.gcount()));
  return head + "\n[minrepro: " + std::to_string(length - head.size() - tail.size()) +
         " bytes of output cut here; its head and tail were kept]\n" + tail;
}

void boundOutputFile(const fs::path& file, std::uint64_t disk_cap) {
  struct stat st {};
  // lstat and O_NOFOLLOW: a sandboxed run may swap its stdout.txt for a link
  // to a file of the user's, whose blocks must not be punched out.
  if (disk_cap == 0 || ::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::uint64_t allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  if (allocated <= disk_cap) return;
  constexpr std::uint64_t kBlock = 4096;
  const std::uint64_t keep = (disk_cap / 2) / kBlock * kBlock;
  const std::uint64_t end = (static_cast<std::uint64_t>(st.st_size) - keep) / kBlock * kBlock;
  if (keep == 0 || end <= keep) return;
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(keep), static_cast<off_t>(end - keep));
  ::close(fd);
}

namespace {

bp::environment trialEnvironment(const TrialSpec& spec, const fs::path& tmp, const std::string& tag) {
  bp::environment env = boost::this_process::environment();
  for (const auto& name : spec.env_unset) env.erase(name);
  for (const auto& [name, value] : spec.env_set) env[name] = value;
  env["TMPDIR"] = tmp.string();
  env["PWD"] = fs::absolute(spec.work_dir).string();  // what a shell sets for the directory it starts a program in
  env[kTrialTagVariable] = tag;
  return env;
}

constexpr long kKeyctlJoinSessionKeyring = 1;  // KEYCTL_JOIN_SESSION_KEYRING (<linux/keyctl.h>)

// Runs in the child between fork and exec: nothing here may allocate.
struct ChildLimits {
  std::uint64_t address_space = 0, file_size = 0;
  bool own_session_keyring = false;
  template <class Executor>
  void operator()(Executor&) const {
    closeOnExecFrom3();  // boost's own error pipe is close-on-exec already
    // A new anonymous session keyring, joined: the program sees none of
    // the session's keys. A kernel without keyrings refuses it, and then
    // there are none to see.
    if (own_session_keyring) ::syscall(SYS_keyctl, kKeyctlJoinSessionKeyring, nullptr);
    // If minrepro itself is killed (kill -9), the trial goes too.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct rlimit no_core {
      0, 0
    };
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (address_space > 0) {
      struct rlimit as {
        address_space, address_space
      };
      ::setrlimit(RLIMIT_AS, &as);
    }
    if (file_size > 0) {
      struct rlimit fsize {
        file_size, file_size
      };
      ::signal(SIGXFSZ, SIG_IGN);  // a write past it fails with EFBIG instead of killing the writer
      ::setrlimit(RLIMIT_FSIZE, &fsize);
    }
  }
};

// Polls with a deadline instead of wait_for (boostorg/process#69). Returns
// false at the deadline or when `cancel` becomes true.
bool waitUntil(bp::child& child, std::chrono::steady_clock::time_point deadline,
               const std::atomic<bool>* cancel = nullptr, const std::function<void()>& tick = {}) {
  std::error_code ec;
  auto pause = std::chrono::milliseconds(1);
  while (child.running(ec)) {
    if (std::chrono::steady_clock::now() >= deadline || (cancel && cancel->load())) return false;
    if (tick) tick();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  return true;
}

// SIGTERM to the whole group, a grace period, then SIGKILL to the group:
// grandchildren and children that ignore SIGTERM go too.
void killGroup(bp::child& child, pid_t group, std::chrono::milliseconds grace) {
  ::kill(-group, SIGTERM);
  waitUntil(child, std::chrono::steady_clock::now() + grace);
  ::kill(-group, SIGKILL);
  std::error_code ec;
  child.wait(ec);
}

}  // namespace

TrialOutcome LocalExecutor::run(const TrialSpec& spec) {
  TrialOutcome outcome;
  if (spec.argv.empty()) {
    outcome.start_error = "empty command";
    return outcome;
  }
  const std::string program = resolveProgram(spec.argv[0]);
  if (program.empty()) {
    outcome.start_error = "program '" + spec.argv[0] + "' not found on PATH";
    return outcome;
  }
  const fs::path tmp = makeTrialTemp(spec.work_dir);
  const fs::path out_file = spec.work_dir / "stdout.txt", err_file = spec.work_dir / "stderr.txt";
  // Boost.Process opens redirect files without O_TRUNC: start from empty files.
  std::error_code rm_ec;
  fs::remove(out_file, rm_ec);
  fs::remove(err_file, rm_ec);
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  // A fork server's fallback keeps the tag it was given (core/process/containment.h).
  const auto given = spec.env_set.find(kTrialTagVariable);
  const std::string tag = given != spec.env_set.end() ? given->second : newTrialTag();
  const auto start = std::chrono::steady_clock::now();
  try {
    bp::group group;
    bp::child child(bp::exe = program, bp::args = args, bp::std_in<bp::null, bp::std_out> out_file.string(),
                    bp::std_err > err_file.string(), bp::start_dir = spec.work_dir.string(),
                    trialEnvironment(spec, tmp, tag), group,
                    bp::extend::on_exec_setup = ChildLimits{spec.address_space_limit_bytes, spec.file_size_limit_bytes,
                                                            spec.own_session_keyring});
    const pid_t pgid = group.native_handle();
    const auto bound_output = [&] {
      boundOutputFile(out_file, spec.output_disk_cap_bytes);
      boundOutputFile(err_file, spec.output_disk_cap_bytes);
    };
    if (waitUntil(child, start + spec.timeout, spec.cancel, bound_output)) {
      recordWaitStatus(child.native_exit_code(), outcome);
      ::kill(-pgid, SIGKILL);  // whatever the trial left running in its group
      reapGroup(pgid);
    } else {
      killGroup(child, pgid, spec.kill_grace);
      reapGroup(pgid);
      outcome.end = spec.cancel && spec.cancel->load() ? TrialEnd::Cancelled : TrialEnd::TimedOut;
    }
  } catch (const std::exception& e) {
    outcome.end = TrialEnd::FailedToStart;
    outcome.start_error = e.what();
  }
  killTrialOrphans(tag, spec.work_dir);  // what left the group and outlived the trial
  outcome.duration = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  outcome.stdout_text = readHeadAndTail(out_file, spec.output_cap_bytes, &outcome.stdout_bytes);
  outcome.stderr_text = readHeadAndTail(err_file, spec.output_cap_bytes, &outcome.stderr_bytes);
  removeTrialTemp(spec.work_dir);
  return outcome;
}

fs::path makeTrialTemp(const fs::path& work_dir) {
  const fs::path inside = fs::absolute(work_dir / "tmp");
  if (inside.string().size() <= kMaxTrialTempLength) {
    fs::create_directories(inside);
    return inside;
  }
  std::string name = "/tmp/minrepro-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr)
    throw std::runtime_error("cannot make a trial's temporary directory under /tmp: " +
                             std::string(std::strerror(errno)));
  try {
    fs::create_directories(work_dir);
    fs::create_directory_symlink(name, inside);  // how the directory is found again, also after a kill
  } catch (...) {
    std::error_code ec;
    fs::remove(name, ec);  // no directory in /tmp that nothing links to
    throw;
  }
  return name;
}

void removeTrialTemp(const fs::path& work_dir) {
  const fs::path inside = work_dir / "tmp";
  std::error_code ec;
  if (fs::is_symlink(inside, ec)) {
    const fs::path target = fs::read_symlink(inside, ec);
    if (!ec && target.string().rfind("/tmp/minrepro-", 0) == 0) fs::remove_all(target, ec);
  }
  fs::remove_all(inside, ec);  // the link itself, or the directory
}

std::filesystem::path besideSelf(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path(name) : self.parent_path() / name;
}

std::string ownFile(const std::string& name, const std::filesystem::path& fallback) {
  std::error_code ec;
  const std::filesystem::path beside = besideSelf(name);
  for (const std::filesystem::path& candidate : {beside.has_parent_path() ? beside : std::filesystem::path(), fallback})
    if (!candidate.empty() && std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  return "";
}

}  // namespace minrepro
