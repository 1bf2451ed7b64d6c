// Running one trial in a fresh process, and what came of it.
//
// All process handling lives behind this header (as in ninja's subprocess.h):
// the rest of the engine sees a TrialSpec go in and a TrialOutcome come out.
// The Executor interface is the seam for tests (a fake that scripts outcomes)
// and for the executors that wrap it (fork servers, Slurm jobs, devices,
// the sandbox: engine/executors/, core/process/sandbox.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace minrepro {

struct TrialSpec {
  std::vector<std::string> argv;               // argv[0] is an absolute path or a name found on PATH
  std::map<std::string, std::string> env_set;  // added to (or replacing in) the parent's environment
  std::vector<std::string> env_unset;          // removed from the parent's environment
  std::filesystem::path work_dir;              // cwd of the trial; TMPDIR points at work_dir/tmp
  std::chrono::milliseconds timeout{60'000};
  std::chrono::milliseconds kill_grace{2'000};  // between SIGTERM and SIGKILL to the group
  std::uint64_t address_space_limit_bytes = 0;  // 0: no limit (RLIMIT_AS)
  std::uint64_t file_size_limit_bytes = 0;      // 0: no limit (RLIMIT_FSIZE: each file the trial writes)
  std::size_t output_cap_bytes = 1 << 20;       // how much of each stream is kept in the outcome: head and tail
  // The disk each stream's file may take while the trial runs: past it, the
  // middle of the file is freed (boundOutputFile), its head and tail kept.
  std::uint64_t output_disk_cap_bytes = std::uint64_t{64} << 20;
  const std::atomic<bool>* cancel = nullptr;  // when it becomes true, the trial's group is killed
  // Run as a plain exec'd process even where a fork server could serve it:
  // the checks that forked children behave as fresh processes do.
  bool fresh_process = false;
  // Start the program with a session keyring of its own, empty: the
  // sandbox's runs of a stranger's archive must not read the keys (a
  // Kerberos ticket, a token) of the session that started minrepro, which
  // no namespace bubblewrap makes hides (probe 30).
  bool own_session_keyring = false;
  // The case whose original batch the trial's input is cut from: a fork
  // server of the built-in harness preloads that batch once (it is not the
  // trial's input; see Executor::buildsBatch).
  std::filesystem::path batch_case;
  // Set only when the executor said it builds the input itself
  // (buildsBatch): the candidate as selection text over that original
  // (reducers/selection_text.h), and how to write the batch file argv names
  // after all, should the trial end up in a plain process.
  std::string batch_selection;
  std::function<void()> write_batch;
};

enum class TrialEnd {
  Exited,         // the process exited by itself; see exit_code
  Signaled,       // killed by a signal it did not catch; see signal
  TimedOut,       // ran past the timeout; its whole process group was killed
  Cancelled,      // stopped because the run was interrupted; its whole group was killed
  FailedToStart,  // could not be started at all; see start_error
};

struct TrialOutcome {
  TrialEnd end = TrialEnd::FailedToStart;
  int exit_code = 0;  // valid when end == Exited
  int signal = 0;     // valid when end == Signaled
  std::string start_error;
  std::string stdout_text;
  std::string stderr_text;
  std::chrono::milliseconds duration{0};
  // How much each stream wrote in all; more than the texts above hold when
  // its middle was cut (readHeadAndTail).
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;

  bool passed() const { return end == TrialEnd::Exited && exit_code == 0; }
};

std::string describe(const TrialOutcome& outcome);
// Fills end/exit_code/signal from a waitpid() status (never confuses a
// signal with an exit status, as Boost's exit_code() does).
void recordWaitStatus(int status, TrialOutcome& outcome);  // "exit status 1", "signal SIGABRT", ...
std::string signalName(int signal);                        // "SIGABRT"; "signal 42" when unknown

class Executor {
 public:
  virtual ~Executor() = default;
  // Whether run(spec) can build the trial's batch from spec.batch_selection
  // without the file (a fork server holding the original). Only then does
  // the caller skip writing it, so an executor that knows nothing of this
  // always gets a file.
  virtual bool buildsBatch(const TrialSpec&) const { return false; }
  // Runs one trial to completion. Never throws for a trial that misbehaves:
  // a missing program, a crash or a hang is an outcome, not an exception.
  virtual TrialOutcome run(const TrialSpec& spec) = 0;
};

// Each trial is a new process in its own process group: stdin from /dev/null,
// stdout and stderr to files in work_dir, TMPDIR=work_dir/tmp, core dumps off,
// optional RLIMIT_AS, and on timeout SIGTERM then SIGKILL to the whole group,
// so grandchildren and children that ignore SIGTERM go too.
class LocalExecutor : public Executor {
 public:
  TrialOutcome run(const TrialSpec& spec) override;
};

// At most `cap` bytes from the start of a file; "" when it cannot be read.
std::string readFileCapped(const std::filesystem::path& file, std::size_t cap);

// A trial's output: the whole file when it holds at most `cap` bytes, else
// its first and its last cap/2 bytes with a line between them that says how
// much was cut, so that an error after a flood of warnings is still read.
// `size` (may be null) gets the file's whole length.
std::string readHeadAndTail(const std::filesystem::path& file, std::size_t cap, std::uint64_t* size = nullptr);

// Keeps an output file that a trial is still writing within about
// `disk_cap` bytes of disk: past it, the middle is deallocated (a hole,
// fallocate PUNCH_HOLE), the first and the last disk_cap/2 bytes kept. The
// file keeps its length; a file system without holes is left as it is.
void boundOutputFile(const std::filesystem::path& file, std::uint64_t disk_cap);

// In a child between fork and exec (async-signal-safe): every descriptor
// from 3 up but `keep` closes at exec. minrepro is threaded: a file or pipe
// that another thread opened without O_CLOEXEC a moment before this fork
// would otherwise live on in the program (a fork server holding a probe's
// pipe kept that probe's spawn waiting for ever). A trial starts with 0, 1
// and 2 only, as from a shell.
void closeOnExecFrom3(int keep = -1);

// Resolves a program name the way execvp would (PATH search), without
// boost_filesystem. Returns the input unchanged when it contains a '/'.
std::string resolveProgram(const std::string& name);

// One of minrepro's own files (a helper library, a script) beside the
// running executable, else `fallback` (where the build tree put it); ""
// when neither is a regular file.
std::string ownFile(const std::string& name, const std::filesystem::path& fallback);

// The trial's temporary directory (its TMPDIR), made: work_dir/tmp when
// that path is short, else a short directory of its own under /tmp that
// work_dir/tmp links to. Why short: libraries turn TMPDIR into AF_UNIX
// socket paths (Python's multiprocessing resource sharer, which DataLoader
// workers use to share tensors: TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX),
// and the kernel refuses a socket path over 107 bytes; a deep work
// directory made every such trial hang until its timeout.
std::filesystem::path makeTrialTemp(const std::filesystem::path& work_dir);
// Removes it (and its link); never throws.
void removeTrialTemp(const std::filesystem::path& work_dir);
// The longest TMPDIR a trial gets (room for a socket path below it).
inline constexpr std::size_t kMaxTrialTempLength = 48;

// `name` in the directory of the running executable (minrepro's programs
// and data sit beside it); `name` alone when /proc/self/exe cannot be read.
std::filesystem::path besideSelf(const std::string& name);

}  // namespace minrepro
