// sbatch + polling rather than srun. Measured on the one-node test cluster
// (bench/bench_slurm.sh, bench/README.md), srun is faster: a job running
// `true` ~0.2 s against ~1 s for sbatch, whose job waits for the
// controller's next scheduling pass. sbatch still wins on what matters for
// an unattended run:
//  - the job id comes back at once: SIGINT scancels exactly our jobs by id;
//    srun's id is known only inside the job.
//  - scontrol's final JobState tells a cluster failure (NODE_FAIL,
//    PREEMPTED, BOOT_FAIL, CANCELLED by someone else) from the trial's own
//    failure; srun's exit status mixes its own errors with the trial's.
//  - no client process and open connection per in-flight trial on the
//    submitting host, and a job that waits in the queue costs nothing.
// The latency overlaps with --jobs (4 in flight: ~0.3 s per trial). The
// outcome file is watched every 20-100 ms; scontrol is asked once a second
// per job (an RPC to the controller that everyone shares).
#include "engine/executors/slurm_executor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fstream>
#include <future>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/errors.h"
#include "core/stop_asked.h"
#include "core/text_lines.h"
#include "engine/executors/slurm_job.h"
#include "engine/stop_signals.h"

namespace bp = boost::process;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace minrepro {

namespace {

struct ToolResult {
  int status = 127;  // exit status; 128+N when killed by signal N
  std::string out, err;
};

// Runs a Slurm client command. Its own process group: a Ctrl-C at the
// terminal must not kill an sbatch halfway (a job submitted whose id we
// never learn could not be cancelled). But no client may hold the run for
// ever: a controller that hangs kept a preflight sbatch waiting for the
// whole run, and left it running after an interrupt (probe 37). Past
// kToolSeconds the command's group is killed (Slurm's own clients give up
// after their MessageTimeout, 10 s by default, and a few retries); a
// command that submits nothing (`stop_kills`) is killed at once when the
// run is asked to stop.
constexpr int kToolSeconds = 60;

ToolResult runTool(const std::vector<std::string>& argv, bool stop_kills = false) {
  ToolResult r;
  const std::string program = resolveProgram(argv.at(0));
  if (program.empty()) {
    r.err = argv[0] + ": not found on PATH";
    return r;
  }
  try {
    bp::ipstream out, err;
    bp::child child(
        bp::exe = program, bp::args = std::vector<std::string>(argv.begin() + 1, argv.end()),
        bp::std_in<bp::null, bp::std_out> out, bp::std_err > err,
        bp::extend::on_exec_setup = [](auto&) { ::setpgid(0, 0); });
    if (stop_kills) setGroupKilledOnExit(child.id());
    auto read_out =
        std::async(std::launch::async, [&] { return std::string(std::istreambuf_iterator<char>(out), {}); });
    auto read_err =
        std::async(std::launch::async, [&] { return std::string(std::istreambuf_iterator<char>(err), {}); });
    const auto deadline = Clock::now() + std::chrono::seconds(kToolSeconds);
    // Until both streams end (the client exited: no added latency), the
    // deadline, or a stop that may kill it.
    const auto ended = [](std::future<std::string>& f, std::chrono::milliseconds wait) {
      return f.wait_for(wait) == std::future_status::ready;
    };
    bool killed = false;
    constexpr std::chrono::milliseconds kPoll{20};
    while (!killed && !(ended(read_out, kPoll) && ended(read_err, kPoll)))
      if (Clock::now() > deadline || (stop_kills && stopAsked().load())) {
        ::kill(-child.id(), SIGKILL);  // the group: what the client started goes too, and the pipes close
        killed = true;
      }
    child.wait();
    if (stop_kills) setGroupKilledOnExit(0);
    r.out = read_out.get();
    r.err = read_err.get();
    const int status = child.native_exit_code();
    r.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (killed)
      r.err = argv[0] +
              (stopAsked().load() ? ": stopped with the run"
                                  : ": did not answer in " + std::to_string(kToolSeconds) + " s (killed)") +
              (r.err.empty() ? "" : "; " + r.err);
  } catch (const std::exception& e) {
    if (stop_kills) setGroupKilledOnExit(0);
    r.err = argv[0] + ": " + e.what();
  }
  return r;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

// `--time` when the case gives none: the trial's timeout and kill grace,
// rounded up to whole minutes, plus a minute for the job's own start. The
// timeout proper is enforced in the job; this is a backstop.
std::string defaultTime(const TrialSpec& spec) {
  const auto ms = (spec.timeout + spec.kill_grace).count();
  return std::to_string((ms + 59'999) / 60'000 + 1);
}

bool cancelled(const TrialSpec& spec) { return spec.cancel && spec.cancel->load(); }

// Pending reasons that no amount of waiting changes.
bool hopelessPending(const SlurmJobState& s) {
  static const std::set<std::string> kReasons{"BadConstraints", "PartitionConfig", "InvalidAccount", "InvalidQOS"};
  return s.state == "PENDING" && kReasons.count(s.reason) > 0;
}

bool controllerUnreachable(const std::string& message) {
  for (const char* sign : {"Unable to contact slurm controller", "Unable to process configuration file",
                           "Socket timed out", "Connection refused", "not found on PATH", "Zero Bytes were transmitted",
                           "did not answer in", "Could not establish a configuration source", "stopped with the run"})
    if (message.find(sign) != std::string::npos) return true;
  return false;
}

}  // namespace

bool SlurmJobState::final() const {
  static const std::set<std::string> kFinal{"COMPLETED",     "CANCELLED",    "FAILED",    "TIMEOUT",
                                            "NODE_FAIL",     "PREEMPTED",    "BOOT_FAIL", "DEADLINE",
                                            "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"};
  return kFinal.count(state) > 0;
}

SlurmJobState parseScontrolJob(const std::string& text) {
  SlurmJobState s;
  auto field = [&](const std::string& key) {
    const std::regex re("(^|\\s)" + key + "=(\\S*)");
    std::smatch m;
    return std::regex_search(text, m, re) ? m[2].str() : std::string();
  };
  s.state = field("JobState");
  s.reason = field("Reason");
  s.exit_code = field("ExitCode");
  return s;
}

SlurmJobState querySlurmJob(const std::string& id) {
  const ToolResult r = runTool({"scontrol", "-o", "show", "job", id});
  if (r.status != 0) return {};  // "Invalid job id specified": purged or lost
  return parseScontrolJob(r.out);
}

std::string defaultSlurmJobBinary() { return besideSelf("minrepro-slurm-job").string(); }

SlurmExecutor::SlurmExecutor(SlurmExecutorOptions options) : options_(std::move(options)) {
  if (options_.job_binary.empty()) options_.job_binary = defaultSlurmJobBinary();
}

SlurmExecutor::~SlurmExecutor() {
  for (const std::string& id : liveJobs()) cancelJob(id);
}

SlurmCounts SlurmExecutor::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::vector<std::string> SlurmExecutor::liveJobs() const {
  std::lock_guard lock(mutex_);
  return {live_.begin(), live_.end()};
}

void SlurmExecutor::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  live_.erase(id);
}

std::vector<std::string> SlurmExecutor::sbatchOptions(const TrialSpec& spec) const {
  const SlurmOptions& o = options_.slurm;
  std::vector<std::string> args{
      "--job-name=" + options_.job_name + "." + std::to_string(::getpid()) + "." + spec.work_dir.filename().string(),
      "--output=" + (spec.work_dir / "slurm-%j.out").string(), "--chdir=" + spec.work_dir.string(), "--ntasks=1",
      // We resubmit ourselves after a cluster failure: a requeued job would
      // keep its id and run twice under one trial.
      "--no-requeue", "--time=" + (o.time.empty() ? defaultTime(spec) : o.time)};
  if (!o.partition.empty()) args.push_back("--partition=" + o.partition);
  if (!o.gres.empty()) args.push_back("--gres=" + o.gres);
  if (!o.account.empty()) args.push_back("--account=" + o.account);
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  return args;
}

void SlurmExecutor::preflight(const fs::path& scratch_dir) {
  if (::access(options_.job_binary.c_str(), X_OK) != 0)
    throw TrialStartError("the Slurm executor needs minrepro-slurm-job, not found at " + options_.job_binary +
                          " (build it with minrepro; it must be at the same path on the cluster's nodes)");
  TrialSpec probe;
  probe.work_dir = fs::absolute(scratch_dir);
  fs::create_directories(probe.work_dir);
  std::vector<std::string> argv{"sbatch", "--test-only"};
  for (const auto& a : sbatchOptions(probe)) argv.push_back(a);
  argv.push_back("--wrap=true");
  const ToolResult r = runTool(argv, /*stop_kills=*/true);
  if (r.status == 0) return;
  const std::string message = trimmed(r.err + r.out);
  if (controllerUnreachable(message))
    throw TrialStartError("cannot submit Slurm jobs: " + message +
                          " (is the cluster up and SLURM_CONF right? On this machine: scripts/slurm-up.sh)");
  throw BadInputError(
      "Slurm refuses the case's job options (executor: partition, gres, time, account, extra_args): " + message +
      "; fix the executor section of case.yaml (sinfo lists partitions), or run with --executor local");
}

std::string SlurmExecutor::submit(const TrialSpec& spec, std::string* error) {
  const fs::path dir = spec.work_dir;
  std::error_code ec;
  fs::remove(dir / kSlurmOutcomeFile, ec);
  writeTrialSpecFile(dir / kSlurmSpecFile, spec);
  {
    std::ofstream script(dir / kSlurmScriptFile, std::ios::trunc);
    script << "#!/bin/sh\nexec " << text::shellWord(options_.job_binary) << " "
           << text::shellWord((dir / kSlurmSpecFile).string()) << "\n";
  }
  std::vector<std::string> argv{"sbatch", "--parsable"};
  for (const auto& a : sbatchOptions(spec)) argv.push_back(a);
  argv.push_back((dir / kSlurmScriptFile).string());
  const ToolResult r = runTool(argv);
  const std::string id = trimmed(r.out.substr(0, r.out.find(';')));
  if (r.status != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    *error = "sbatch failed: " + trimmed(r.err + r.out);
    return "";
  }
  std::lock_guard lock(mutex_);
  live_.insert(id);
  ++counts_.submitted;
  return id;
}

// scancel by id, then wait (bounded) until the job has left the queue, so
// that squeue shows nothing of ours once the run has stopped.
void SlurmExecutor::cancelJob(const std::string& id) {
  runTool({"scancel", id});
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    const SlurmJobState s = querySlurmJob(id);
    if (s.state.empty() || s.final()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  forget(id);
}

struct SlurmAttempt {
  std::optional<TrialOutcome> outcome;  // the trial's own end (or Cancelled, FailedToStart)
  std::string failure;                  // else: the cluster's reason, e.g. "NODE_FAIL"
  std::string detail;                   // what Slurm and the job's log said
  std::string note;                     // appended to the trial's stderr
};

namespace {

SlurmAttempt endedAs(TrialEnd end, std::string why = "") {
  SlurmAttempt a;
  a.outcome.emplace().end = end;
  a.outcome->start_error = std::move(why);
  return a;
}

// A job that ended without an outcome file. Slurm's time limit and memory
// limit are the trial's doing; everything else is the cluster's.
SlurmAttempt endedWithoutOutcome(const SlurmJobState& s, const fs::path& dir, const std::string& id) {
  if (s.state == "TIMEOUT") {
    SlurmAttempt a = endedAs(TrialEnd::TimedOut);
    a.note = "\nminrepro: Slurm ended job " + id + " at its --time limit\n";
    return a;
  }
  if (s.state == "OUT_OF_MEMORY") {
    SlurmAttempt a = endedAs(TrialEnd::Signaled);
    a.outcome->signal = SIGKILL;
    a.note = "\nminrepro: Slurm killed job " + id + ": out of memory (its --mem limit)\n";
    return a;
  }
  SlurmAttempt a;
  a.failure = s.state.empty() ? "LOST" : s.state;
  a.detail = "job " + id + " " + (s.state.empty() ? "is no longer known to the controller" : "ended " + s.state) +
             (s.reason.empty() || s.reason == "None" ? "" : " (" + s.reason + ")") +
             (s.exit_code.empty() ? "" : " exit code " + s.exit_code);
  const std::string log = trimmed(readFileCapped(dir / ("slurm-" + id + ".out"), 1000));
  if (!log.empty()) a.detail += "; job log: " + log;
  return a;
}

}  // namespace

SlurmAttempt SlurmExecutor::submitAndWait(const TrialSpec& spec) {
  if (cancelled(spec)) return endedAs(TrialEnd::Cancelled);
  std::string error;
  const std::string id = submit(spec, &error);
  if (id.empty()) {
    SlurmAttempt a;  // the preflight passed: a refused submission is the cluster's state (busy, restarting)
    a.failure = "SUBMIT";
    a.detail = error;
    return a;
  }
  return waitForJob(id, spec);
}

SlurmAttempt SlurmExecutor::waitForJob(const std::string& id, const TrialSpec& spec) {
  const fs::path outcome_file = spec.work_dir / kSlurmOutcomeFile;
  auto next_query = Clock::now() + std::chrono::milliseconds(200);
  std::optional<Clock::time_point> completed_at;
  int unknown = 0;  // scontrol can fail once while the controller restarts: three in a row is "lost"
  for (auto pause = std::chrono::milliseconds(20);; pause = std::min(pause * 2, std::chrono::milliseconds(100))) {
    if (cancelled(spec)) {
      cancelJob(id);
      return endedAs(TrialEnd::Cancelled);
    }
    if (auto o = readTrialOutcomeFile(outcome_file)) {
      forget(id);
      return SlurmAttempt{o, "", "", ""};
    }
    if (Clock::now() >= next_query) {
      next_query = Clock::now() + options_.state_poll;
      const SlurmJobState s = querySlurmJob(id);
      unknown = s.state.empty() ? unknown + 1 : 0;
      if (hopelessPending(s)) {
        cancelJob(id);
        return endedAs(TrialEnd::FailedToStart,
                       "Slurm job " + id + " can never start: " + s.reason + "; fix the executor section of case.yaml");
      }
      // COMPLETED: the job wrote its outcome, which NFS may show a little later.
      if (s.state == "COMPLETED" && !completed_at) completed_at = Clock::now();
      const bool waited = !completed_at || Clock::now() - *completed_at >= options_.outcome_grace;
      if ((s.final() && waited) || unknown >= 3) {
        forget(id);
        if (auto o = readTrialOutcomeFile(outcome_file)) return SlurmAttempt{o, "", "", ""};
        return endedWithoutOutcome(s, spec.work_dir, id);
      }
    }
    std::this_thread::sleep_for(pause);
  }
}

TrialOutcome SlurmExecutor::run(const TrialSpec& spec) {
  std::string last;
  for (std::size_t attempt = 0; attempt <= options_.slurm.retries; ++attempt) {
    if (attempt > 0) {
      std::lock_guard lock(mutex_);
      ++counts_.resubmitted;
    }
    SlurmAttempt a = submitAndWait(spec);
    if (a.outcome) {
      TrialOutcome o = std::move(*a.outcome);
      if (o.end == TrialEnd::Cancelled || o.end == TrialEnd::FailedToStart) return o;
      o.stdout_text = readHeadAndTail(spec.work_dir / "stdout.txt", spec.output_cap_bytes, &o.stdout_bytes);
      o.stderr_text = readHeadAndTail(spec.work_dir / "stderr.txt", spec.output_cap_bytes, &o.stderr_bytes) + a.note;
      return o;
    }
    std::lock_guard lock(mutex_);
    ++counts_.failures[a.failure];
    last = a.detail;
  }
  TrialOutcome o;
  o.start_error = "Slurm job ended without a result " + std::to_string(options_.slurm.retries + 1) +
                  " times in a row for reasons of the cluster (last: " + last +
                  "); check the cluster (sinfo, the job log) or raise executor.retries";
  return o;
}

}  // namespace minrepro
