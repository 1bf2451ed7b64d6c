// Reading the errors out of one process's output (one stream of lines).
//
// PyTorch and the programs around it print an error in a few forms, each
// with its own reader (core/error_readers.cc): a CUDA/HIP kernel assertion,
// std::terminate's report, a Python traceback, a bare "SomeError: message"
// line, a LibTorch what() with its origin, Python's faulthandler dump of a
// fatal signal, glibc's heap-check abort, a DataLoader worker's signal
// report, a shell's or launcher's report of a process killed by a signal.
// Wrappers are unwrapped where they are read: TorchScript's interpreter
// error, torch.multiprocessing's ProcessRaisedException, the DataLoader's
// "Caught X in DataLoader worker process N", torchrun's ChildFailedError.
//
// Which of the errors of a log is the first one, across ranks and processes,
// is decided by engine/log_streams; what family it belongs to by
// engine/failure_signature.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/text_lines.h"

namespace minrepro {

// What an error says about the failure. A process that raised is the first
// error's candidate; a report that some process died (a launcher's summary,
// a DataLoader's "worker is killed by signal") stands in for it only when
// the process that died printed nothing; a consequence (a collective timing
// out, a peer's connection closing) never does while a cause is in the log.
enum class ErrorRole { Raised, DeathReport, Consequence };

struct RawError {
  std::string type;     // exception type as printed; empty when none was printed
  std::string message;  // first line of the message, as printed
  std::string op;       // operator named by the error's context, already cleaned
  bool kernel_assert = false;
  std::string signal_name;  // "SIGSEGV" when the error reports a fatal signal
  std::string process;      // "process 1", "DataLoader worker process 0", "rank 1": named by a wrapper
  std::string user_frame;   // innermost frame outside the libraries: "/src/train.py:42 in step"
  // Innermost frame outside torch's own packages and the standard library:
  // a package of the user's, installed (site-packages/mylib.py:4 in check).
  std::string package_frame;
  ErrorRole role = ErrorRole::Raised;
  std::size_t line = 0;  // first line of the error in its stream
  std::size_t end = 0;   // one past its last line
};

// The errors in the lines, in order, each block read once (a traceback's
// exception line is not read again as a bare line). Reading stops after the
// first error a process raised when `after_first_raised` is Stop: nothing
// after it in this stream can be the first error (a trial's signature needs
// no more); Continue reads them all, for what triage sets aside.
enum class AfterFirstRaised { Stop, Continue };
std::vector<RawError> readErrors(const text::Lines& lines, AfterFirstRaised after_first_raised);

// "collective timeout" or "lost connection" when the error is one
// that a failure elsewhere causes (gloo, NCCL, the TCP store); else empty.
std::string consequenceKind(const RawError& error);

// The first CUDA/HIP kernel assertion in the lines, which names the kernel
// (a device assert's Python error does not).
std::optional<RawError> findKernelAssert(const text::Lines& lines);

// "minrepro-trial: operator: nll_loss": the built-in harness names the op.
std::string harnessOp(const text::Lines& lines);

// The operator a message names ("Could not run 'aten::add.out'" -> "add").
std::string opFromMessage(const std::string& message);

}  // namespace minrepro
