// The op step: the one ATen operator call that fails, with its inputs,
// runnable without the user's model, data pipeline or code (docs/method.md,
// "The failing operator"), as op/repro_op.py and op/inputs.pt.
//
// After the archive is written, its repro.py runs once more, extracted into
// an empty directory, with the op recorder loaded into every Python process
// (engine/op_step/op_recorder.h; a TorchDispatchMode, so forward and
// backward calls, from Python and from TorchScript alike). An exception
// names the call that raised it; a fatal signal leaves the number of the
// call it died in, and a second run saves that call's inputs just before it
// runs. The call is kept only when it fails alone in fresh processes the
// way the case does (family, message shape, signal). A failure that needs
// what earlier calls did (a wrong value the program checks itself, a race,
// global state) is not kept: REPORT.md says which call was found and why it
// does not stand alone.
//
// The call's tensors then form a case of their own (engine/op_step/op_case.h)
// that the same engine shrinks, along the axis they share, then their
// values; small plain tensors end up written into the script itself. That
// reduction is a nested run of the conductor (engine/shrink.cc), which
// calls the step's phases in order: locate(), then its own run on the case
// locate() wrote, then finish().
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "core/failure_signature.h"
#include "core/op_call.h"
#include "core/process/job_slots.h"
#include "engine/archive/reproducer.h"
#include "engine/archive/self_check.h"
#include "engine/log.h"
#include "engine/shrink_options.h"
#include "engine/timeline.h"

namespace minrepro {

class Executor;

struct OpStep {
  std::filesystem::path archive;  // just written
  std::filesystem::path work;     // the run's work directory (op/ and op-*/ go there)
  std::string python;
  FailureSignature signature;  // the case's
  std::string message_regex;   // case.yaml's failure.message, compared as the trials did
  SelfCheckPlan plan;          // runs of repro_op.py that must fail (3; more when flaky)
  std::chrono::milliseconds timeout{60'000};
  const std::atomic<bool>* stop = nullptr;
  // Variables its runs of repro.py get: trial.env's values the archive
  // leaves out (engine/archive/scrub.h's withheldEnv), as the self-check's.
  std::map<std::string, std::string> env;
  // Whether the call's inputs are offered for reduction (locate() writes
  // their case); false: they are kept as recorded.
  bool reduce = true;
  // At most this long for that reduction (half the run's time so far,
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

// What the reduction of the call's inputs gives back.
struct OpReduction {
  std::filesystem::path inputs;  // the reduced inputs.pt; empty: not reduced
  std::size_t trials = 0;
  std::string why_not;  // when not reduced
};

// How the conductor's nested run reduces locate()'s `case_file`: quiet,
// with `outer`'s Python, one trial at a time on the step's slots (the
// self-check runs beside it), forked from the step's warm Python when it
// has one, without the comparison with plain processes (the step runs the
// result alone in plain processes, and falls back to the recorded inputs
// when it does not fail there), without an archive, a self-check or an op
// step of its own, at most 300 trials and the step's reduction_seconds;
// `tally` gets its trials.
ShrinkOptions opReductionOptions(const ShrinkOptions& outer, const std::filesystem::path& case_file, const OpStep& step,
                                 ShrinkTally* tally);

// What that nested run's status means for the call's inputs: the reduced
// inputs.pt when it ended with a best case, else why not.
OpReduction opReductionOutcome(ExitStatus status, const std::filesystem::path& case_file);

// The op recorder on the file trace's run (ArchiveJob::recorder), when the
// op step can use its record of a failure of this family; none otherwise.
RecorderRide recorderRide(const CaseConfig& config, FailureFamily family);

// One op step, in the phases the conductor calls: never throws for what the
// case does (a call that cannot be isolated is an outcome).
class OpStepRun {
 public:
  // Logs to `log` and adds its phase to `timeline` (null: none).
  OpStepRun(OpStep step, Log& log, Timeline* timeline);
  // Locates, extracts and (when it is not to be reduced) checks the call
  // alone; the case of its inputs to reduce next (case.yaml in op-reduce/),
  // or nullopt when there is none and finish() comes next.
  std::optional<std::filesystem::path> locate();
  // The outcome of the reduction of locate()'s case.
  void reduced(const OpReduction& reduction);
  // Renders repro_op.py for the inputs kept and checks it alone; the
  // outcome, logged with its share of the run.
  OpStepResult finish();
  const OpStep& step() const { return step_; }

 private:
  std::optional<std::filesystem::path> locateOrThrow();
  void finishOrThrow();
  void failed(const std::exception& e);
  SelfCheckPlan firstCheck() const;
  void logOutcome();

  OpStep step_;
  Log& log_;
  Timeline* timeline_;
  OpStepResult result_;
  bool located_ = false;            // the call is in op/, ready to render and check
  bool reducible_ = false;          // locate() wrote a case of its inputs
  std::filesystem::path call_dir_;  // the recorder's record of the call
  std::optional<std::filesystem::path> reduced_inputs_;
  double started_at_ = 0;  // the log's clock when locate() began
};

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

}  // namespace minrepro
