// Fork servers: every trial is still a fresh process (a new pid with its own
// address space, process group, directory, files, environment and limits,
// that nothing else runs in), but it is forked from a parent that has already
// loaded LibTorch (`minrepro-trial --serve`, harness/fork_server_main.h) or
// imported torch (harness/py_fork_server.py), so the 0.8 s / 2.3 s start-up
// is paid once per run instead of once per trial. A server forks each
// trial's child ahead, while the previous trial runs (the standby, which
// waits for its request having run nothing), so the fork is off the path too.
//
// The executor is the client side: it starts a server per kind of trial,
// sends it each trial, enforces the timeout itself (SIGTERM, then SIGKILL, to
// the child's group) and reads the wait status the server reports. A server
// that dies is restarted; one that cannot start (or is not safe to fork
// from) is not used again, and its trials run as plain processes through the
// fallback executor, as do trials no server can run. For trials that run at
// once (--jobs), a kind's first server is cloned: it forks a copy of itself.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/process/process.h"

namespace minrepro {

// How one trial runs in a fork server. Trials with the same server command
// line and environment changes share a server.
struct ForkRoute {
  std::vector<std::string> server_argv;
  std::map<std::string, std::string> server_env_set;  // the trial's, so that what libraries
  std::vector<std::string> server_env_unset;          // read when they load matches
  std::vector<std::string> child_argv;                // what the forked child runs
  // The server preloads the case's original batch and builds each
  // candidate from its selection (the built-in harness only).
  bool builds_batch = false;
};

// Per trial: the fork server that can run it, or nullopt for a plain process.
using ForkRouter = std::function<std::optional<ForkRoute>(const TrialSpec&)>;

// `minrepro-trial ARGS` (argv[0] == trial_binary) runs in `minrepro-trial --serve --model M`
// (and `--preload-case CASE` when the spec names its batch's case).
std::optional<ForkRoute> harnessForkRoute(const TrialSpec& spec, const std::string& trial_binary);

// `[python, (-u), /abs/script.py, args...]` runs in the Python fork server
// `[python, (-u), server_script, --script-dir D, --preload torch, --preload M...]`.
// Anything else (other interpreter flags, `-c`, `-m`, a relative or missing
// script, a program that is not python) is left to a plain process.
std::optional<ForkRoute> pythonForkRoute(const TrialSpec& spec, const std::string& server_script,
                                         const std::vector<std::string>& preload);

// harness/py_fork_server.py next to the running executable (the build copies
// it there), else in the source tree; "" when neither exists.
std::string pythonForkServerScript();
// The Python server's native hooks (harness/py_hooks.cc), next to the
// running executable or where the build put them; "" when neither exists.
std::string pythonNativeHooks();

struct ForkServerOptions {
  std::filesystem::path log_file;                    // servers' stderr and why a server was not used; empty: discarded
  std::chrono::milliseconds start_timeout{180'000};  // `import torch` on a loaded machine
  int max_losses = 3;  // servers of one kind lost in a row before that kind runs as plain processes
  // Trials that may run at once (--jobs): a route's first server is cloned
  // (forked by itself, milliseconds) up to this many, before its first trial.
  std::size_t servers_per_route = 1;
  // Each server forks the next trial's child while the current trial runs
  // (a standby, waiting for its request), taking the fork off the trial's
  // path. False only to measure what that saves (bench_fork_server).
  bool standby = true;
};

struct ForkServerCounts {
  std::size_t forked = 0;        // trials run as children of a server
  std::size_t from_standby = 0;  // of those, children the server had forked ahead
  std::size_t plain = 0;         // trials run by the fallback executor
  std::size_t servers_started = 0;
  std::size_t servers_cloned = 0;  // copies forked by a started server
  std::size_t servers_lost = 0;    // died or stopped answering
};

class ForkServerExecutor : public Executor {
 public:
  ForkServerExecutor(ForkRouter router, Executor& fallback, ForkServerOptions options = {});
  ~ForkServerExecutor() override;  // closes the servers' sockets: they exit, and are reaped
  ForkServerExecutor(const ForkServerExecutor&) = delete;
  ForkServerExecutor& operator=(const ForkServerExecutor&) = delete;

  // Thread-safe: concurrent trials of one kind get a server each.
  TrialOutcome run(const TrialSpec& spec) override;
  ForkServerCounts counts() const;
  // Whether a server would run this trial (else it runs as a plain process).
  bool routes(const TrialSpec& spec) const;
  // A server that preloads the batch would run it (and, should it fall
  // back to a plain process, spec.write_batch writes the file first).
  bool buildsBatch(const TrialSpec& spec) const override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The routes of a shrink job's trials: the built-in harness, and Python
// scripts (with the case's preloaded modules and the native hooks).
ForkRouter trialForkRouter(const std::string& trial_binary, const std::vector<std::string>& preload);

}  // namespace minrepro
