// The client side of the fork servers (see engine/executors/fork_server.h) and the
// routes that say which trials a server can run.
#include "engine/executors/fork_server.h"
#include "engine/trial_spec.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "core/process/containment.h"
#include "core/process/fork_protocol.h"

extern char** environ;

namespace fs = std::filesystem;

namespace minrepro {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A server answers `started` at once; only the trial itself may take long.
constexpr auto kReplyTimeout = 30s;
// After SIGKILL to the group the server reports within milliseconds.
constexpr auto kReportAfterKill = 10s;

// This process's environment with the changes applied, as NAME=VALUE.
std::vector<std::string> environmentWith(const std::map<std::string, std::string>& set,
                                         const std::vector<std::string>& unset) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : unset) env.erase(name);
  for (const auto& [name, value] : set) env[name] = value;
  std::vector<std::string> list;
  for (const auto& [name, value] : env) list.push_back(name + "=" + value);
  return list;
}

void appendLog(const fs::path& log, const std::string& line) {
  if (log.empty()) return;
  std::error_code ec;
  fs::create_directories(log.parent_path(), ec);
  std::ofstream(log, std::ios::app) << "minrepro: " << line << "\n";
}

std::vector<char*> cStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A running server: its pid (leader of its own group, so a Ctrl-C meant for
// minrepro does not reach it; it exits when its socket closes) and our end.
// A clone is not our child (init reaps it), so only `pid` of a started one is reaped.
struct Server {
  pid_t pid = -1;
  int fd = -1;
  bool our_child = true;
};

// Between fork and exec only async-signal-safe calls: the client may be threaded.
[[noreturn]] void execServer(int sock, int log_fd, int null_fd, char** argv, char** envp) {
  ::setpgid(0, 0);
  const int high = ::fcntl(sock, F_DUPFD_CLOEXEC, 10);  // out of the way of 0..3; gone at exec
  ::dup2(null_fd, 0);
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);
  ::dup2(high, kForkServerFd);  // dup2 clears close-on-exec
  closeOnExecFrom3(kForkServerFd);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

int openLog(const fs::path& log) {
  if (!log.empty()) {
    std::error_code ec;
    fs::create_directories(log.parent_path(), ec);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
  }
  return ::open("/dev/null", O_WRONLY | O_CLOEXEC);
}

void reapWithin(pid_t pid, std::chrono::milliseconds grace) {
  const auto deadline = Clock::now() + grace;
  while (::waitpid(pid, nullptr, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(2ms);
  }
}

void stopServer(Server& s, std::chrono::milliseconds grace) {
  if (s.fd >= 0) ::close(s.fd);  // end of file: the server exits
  if (s.pid > 0 && s.our_child) reapWithin(s.pid, grace);
  s = Server{};
}

// Waits for a server's `ready` and checks that it is safe to fork from.
bool acceptReady(Server& s, Clock::time_point deadline, std::string& why) {
  const auto ready = receiveMessage(s.fd, deadline);
  if (!ready || ready->fields.empty() || ready->fields.front().first != "ready")
    why = "it did not start (see its messages above)";
  else if (ready->get("threads") != "1")
    why = "its parent has " + ready->get("threads") + " threads (not safe to fork)";
  else if (ready->get("cuda") != "0")
    why = "its parent initialised CUDA (a CUDA context does not survive fork)";
  if (!why.empty()) return false;
  if (!s.our_child) s.pid = static_cast<pid_t>(std::stol(ready->fields.front().second));
  return true;
}

// Starts a server and waits for its `ready`; nullopt with `why` on failure.
std::optional<Server> spawnServer(const ForkRoute& route, const ForkServerOptions& o, std::string& why) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    why = "socketpair failed";
    return std::nullopt;
  }
  // The server's own tag, in its exec'd environment: its forked children
  // show that environment in /proc whatever they set in memory, so one that
  // leaves the trial's group and directory (setsid, chdir /) still carries a
  // tag of this run's scope, for the next run to find (containment.h).
  auto env_set = route.server_env_set;
  env_set[kTrialTagVariable] = newTrialTag();
  std::vector<std::string> args = route.server_argv, env = environmentWith(env_set, route.server_env_unset);
  if (!o.standby) args.push_back("--no-standby");
  auto argv = cStrings(args), envp = cStrings(env);
  const int log_fd = openLog(o.log_file), null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) execServer(sv[1], log_fd, null_fd, argv.data(), envp.data());
  for (int fd : {sv[1], log_fd, null_fd}) ::close(fd);
  Server s{pid, sv[0]};
  if (pid < 0) {
    ::close(sv[0]);
    why = "fork failed";
    return std::nullopt;
  }
  if (acceptReady(s, Clock::now() + o.start_timeout, why)) return s;
  stopServer(s, 1s);
  return std::nullopt;
}

// A copy of `from` (idle) for another job slot, forked by it: no second
// start-up (core/process/fork_protocol.h); nullopt with `why` on failure.
std::optional<Server> cloneServer(const Server& from, std::string& why) {
  ForkMessage request;
  request.add("op", "clone");
  const auto deadline = Clock::now() + kReplyTimeout;
  if (!sendMessage(from.fd, request)) {
    why = "the server is gone";
    return std::nullopt;
  }
  const auto reply = receiveMessage(from.fd, deadline);
  if (!reply || reply->get("cloned") != "1") {
    why = reply ? reply->get("error") : "no reply";
    return std::nullopt;
  }
  Server s{-1, receiveFd(from.fd, deadline), false};
  if (s.fd < 0)
    why = "no socket passed";
  else if (acceptReady(s, deadline, why))
    return s;
  stopServer(s, 1s);
  return std::nullopt;
}

ForkMessage runRequest(const TrialSpec& spec, const std::vector<std::string>& child_argv, const fs::path& tmp) {
  ForkMessage m;
  m.add("op", "run");
  m.add("dir", spec.work_dir.string());
  m.add("stdout", (spec.work_dir / "stdout.txt").string());
  m.add("stderr", (spec.work_dir / "stderr.txt").string());
  m.add("as_limit", std::to_string(spec.address_space_limit_bytes));
  for (const auto& a : child_argv) m.add("arg", a);
  auto set = spec.env_set;
  set["TMPDIR"] = tmp.string();
  set["PWD"] = fs::absolute(spec.work_dir).string();  // what a shell sets for the directory it starts a program in
  for (auto& kv : environmentWith(set, spec.env_unset)) m.add("env", std::move(kv));
  if (!spec.batch_selection.empty()) m.add("selection", spec.batch_selection);
  return m;
}

std::optional<int> exitedStatus(const std::optional<ForkMessage>& m) {
  if (!m || m->fields.empty() || m->fields.front().first != "exited") return std::nullopt;
  return std::stoi(m->fields.front().second);
}

// One trial on a server. `server_ok` false: the server must be replaced;
// an empty outcome: the trial's result is unknown (the server died under it).
struct Attempt {
  std::optional<TrialOutcome> outcome;
  bool server_ok = true;
  bool from_standby = false;  // the child was the server's standby (forked ahead)
};

bool cancelled(const TrialSpec& spec) { return spec.cancel && spec.cancel->load(); }

// Until the server's report is readable (true), the deadline or a
// cancellation; the child's output files are kept within their disk cap
// meanwhile.
bool waitForReport(int fd, Clock::time_point deadline, const TrialSpec& spec) {
  while (!cancelled(spec)) {
    if (waitReadable(fd, std::min(deadline, Clock::now() + (spec.cancel ? 20ms : 100ms)))) return true;
    if (Clock::now() >= deadline) return false;
    boundOutputFile(spec.work_dir / "stdout.txt", spec.output_disk_cap_bytes);
    boundOutputFile(spec.work_dir / "stderr.txt", spec.output_disk_cap_bytes);
  }
  return false;
}

// Past the timeout (or cancelled): SIGTERM to the child's group, the grace
// period, SIGKILL; the server still reaps the child and reports it.
Attempt killOnTimeout(const Server& s, pid_t child, const TrialSpec& spec) {
  ::kill(-child, SIGTERM);
  if (!waitReadable(s.fd, Clock::now() + spec.kill_grace)) ::kill(-child, SIGKILL);
  Attempt a;
  a.server_ok = exitedStatus(receiveMessage(s.fd, Clock::now() + kReportAfterKill)).has_value();
  if (!a.server_ok) ::kill(-child, SIGKILL);
  a.outcome.emplace().end = cancelled(spec) ? TrialEnd::Cancelled : TrialEnd::TimedOut;
  return a;
}

Attempt awaitChild(const Server& s, pid_t child, const TrialSpec& spec, Clock::time_point start) {
  if (!waitForReport(s.fd, start + spec.timeout, spec)) return killOnTimeout(s, child, spec);
  const auto status = exitedStatus(receiveMessage(s.fd, Clock::now() + kReplyTimeout));
  if (!status) {
    ::kill(-child, SIGKILL);  // orphaned by its server: nobody would report it
    return Attempt{std::nullopt, false};
  }
  Attempt a;
  recordWaitStatus(*status, a.outcome.emplace());
  return a;
}

Attempt attemptOn(const Server& s, const TrialSpec& spec, const std::vector<std::string>& child_argv) {
  const fs::path tmp = makeTrialTemp(spec.work_dir);
  const auto start = Clock::now();
  if (!sendMessage(s.fd, runRequest(spec, child_argv, tmp))) return Attempt{std::nullopt, false};
  const auto reply = receiveMessage(s.fd, Clock::now() + kReplyTimeout);
  if (!reply || reply->fields.empty()) return Attempt{std::nullopt, false};
  const auto& [kind, value] = reply->fields.front();
  Attempt a;
  if (kind == "started") {
    a = awaitChild(s, static_cast<pid_t>(std::stol(value)), spec, start);
    a.from_standby = reply->get("standby") == "1";
  } else {
    a.outcome.emplace().start_error = "fork server: " + value;  // FailedToStart, as a plain process would
  }
  if (a.outcome) a.outcome->duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return a;
}

std::string routeKey(const ForkRoute& r) {
  std::string key;
  for (const auto& a : r.server_argv) key += a + '\0';
  key += '\1';
  for (const auto& [k, v] : r.server_env_set) key += k + '=' + v + '\0';
  key += '\1';
  for (const auto& k : r.server_env_unset) key += k + '\0';
  return key;
}

}  // namespace

// ------------------------------------------------------------------ executor

class ForkServerExecutor::Impl {
 public:
  Impl(ForkRouter router, Executor& fallback, ForkServerOptions options)
      : router_(std::move(router)), fallback_(fallback), options_(std::move(options)) {}

  ~Impl() {
    for (auto& [key, servers] : idle_)
      for (auto& s : servers) ::close(std::exchange(s.fd, -1));  // all exit in parallel
    for (auto& [key, servers] : idle_)
      for (auto& s : servers) stopServer(s, 2s);
  }

  TrialOutcome run(const TrialSpec& given) {
    const auto route = router_ && !given.fresh_process ? router_(given) : std::nullopt;
    if (!route) return runPlain(given);
    // The forked child and what it starts carry the trial's tag; what
    // escaped its group is reparented here and killed when it ends
    // (core/process/containment.h).
    TrialSpec spec = given;
    if (!spec.env_set.count(kTrialTagVariable)) spec.env_set[kTrialTagVariable] = newTrialTag();
    const std::string tag = spec.env_set.at(kTrialTagVariable);
    std::optional<TrialOutcome> outcome = runRouted(spec, *route);
    killTrialOrphans(tag, spec.work_dir);
    if (outcome) return finish(spec, std::move(*outcome));
    return runPlain(spec);
  }

  bool buildsBatch(const TrialSpec& spec) const {
    const auto route = router_ && !spec.fresh_process ? router_(spec) : std::nullopt;
    if (!route || !route->builds_batch) return false;
    std::lock_guard lock(mu_);
    return !unusable_.count(routeKey(*route));
  }

  ForkServerCounts counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }

  bool routes(const TrialSpec& spec) const { return router_ && !spec.fresh_process && router_(spec).has_value(); }

 private:
  // Two tries: a server that dies under a trial is replaced and the trial
  // rerun once in a fresh child; nullopt leaves the trial to a plain process.
  std::optional<TrialOutcome> runRouted(const TrialSpec& spec, const ForkRoute& route) {
    const std::string key = routeKey(route);
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::optional<Server> server = acquire(key, route);
      if (!server) return std::nullopt;
      Attempt a = attemptOn(*server, spec, route.child_argv);
      release(key, *server, a.server_ok);
      if (a.outcome && a.from_standby) count(&ForkServerCounts::from_standby);
      if (a.outcome) return a.outcome;
    }
    return std::nullopt;
  }

  // An idle server of the route; else, when another trial is starting one
  // (and its clones), that one's; else a new one.
  std::optional<Server> acquire(const std::string& key, const ForkRoute& route) {
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (unusable_.count(key)) return std::nullopt;
        auto& pool = idle_[key];
        if (!pool.empty()) {
          Server s = pool.back();
          pool.pop_back();
          return s;
        }
        if (!starting_.count(key)) break;
        started_.wait(lock);
      }
      starting_.insert(key);
    }
    std::string why;
    auto server = spawnServer(route, options_, why);  // seconds: not under the lock
    if (server) addClones(key, *server);
    std::lock_guard lock(mu_);
    starting_.erase(key);
    started_.notify_all();
    if (server) {
      ++counts_.servers_started;
      return server;
    }
    unusable_.insert(key);
    appendLog(options_.log_file, "fork server `" + route.server_argv.front() + "` not used: " + why +
                                     "; its trials run as plain processes");
    return std::nullopt;
  }

  // The first server of a route is cloned at once for the other job slots:
  // forked copies are ready in milliseconds, where starting each would put
  // another second-long start-up on the search's critical path.
  void addClones(const std::string& key, const Server& first) {
    {
      std::lock_guard lock(mu_);
      if (!cloned_.insert(key).second) return;
    }
    for (std::size_t i = 1; i < options_.servers_per_route; ++i) {
      std::string why;
      auto clone = cloneServer(first, why);
      if (!clone) {
        appendLog(options_.log_file, "could not clone a fork server (" + why + "); more start when needed");
        return;
      }
      std::lock_guard lock(mu_);
      ++counts_.servers_cloned;
      idle_[key].push_back(*clone);
    }
  }

  void release(const std::string& key, Server& s, bool ok) {
    if (!ok) {
      stopServer(s, 1s);
      std::lock_guard lock(mu_);
      ++counts_.servers_lost;
      if (++losses_[key] >= options_.max_losses) {
        unusable_.insert(key);
        appendLog(options_.log_file, "fork servers keep dying; trials run as plain processes from now on");
      }
      return;
    }
    std::lock_guard lock(mu_);
    losses_[key] = 0;
    idle_[key].push_back(s);
  }

  // A trial no server runs: a plain process, with the batch file written
  // first when the oracle left it to a server.
  TrialOutcome runPlain(const TrialSpec& spec) {
    count(&ForkServerCounts::plain);
    if (!spec.batch_selection.empty() && spec.write_batch) spec.write_batch();
    return fallback_.run(spec);
  }

  TrialOutcome finish(const TrialSpec& spec, TrialOutcome outcome) {
    count(&ForkServerCounts::forked);
    outcome.stdout_text = readHeadAndTail(spec.work_dir / "stdout.txt", spec.output_cap_bytes, &outcome.stdout_bytes);
    outcome.stderr_text = readHeadAndTail(spec.work_dir / "stderr.txt", spec.output_cap_bytes, &outcome.stderr_bytes);
    removeTrialTemp(spec.work_dir);
    return outcome;
  }

  void count(std::size_t ForkServerCounts::*field) {
    std::lock_guard lock(mu_);
    ++(counts_.*field);
  }

  ForkRouter router_;
  Executor& fallback_;
  ForkServerOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Server>> idle_;
  std::map<std::string, int> losses_;
  std::set<std::string> unusable_;
  std::set<std::string> cloned_;    // routes whose first server was cloned
  std::set<std::string> starting_;  // routes a trial is starting a server for
  std::condition_variable started_;
  ForkServerCounts counts_;
};

ForkServerExecutor::ForkServerExecutor(ForkRouter router, Executor& fallback, ForkServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(router), fallback, std::move(options))) {}
ForkServerExecutor::~ForkServerExecutor() = default;
TrialOutcome ForkServerExecutor::run(const TrialSpec& spec) { return impl_->run(spec); }
ForkServerCounts ForkServerExecutor::counts() const { return impl_->counts(); }
bool ForkServerExecutor::routes(const TrialSpec& spec) const { return impl_->routes(spec); }
bool ForkServerExecutor::buildsBatch(const TrialSpec& spec) const { return impl_->buildsBatch(spec); }

// ------------------------------------------------------------------ routes

namespace {

// The environment changes a server starts with: the case's, not minrepro's
// own per-trial MINREPRO_* variables (MINREPRO_TRIAL differs in every trial,
// and would need a server per trial); each child gets all of them anyway.
std::map<std::string, std::string> serverEnvironment(const TrialSpec& spec) {
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : spec.env_set)
    if (name.rfind("MINREPRO_", 0) != 0) env.emplace(name, value);
  return env;
}

// The variables a server must start without: only those this process has.
// Unsetting an absent one changes nothing, and must not need its own server
// (the final confirmation unsets every diagnostic variable).
std::vector<std::string> serverUnset(const TrialSpec& spec) {
  std::vector<std::string> unset;
  for (const auto& name : spec.env_unset)
    if (std::getenv(name.c_str()) != nullptr) unset.push_back(name);
  return unset;
}

}  // namespace

std::optional<ForkRoute> harnessForkRoute(const TrialSpec& spec, const std::string& trial_binary) {
  if (trial_binary.empty() || spec.argv.empty() || spec.argv.front() != trial_binary) return std::nullopt;
  ForkRoute r{{trial_binary, "--serve"}, serverEnvironment(spec), serverUnset(spec), spec.argv};
  for (std::size_t i = 1; i + 1 < spec.argv.size(); ++i)
    if (spec.argv[i] == "--model") r.server_argv.insert(r.server_argv.end(), {"--model", spec.argv[i + 1]});
  if (!spec.batch_case.empty()) {
    r.server_argv.insert(r.server_argv.end(), {"--preload-case", spec.batch_case.string()});
    r.builds_batch = true;
  }
  return r;
}

std::optional<ForkRoute> pythonForkRoute(const TrialSpec& spec, const std::string& server_script,
                                         const std::vector<std::string>& preload) {
  if (server_script.empty() || spec.argv.size() < 2) return std::nullopt;
  const std::string python = resolveProgram(spec.argv[0]);
  if (python.empty() || !isPythonProgram(python)) return std::nullopt;
  const bool unbuffered = spec.argv[1] == "-u";
  const std::size_t script_at = unbuffered ? 2 : 1;
  if (script_at >= spec.argv.size()) return std::nullopt;
  const fs::path script = spec.argv[script_at];
  std::error_code ec;
  // A relative script is relative to each trial's own directory: no shared server.
  if (!script.is_absolute() || script.extension() != ".py" || !fs::is_regular_file(script, ec)) return std::nullopt;
  ForkRoute r{{python}, serverEnvironment(spec), serverUnset(spec), {spec.argv.begin() + script_at, spec.argv.end()}};
  if (unbuffered) r.server_argv.push_back("-u");
  // Keyed by the script's directory (its sys.path[0]), so its sibling scripts share the server.
  r.server_argv.insert(r.server_argv.end(),
                       {server_script, "--script-dir", script.parent_path().string(), "--preload", "torch"});
  for (const auto& m : preload) r.server_argv.insert(r.server_argv.end(), {"--preload", m});
  return r;
}

std::string pythonForkServerScript() {
  return ownFile("py_fork_server.py", fs::path(MINREPRO_SOURCE_DIR) / "harness" / "py_fork_server.py");
}

std::string pythonNativeHooks() { return ownFile("libminrepro_pyhooks.so", MINREPRO_PY_HOOKS); }

ForkRouter trialForkRouter(const std::string& trial_binary, const std::vector<std::string>& preload) {
  return [trial_binary, script = pythonForkServerScript(), hooks = pythonNativeHooks(),
          preload](const TrialSpec& spec) -> std::optional<ForkRoute> {
    if (auto r = harnessForkRoute(spec, trial_binary)) return r;
    auto r = pythonForkRoute(spec, script, preload);
    if (r && !hooks.empty()) r->server_argv.insert(r->server_argv.end(), {"--native-hooks", hooks});
    return r;
  };
}

}  // namespace minrepro
