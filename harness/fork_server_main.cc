// The built-in harness's fork server; see harness/fork_server_main.h.
// Rules that keep forked children from hanging (docs/fork-servers.md):
// one thread in the parent, at::set_num_threads(1) before any op and again in
// the child, no at::launch, children end with _exit. The parent never
// initialises CUDA: a CUDA context does not survive fork(). Its only ops are
// the warm-up on made-up CPU tensors below.
#include "harness/fork_server_main.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/jit.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/process/fork_protocol.h"
#include "harness/trial_main.h"

namespace minrepro {

namespace {

constexpr int kSock = kForkServerFd;

// What the client's `ready` check reads: a parent with more than one thread
// or a CUDA driver mapped is not safe to fork from.
int threadCount() {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != decltype(it)(); ++it) ++n;
  return n;
}

bool cudaDriverLoaded() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("libcuda.so") != std::string::npos) return true;
  return false;
}

// The trial's stdin/stdout/stderr, opened by the parent so that a bad path is
// reported as an error instead of a child that dies unexplained.
struct TrialFds {
  int in = -1, out = -1, err = -1;
  void close() {
    for (int fd : {in, out, err})
      if (fd >= 0) ::close(fd);
  }
};

std::string openTrialFds(const ForkMessage& m, TrialFds& fds) {
  fds.in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  fds.out = ::open(m.get("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int out_errno = errno;
  fds.err = ::open(m.get("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fds.in >= 0 && fds.out >= 0 && fds.err >= 0) return "";
  const std::string why = std::strerror(fds.out < 0 ? out_errno : errno);
  fds.close();
  return "cannot open the trial's output files: " + why;
}

void replaceEnvironment(const std::vector<std::string>& env) {
  ::clearenv();
  for (const std::string& kv : env) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) ::setenv(kv.substr(0, eq).c_str(), kv.c_str() + eq + 1, 1);
  }
}

void applyLimits(const std::string& as_limit) {
  struct rlimit no_core {
    0, 0
  };
  ::setrlimit(RLIMIT_CORE, &no_core);
  const unsigned long long bytes = std::strtoull(as_limit.c_str(), nullptr, 10);
  if (bytes > 0) {
    struct rlimit as {
      bytes, bytes
    };
    ::setrlimit(RLIMIT_AS, &as);
  }
}

// Signal state as a freshly exec'd process has it.
void resetSignals() {
  for (int sig : {SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// What every child does first, whatever its trial: its own process group,
// signals as after exec, no server socket (a grandchild holding it would hide
// the client's exit from us), one thread until trialMain sets the trial's.
void prepareChild() {
  ::setpgid(0, 0);
  resetSignals();
  ::close(kSock);
  at::set_num_threads(1);
}

// The prepared child becomes the trial, then runs what `minrepro-trial ARGS` runs.
[[noreturn]] void becomeTrial(const ForkMessage& m, const TrialFds& fds) {
  ::dup2(fds.in, 0);
  ::dup2(fds.out, 1);
  ::dup2(fds.err, 2);
  for (int fd : {fds.in, fds.out, fds.err})
    if (fd > 2) ::close(fd);  // as after exec: nothing open past 0, 1, 2 (these are close-on-exec)
  if (::chdir(m.get("dir").c_str()) != 0) {
    std::fprintf(stderr, "minrepro-trial --serve: cannot enter %s: %s\n", m.get("dir").c_str(), std::strerror(errno));
    ::_exit(127);
  }
  replaceEnvironment(m.all("env"));
  applyLimits(m.get("as_limit"));
  if (const std::string selection = m.get("selection"); !selection.empty()) {
    try {
      useCandidateOfPreloaded(selection);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "minrepro-trial --serve: cannot cut the candidate from the preloaded batch: %s\n", e.what());
      ::_exit(127);
    }
  }
  std::vector<std::string> args = m.all("arg");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = trialMain(static_cast<int>(args.size()), argv.data());
  std::cout.flush();  // what exit() would have flushed; _exit skips the parent's atexit state
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(rc);
}

// The standby: a child forked ahead of its trial, while the previous trial
// runs (on the other core), that waits on its channel for the request and
// the trial's stdin/stdout/stderr. The fork and prepareChild are then off
// the trial's path. It ran nothing but prepareChild: still a fresh process
// that no other trial ran in. It ends quietly when the channel closes unused.
struct Standby {
  pid_t pid = -1;
  int channel = -1;  // the server's end
};
Standby g_standby;
bool g_standby_wanted = true;  // false with --no-standby: each trial forks on demand

[[noreturn]] void runStandby(int channel) {
  prepareChild();
  const auto request = receiveMessage(channel);
  if (!request) ::_exit(0);
  TrialFds fds;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int* fd : {&fds.in, &fds.out, &fds.err}) *fd = receiveFd(channel, deadline);
  // Taken: only now may the server report the trial started; without this
  // byte it forks the trial itself, and this child ends having run nothing.
  const bool taken = fds.in >= 0 && fds.out >= 0 && fds.err >= 0 && ::send(channel, "k", 1, MSG_NOSIGNAL) == 1;
  ::close(channel);
  if (!taken) ::_exit(0);
  becomeTrial(*request, fds);
}

// fork() for a trial's process, standby or not: nothing buffered may be
// duplicated into the child, and the parent also makes it a group leader,
// so that the group exists before the client can signal it.
pid_t forkChild() {
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid > 0) ::setpgid(pid, pid);
  return pid;
}

void forkStandby() {
  if (!g_standby_wanted) return;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;  // trials then fork on demand
  const pid_t pid = forkChild();
  if (pid == 0) {
    ::close(sv[0]);
    runStandby(sv[1]);
  }
  ::close(sv[1]);
  if (pid < 0)
    ::close(sv[0]);
  else
    g_standby = {pid, sv[0]};
}

// A standby that cannot take its trial (it died, say) is killed and reaped.
void dropStandby() {
  if (g_standby.pid < 0) return;
  ::close(g_standby.channel);
  ::kill(-g_standby.pid, SIGKILL);
  ::waitpid(g_standby.pid, nullptr, 0);
  g_standby = {};
}

// Gives the standby the request and the trial's files; true once it says it
// has them (a byte back), so that a standby that died or failed is never
// reported as the trial.
bool handOver(const ForkMessage& request, const TrialFds& fds) {
  bool handed = sendMessage(g_standby.channel, request);
  for (int fd : {fds.in, fds.out, fds.err}) handed = handed && sendFd(g_standby.channel, fd);
  char taken = 0;
  return handed && waitReadable(g_standby.channel, std::chrono::steady_clock::now() + std::chrono::seconds(30)) &&
         ::read(g_standby.channel, &taken, 1) == 1 && taken == 'k';
}

// The trial's process: the standby when it takes the request, else a fork now.
pid_t startChild(const ForkMessage& request, const TrialFds& fds, bool& from_standby) {
  from_standby = false;
  if (g_standby.pid > 0) {
    if (handOver(request, fds)) {
      const pid_t pid = g_standby.pid;
      ::close(g_standby.channel);
      g_standby = {};
      from_standby = true;
      return pid;
    }
    dropStandby();
  }
  const pid_t pid = forkChild();
  if (pid == 0) {
    prepareChild();
    becomeTrial(request, fds);
  }
  return pid;
}

// Blocks until the child ends. When the client goes away meanwhile, the
// trial's group is killed and the server exits: nobody would enforce its timeout.
void awaitChild(pid_t pid) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return;  // old kernel: waitid below blocks, the client still times out
  struct pollfd p[2] = {{pidfd, POLLIN, 0}, {kSock, POLLIN, 0}};
  while (!(p[0].revents & POLLIN)) {
    if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::_exit(0);
    }
  }
  ::close(pidfd);
}

// Waits for the child, kills what it left in its group while the group id
// is still held by the unreaped child, then reaps it.
int reap(pid_t pid) {
  awaitChild(pid);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

bool serveOne(const ForkMessage& request) {
  TrialFds fds;
  ForkMessage reply;
  if (const std::string why = openTrialFds(request, fds); !why.empty()) {
    reply.add("error", why);
    return sendMessage(kSock, reply);
  }
  bool from_standby = false;
  const pid_t pid = startChild(request, fds, from_standby);
  fds.close();
  if (pid < 0) {
    reply.add("error", std::string("fork failed: ") + std::strerror(errno));
    return sendMessage(kSock, reply);
  }
  reply.add("started", std::to_string(pid));
  reply.add("standby", from_standby ? "1" : "0");
  if (!sendMessage(kSock, reply)) {
    ::kill(-pid, SIGKILL);
    reap(pid);
    return false;
  }
  forkStandby();  // the next trial's process, made while this one runs (on the other core)
  ForkMessage done;
  done.add("exited", std::to_string(reap(pid)));
  return sendMessage(kSock, done);
}

// A made-up TorchScript function, run on zeros in the parent. The first
// TorchScript call in a process builds global tables (builtins, passes, the
// profiling executor) that cost ~90 ms; built here, every child inherits
// them instead of rebuilding them. It is not the model and not the batch.
constexpr const char* kWarmUpSource = R"JIT(
def warm_up(x: Tensor, target: Tensor):
    y = torch.relu(torch.linear(x, x))
    return torch.nll_loss(torch.log_softmax(y, 1), target) + torch.cross_entropy_loss(y, target)
)JIT";

// Also warms the unpickler that reads each batch and the c10 error path.
// One thread only (set before), so no OpenMP pool exists when we fork.
void warmUp() {
  try {
    c10::InferenceMode guard;
    auto unit = torch::jit::compile(kWarmUpSource);
    for (int i = 0; i < 2; ++i) unit->run_method("warm_up", at::zeros({2, 2}), at::zeros({2}, at::kLong));
    const auto bytes = torch::jit::pickle_save(c10::IValue(at::zeros({2})));
    torch::jit::pickle_load(bytes);
    TORCH_CHECK_INDEX(false, "warm-up");
  } catch (const std::exception&) {
  }
}

std::string argValue(int argc, char** argv, const std::string& flag) {
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == flag) return argv[i + 1];
  return "";
}

bool hasFlag(int argc, char** argv, const std::string& flag) {
  for (int i = 2; i < argc; ++i)
    if (argv[i] == flag) return true;
  return false;
}

bool sendReady() {
  ForkMessage ready;
  ready.add("ready", std::to_string(::getpid()));
  ready.add("threads", std::to_string(threadCount()));
  ready.add("cuda", cudaDriverLoaded() ? "1" : "0");
  return sendMessage(kSock, ready);
}

// A copy of this server for another job slot, made by fork: milliseconds
// instead of a second start-up. Returns true in the copy, which then serves
// on its own socket (passed to the client); false here, with `client_alive`
// false when the client is gone. The copy is a grandchild whose parent
// exits at once: nobody here has to reap it, and it ends when its socket does.
bool cloneServer(bool& client_alive) {
  ForkMessage reply;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    reply.add("error", std::string("socketpair failed: ") + std::strerror(errno));
    client_alive = sendMessage(kSock, reply);
    return false;
  }
  std::cout.flush();  // nothing buffered may be duplicated into the copy
  std::fflush(nullptr);
  const pid_t middle = ::fork();
  if (middle == 0) {
    if (::fork() != 0) ::_exit(0);  // failed or the parent: the socket's end of file tells the client
    ::setpgid(0, 0);
    ::dup2(sv[1], kSock);                                    // replaces our end of the original's socket
    if (g_standby.channel >= 0) ::close(g_standby.channel);  // the original's child, not ours
    g_standby = {};
    ::close(sv[0]);
    ::close(sv[1]);
    return true;
  }
  ::close(sv[1]);
  if (middle > 0) ::waitpid(middle, nullptr, 0);
  if (middle < 0)
    reply.add("error", std::string("fork failed: ") + std::strerror(errno));
  else
    reply.add("cloned", "1");
  client_alive = sendMessage(kSock, reply) && (middle < 0 || sendFd(kSock, sv[0]));
  ::close(sv[0]);
  return false;
}

}  // namespace

int forkServerMain(int argc, char** argv) {
  at::set_num_threads(1);  // before any op: no OpenMP pool may exist when we fork
  warmUp();
  if (const std::string model = argValue(argc, argv, "--model"); !model.empty()) preloadModelFile(model);
  if (const std::string case_file = argValue(argc, argv, "--preload-case"); !case_file.empty()) {
    try {
      preloadCaseBatch(case_file);
    } catch (const std::exception& e) {
      // Not ready: the client runs these trials as plain processes, from files.
      std::cerr << "minrepro-trial --serve: cannot preload the batch of " << case_file << ": " << e.what() << "\n";
      return 1;
    }
  }
  g_standby_wanted = !hasFlag(argc, argv, "--no-standby");
  if (!sendReady()) return 1;
  forkStandby();
  while (const auto request = receiveMessage(kSock)) {
    const std::string op = request->get("op");
    if (op == "clone") {
      bool client_alive = true;
      if (cloneServer(client_alive)) {
        if (!sendReady()) return 1;  // the copy's first words, on its own socket
        forkStandby();
      } else if (!client_alive) {
        break;
      }
      continue;
    }
    if (op != "run" || !serveOne(*request)) break;
  }
  // The client is gone and nothing here needs finalising: skipping LibTorch's
  // static destructors lets minrepro, which waits for its servers, end at once.
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(0);
}

}  // namespace minrepro
