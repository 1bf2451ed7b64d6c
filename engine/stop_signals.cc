// The signals a run answers (see the header for why).
#include "engine/stop_signals.h"

#include <unistd.h>

#include <cstring>

namespace minrepro {

namespace {

std::atomic<bool> g_best{false};
std::atomic<pid_t> g_group_killed_on_exit{0};
std::atomic<const char*> g_said{StopOnSignals::kShrinkStops};

// Said at once (write(2) is async-signal-safe): what follows a Ctrl-C, the
// running trials ended and the archive written, takes seconds with a
// large batch, and silence then reads as a hang.
extern "C" void requestStop(int) {
  if (stopAsked().exchange(true)) return;
  const char* said = g_said.load();
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, said, std::strlen(said));
}
// Said before the exit: a line begun before a long read ("minrepro check: "
// and a batch being parsed) was left without its end (probe 34).
extern "C" void exitInterrupted(int) {
  if (const pid_t group = g_group_killed_on_exit.load(); group > 0) ::kill(-group, SIGKILL);
  static constexpr char kSaid[] = "\nminrepro: interrupted\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
  ::_exit(130);
}
extern "C" void surviveBrokenPipe(int) {}
extern "C" void requestBest(int) { g_best.store(true); }

}  // namespace

bool takeBestAsked() { return g_best.exchange(false); }

void setGroupKilledOnExit(pid_t group) { g_group_killed_on_exit.store(group); }

void exitOnStopSignals() {
  struct sigaction exit_at_once {};
  exit_at_once.sa_handler = exitInterrupted;
  sigemptyset(&exit_at_once.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &exit_at_once, nullptr);
}

StopOnSignals::StopOnSignals(const char* said) {
  if (depth_++ == 0) {
    stopAsked().store(false);
    g_said.store(said);
  }
  struct sigaction stop {
  }, broken_pipe{}, best{};
  stop.sa_handler = requestStop;
  broken_pipe.sa_handler = surviveBrokenPipe;
  best.sa_handler = requestBest;
  sigemptyset(&stop.sa_mask);
  sigemptyset(&broken_pipe.sa_mask);
  sigemptyset(&best.sa_mask);
  for (std::size_t i = 0; i < kSignals.size(); ++i)
    ::sigaction(kSignals[i], kSignals[i] == SIGPIPE ? &broken_pipe : kSignals[i] == SIGUSR1 ? &best : &stop, &old_[i]);
}

StopOnSignals::~StopOnSignals() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  --depth_;
}

}  // namespace minrepro
