// The wire format between minrepro and a fork server (harness/fork_server_main.cc,
// harness/py_fork_server.py), over a Unix stream socket inherited as fd 3.
//
// A message is a list of key/value string pairs:
//   u32 field count, then per field u32 length and its bytes (little endian),
// the fields alternating key, value. Keys may repeat ("arg", "env").
// Python writes it with struct.pack("<I"), so both sides stay a few lines.
// Replies name their kind in their first key:
//
//   server -> client, once: ready=PID threads=N cuda=0|1
//   client -> server:       op=run dir=D stdout=F stderr=F as_limit=BYTES arg=... env=K=V ...
//                           [selection=TEXT]  (the built-in harness's server, started with
//                                         --preload-case: the candidate to cut from the original
//                                         it holds, instead of reading the --batch file)
//   server -> client:       started=PID standby=0|1   (the child, leader of its own
//                                         process group; 1: forked ahead, during the last trial)
//                        or error=TEXT    (nothing was started)
//   server -> client:       exited=W      (raw wait status, after the group was killed)
//
//   client -> server:       op=clone      (a copy of this server, made by fork: no second start-up)
//   server -> client:       cloned=1, then one byte carrying the copy's socket (SCM_RIGHTS)
//                        or error=TEXT
//   copy -> client, once:   ready=PID threads=N cuda=0|1   (on the passed socket)
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minrepro {

struct ForkMessage {
  std::vector<std::pair<std::string, std::string>> fields;

  void add(std::string key, std::string value) { fields.emplace_back(std::move(key), std::move(value)); }
  // The first value of `key`, or "" when absent.
  std::string get(const std::string& key) const;
  // Every value of `key`, in order.
  std::vector<std::string> all(const std::string& key) const;
};

// The fd a fork server finds its socket on (dup2'd there before exec).
inline constexpr int kForkServerFd = 3;

// Writes a whole message; false when the peer is gone (never raises SIGPIPE).
bool sendMessage(int fd, const ForkMessage& message);

// Reads one whole message, waiting at most until `deadline` (none: forever).
// nullopt on end of file, error, a malformed message or the deadline.
std::optional<ForkMessage> receiveMessage(int fd, std::optional<std::chrono::steady_clock::time_point> deadline = {});

// Waits until `fd` is readable or `deadline`; true when readable (or closed).
bool waitReadable(int fd, std::chrono::steady_clock::time_point deadline);

// Passes `fd` over the Unix socket `sock` (one byte with SCM_RIGHTS).
bool sendFd(int sock, int fd);
// Receives a passed fd (close-on-exec); -1 on error, end of file or the deadline.
int receiveFd(int sock, std::chrono::steady_clock::time_point deadline);

}  // namespace minrepro
