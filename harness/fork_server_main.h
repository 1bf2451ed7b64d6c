// `minrepro-trial --serve [--model M.pt] [--preload-case CASE] [--no-standby]`:
// the built-in harness's fork server.
//
// The parent has loaded LibTorch (it is linked in), deserialised the model once,
// read the case's original batch once when asked (--preload-case: a `run`
// request with `selection=` then gets its candidate cut from it in the child,
// in memory, instead of a file written and read per trial),
// set one intra-op thread before any op and never touches an accelerator. It
// reads requests on fd 3 (core/process/fork_protocol.h): `clone` forks a copy of the
// server for another job slot; a `run` request goes to a child forked for it
// ahead, during the previous trial (the standby, which has run nothing but
// its own set-up), or forked then. That child becomes a fresh trial: its own
// process group, stdin from /dev/null, stdout/stderr to the trial's files,
// the trial's environment and directory, core dumps off, optional RLIMIT_AS;
// then it runs trialMain with the trial's argv, exactly as `minrepro-trial
// ARGS` would, and ends with _exit. The parent reports the child's pid, then its raw wait status after
// killing whatever the child left in its group. The parent never runs the
// model; it exits when the client closes the socket.
#pragma once

namespace minrepro {

int forkServerMain(int argc, char** argv);

}  // namespace minrepro
