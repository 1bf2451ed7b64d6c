// The op-level reproducer: the one ATen operator call that fails, with its
// inputs, runnable without the user's model, data pipeline or code
// (docs/method.md, "The failing operator").
//
// After the archive is written, its repro.py runs once more, extracted into
// an empty directory, with the op recorder loaded into every Python process
// (harness/python/op_recorder: a TorchDispatchMode, so forward and backward
// calls, from Python and from TorchScript alike). An exception names the call
// that raised it; a fatal signal leaves the number of the call it died in,
// and a second run saves that call's inputs just before it runs. The call
// becomes op/repro_op.py and op/inputs.pt, kept only when it fails alone in
// fresh processes the way the case does (family, message shape, signal).
// A failure that needs what earlier calls did (a wrong value the program
// checks itself, a race, global state) is not kept: REPORT.md says which call
// was found and why it does not stand alone.
//
// The call's tensors then form a case of their own that the same engine
// shrinks (the caller supplies the reduction: engine/op_call_reduction.h), along
// the axis they share, then their values; small plain tensors end up written
// into the script itself.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/failure_signature.h"
#include "core/process/job_slots.h"
#include "engine/archive/self_check.h"

namespace minrepro {

// One tensor argument of the call, as call.txt describes it.
struct OpTensor {
  std::string name;  // the schema's argument name ("self", "target"), numbered inside lists
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string layout;  // "stride [4,1] offset 0"
  std::string device;
  std::string storage;  // "own" or "shared with mat2"

  std::string describe() const;  // "self float32 [3,4] stride [4,1] offset 0 cpu, own storage"
};

// call.txt, written by harness/python/op_recorder/minrepro_op.py.
struct OpCall {
  std::string op;                 // "aten::nll_loss_forward.default"
  std::string call;               // "torch.ops.aten.nll_loss_forward.default"
  std::string phase;              // "forward", "backward", "unknown" (torch 1.13 cannot tell for most calls)
  std::size_t index = 0;          // its place among the process's operator calls, from 1
  std::string error;              // "IndexError: Target 4 is out of bounds."; empty for a fatal signal
  std::vector<std::string> args;  // Python source, tensors as T['name']
  std::vector<OpTensor> tensors;
  std::string unsupported;  // an argument that cannot be written as source; empty when none
};

// Reads call.txt; nullopt when the file is missing or names no operator.
std::optional<OpCall> readOpCall(const std::filesystem::path& file);

// How the call's inputs are reduced: the axis each tensor is cut along, and
// whether there is anything to cut. Cut: the length that most tensors have
// as their first axis, when two or more do (the batch of a loss's input and
// target; CTC's targets and lengths, with log_probs [T, N, C] cut along N),
// each tensor along its first axis of that length; never when a tensor has
// that length on two axes (which one is the batch?) or a non-tensor
// argument names it (a view's shape: the cut would make a size error of its
// own). Otherwise only the values pass runs, on one axis that carries the
// case (of length 1 where one exists). Empty `axes` when every tensor is a
// scalar.
struct OpCaseAxes {
  std::map<std::string, int> axes;
  bool cut = false;
};
OpCaseAxes sharedSampleAxes(const std::vector<OpTensor>& tensors, const std::vector<std::string>& args = {});

// case.yaml for reducing the call's inputs: repro_op.py run on each
// candidate; the samples pass when there is an axis to cut, then values;
// flaky handling only for a `flaky` failure.
std::string renderOpCase(const std::string& python, const OpCaseAxes& axes, const FailureSignature& signature,
                         std::chrono::milliseconds timeout, bool flaky);

enum class OpReproStatus {
  Made,         // op/repro_op.py fails alone like the case
  NotIsolated,  // no call fails alone like the case: `why`
  NotTried,     // --no-op-repro, an interrupted run, a family no call explains (a timeout): `why`
};

struct OpRepro {
  OpReproStatus status = OpReproStatus::NotTried;
  std::string why;
  std::optional<OpCall> found;    // the call as recorded
  std::optional<OpCall> reduced;  // the call repro_op.py makes (Made)
  std::string script;             // repro_op.py (Made)
  std::filesystem::path dir;      // holds repro_op.py and inputs.pt (Made)
  std::size_t processes = 0;      // runs of the step besides the reduction's trials
  std::size_t reduction_trials = 0;
  double reduction_seconds = 0;  // the bound its reduction had (OpStep::reduction_seconds)
  std::string not_reduced;       // why the call's inputs stayed as recorded; empty when reduced
  std::string alone;             // "failed alone in 3 of 3 runs"
  int alone_runs = 0;            // of the last check alone (the script kept, when Made)
  int alone_failed = 0;          // of those, failed like the case
};

// What the reduction of the call's inputs gives back.
struct OpReduction {
  std::filesystem::path inputs;  // the reduced inputs.pt; empty: not reduced
  std::size_t trials = 0;
  std::string why_not;  // when not reduced
};

// What the reduction of the call's inputs may use: the slots it shares
// (null: its own one), seconds (0: no bound but its own), and the warm
// Python its trials may fork from (null: its own fork server).
struct OpReductionBounds {
  JobSlots* slots = nullptr;
  double seconds = 0;
  Executor* warm = nullptr;
};

struct OpStep {
  std::filesystem::path archive;  // just written
  std::filesystem::path work;     // the run's work directory (op/ and op-*/ go there)
  std::string python;
  FailureSignature signature;  // the case's
  std::string message_regex;   // case.yaml's failure.message, compared as the trials did
  SelfCheckPlan plan;          // runs of repro_op.py that must fail (3; more when flaky)
  std::chrono::milliseconds timeout{60'000};
  const std::atomic<bool>* stop = nullptr;
  // Shrinks the case in the directory given (case.yaml, repro_op.py,
  // inputs.pt); null: the call's inputs are kept as recorded.
  std::function<OpReduction(const std::filesystem::path& case_file, const OpReductionBounds& bounds)> reduce;
  // At most this long for that reduction (a third of the shrink's time,
  // engine/shrink.cc); 0: the reduction's own bound.
  double reduction_seconds = 0;
  // The op recorder's directory of a run of the minimal case that already
  // failed like the case (the file trace's run carries the recorder):
  // the call is found there, without a run of its own. Empty: repro.py
  // runs once more with the recorder.
  std::filesystem::path recorded;
  // The --jobs slots this step's processes share with the self-check that
  // runs beside it (null: one at a time).
  JobSlots* slots = nullptr;
  // A warm Python (the run's fork server, torch imported once) for the
  // runs of the step's own that need no fresh process: rendering
  // repro_op.py, the reduction's trials, and every run of the call alone
  // but the first, which is a fresh process. Null: all plain processes.
  // The self-check's runs of repro.py never come here.
  Executor* warm = nullptr;
};

// What a Python process is given to load the op recorder: its directory
// first on PYTHONPATH (`pythonpath` after it: the trial's own, else this
// process's), where to write, whether to note each call before it runs
// (only a fatal signal needs it: a write per call), and whether to look
// for the first call that makes a NaN or an inf (a non-finite failure: a
// check of every call's outputs).
std::map<std::string, std::string> recorderEnvironment(const std::filesystem::path& record_dir, bool note_calls,
                                                       const std::optional<std::string>& pythonpath = std::nullopt,
                                                       bool first_non_finite = false);

// Whether the recorder can find the call of a failure of this family from
// a run that carried it (a fatal signal needs a second run of its own).
bool recorderCanRide(FailureFamily family);

// Locates, extracts, checks and reduces the failing call; never throws for
// what the case does (a call that cannot be isolated is an outcome).
OpRepro makeOpRepro(const OpStep& step);

// Whether repro_op.py in `dir` (with its inputs.pt) fails like `signature`
// in `plan.runs` fresh processes in an empty directory; `first_difference`
// gets the first run that did not.
struct OpAlone {
  int runs = 0;
  int failed_alike = 0;
  std::string first_difference;
  bool passed(const SelfCheckPlan& plan) const;
};
OpAlone runOpAlone(const std::filesystem::path& dir, const OpStep& step, const SelfCheckPlan& plan);

// The op recorder's directory (harness/python/op_recorder, copied beside the
// binaries by the build); "" when neither copy exists.
std::string opRecorderDir();

}  // namespace minrepro
