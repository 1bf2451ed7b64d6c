#include "core/process/containment.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

namespace minrepro {

namespace {

std::mutex g_scope_mutex;
std::string g_scope;  // guarded by g_scope_mutex
std::atomic<std::uint64_t> g_next_tag{0};

// The live children of this process: every thread's list (an orphan is
// reparented to any live thread of the subreaper).
std::vector<pid_t> childrenOfSelf() {
  std::set<pid_t> pids;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t pid; in >> pid;) pids.insert(pid);
  }
  return {pids.begin(), pids.end()};
}

// The value of `name` in a process's environment ("" when absent or unreadable).
std::string environmentValue(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = name + "=";
  for (std::string entry; std::getline(in, entry, '\0');)
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  return "";
}

// Whether the process works in `dir` or below it (a deleted directory too).
bool worksIn(pid_t pid, const fs::path& dir) {
  if (dir.empty()) return false;
  std::error_code ec;
  std::string cwd = fs::read_symlink("/proc/" + std::to_string(pid) + "/cwd", ec).string();
  if (ec) return false;
  if (const std::string deleted = " (deleted)"; cwd.ends_with(deleted)) cwd.resize(cwd.size() - deleted.size());
  const std::string root = fs::weakly_canonical(dir, ec).string();
  return !root.empty() && (cwd == root || cwd.rfind(root + "/", 0) == 0);
}

// Whether the process has a controlling terminal (field 7 of /proc/PID/stat).
bool hasTerminal(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 2));
  std::string state, ppid, pgrp, session;
  long tty = 0;
  fields >> state >> ppid >> pgrp >> session >> tty;
  return tty != 0;
}

void killAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::kill(-pid, SIGKILL);  // its group too, when it made one with setsid()
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

void adoptOrphans() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::string trialScope() {
  std::lock_guard<std::mutex> lock(g_scope_mutex);
  return g_scope;
}

void setTrialScope(const std::string& scope) {
  std::lock_guard<std::mutex> lock(g_scope_mutex);
  g_scope = scope;
}

std::string newTrialTag() {
  std::string scope;
  {
    std::lock_guard<std::mutex> lock(g_scope_mutex);
    scope = g_scope.empty() ? "pid-" + std::to_string(::getpid()) : g_scope;
  }
  return scope + "/" + std::to_string(::getpid()) + "." + std::to_string(++g_next_tag);
}

std::size_t killTrialOrphans(const std::string& tag, const fs::path& trial_dir) {
  std::size_t killed = 0;
  for (bool found = true; found;) {
    found = false;
    for (const pid_t pid : childrenOfSelf()) {
      if (environmentValue(pid, kTrialTagVariable) != tag && !worksIn(pid, trial_dir)) continue;
      killAndReap(pid);
      ++killed;
      found = true;
    }
  }
  return killed;
}

void reapGroup(pid_t group) {
  for (int i = 0; i < 100; ++i) {
    const pid_t reaped = ::waitpid(-group, nullptr, WNOHANG);
    if (reaped < 0) return;  // no child of ours left in the group
    if (reaped == 0) ::usleep(10'000);
  }
}

std::size_t killLeftovers(const std::string& scope, const fs::path& trials_dir) {
  const std::string prefix = scope + "/";
  std::size_t killed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    const std::string tag = environmentValue(pid, kTrialTagVariable);
    // "<scope>/<pid>.<n>": a tag of a run in a directory nested inside this one has another '/'.
    const bool tagged = tag.rfind(prefix, 0) == 0 && tag.find('/', prefix.size()) == std::string::npos;
    // By working directory only what has no terminal: a shell someone opened in a trial directory stays.
    if (!tagged && !(worksIn(pid, trials_dir) && !hasTerminal(pid))) continue;
    ::kill(pid, SIGKILL);
    ++killed;
  }
  return killed;
}

std::size_t killAllOrphans() {
  std::size_t killed = 0;
  for (std::vector<pid_t> children = childrenOfSelf(); !children.empty(); children = childrenOfSelf()) {
    for (const pid_t pid : children) killAndReap(pid);
    killed += children.size();
  }
  // Orphans that had already exited are zombies, listed nowhere above.
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return killed;
}

}  // namespace minrepro
