// The flag that SIGINT, SIGTERM and SIGHUP set once a command handles them
// (engine/stop_signals.h installs the handlers). It lives here, below the
// engine, because core's own long waits read it too: the bounded search of
// a failure.message pattern ends on it rather than waiting its 5 s out.
#pragma once

#include <atomic>

namespace minrepro {

std::atomic<bool>& stopAsked();

}  // namespace minrepro
