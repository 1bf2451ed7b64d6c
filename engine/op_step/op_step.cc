#include "engine/op_step/op_step.h"

#include <algorithm>
#include <atomic>
#include <fstream>

#include "core/process/process.h"
#include "core/text_lines.h"
#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"
#include "engine/format_list.h"
#include "engine/op_step/op_case.h"
#include "engine/op_step/op_recorder.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

fs::path freshDir(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// One Python process of the step, in a directory of its own made afresh
// (what an earlier run left there must not change this one's calls).
// `fresh`: a plain process even when the step has a warm Python.
TrialOutcome runPython(const OpStep& step, std::vector<std::string> args, std::map<std::string, std::string> env = {},
                       std::chrono::milliseconds timeout = std::chrono::milliseconds{0}, bool fresh = true) {
  static std::atomic<std::size_t> runs{0};
  TrialSpec spec;
  spec.argv = {step.python};
  for (auto& a : args) spec.argv.push_back(std::move(a));
  spec.env_set = step.env;
  for (auto& [name, value] : env) spec.env_set[name] = std::move(value);
  spec.env_unset = diagnosticVariables();
  spec.work_dir = step.work / "op-runs" / std::to_string(++runs);
  fs::remove_all(spec.work_dir);
  spec.timeout = timeout.count() > 0 ? timeout : step.timeout;
  spec.cancel = step.stop;
  JobSlots one(1);
  JobSlots::Held slot(step.slots ? *step.slots : one);
  spec.fresh_process = fresh || !step.warm;
  if (!spec.fresh_process) return step.warm->run(spec);
  return LocalExecutor().run(spec);
}

// The case's signature as a single call must show it: the call is not the
// program, so the operator the traceback names is not compared. A
// non-finite failure's call shows the NaN itself, in its own words (the
// program raised "loss is nan" many calls later): the family decides.
SignatureMatch matchesCase(const OpStep& step, const FailureSignature& seen) {
  if (step.signature.family == FailureFamily::NonFinite) {
    if (seen.family == FailureFamily::NonFinite) return {true, ""};
    return {false, "family " + familyName(seen.family) + ", expected non-finite"};
  }
  FailureSignature wanted = step.signature;
  wanted.op.clear();
  ExpectedFailure expected;
  expected.message_regex = step.message_regex;
  expected.require_original_op = false;
  // The call raises in Python what the program may have died of (an
  // uncaught C++ error's abort): a fatal signal of its own is the Signal family's.
  expected.any_ending = true;
  return matchSignature(wanted, seen, expected);
}

// Directories under `dir` whose names start with `prefix`, oldest first.
std::vector<fs::path> recordsIn(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<fs::file_time_type, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (text::startsWith(entry.path().filename().string(), prefix))
      found.emplace_back(entry.last_write_time(ec), entry.path());
  std::sort(found.begin(), found.end());
  std::vector<fs::path> paths;
  for (auto& [time, path] : found) paths.push_back(path);
  return paths;
}

// Of the calls that raised, the last whose error reads like the case's
// (errors the program caught came before it); when none does, the last one,
// but only if the recorded run itself failed like the case (`run_matched`).
// The first call that made a NaN or an inf out of finite inputs (log of a
// zero, before the NaN an inf minus an inf makes later), else the first
// that made a NaN out of inputs without one (a softmax over a row a mask
// filled with -inf: the recorder does not count an inf the program asked
// for by a number, nor uninitialised memory).
std::optional<fs::path> firstNonFiniteCall(const fs::path& record_dir) {
  for (const char* kind : {"nonfinite-finite-", "nonfinite-nan-"}) {
    const std::vector<fs::path> found = recordsIn(record_dir, kind);
    if (!found.empty()) return found.front();
  }
  return std::nullopt;
}

std::optional<fs::path> raisingCall(const fs::path& record_dir, const OpStep& step, bool run_matched) {
  if (step.signature.family == FailureFamily::NonFinite) return firstNonFiniteCall(record_dir);
  const std::vector<fs::path> raised = recordsIn(record_dir, "raised-");
  for (auto it = raised.rbegin(); it != raised.rend(); ++it) {
    const auto call = readOpCall(*it / "call.txt");
    if (call && matchesCase(step, classifyText(call->error + "\n")).matches) return *it;
  }
  if (run_matched && !raised.empty()) return raised.back();
  return std::nullopt;
}

// The pid in a recorder file's name ("last-op-4242.txt" -> "4242").
std::string pidOf(const fs::path& file, const std::string& prefix) {
  std::string name = file.filename().string().substr(prefix.size());
  return name.substr(0, name.find('.'));
}

// Whether the process `pid` of `dir` died of a fatal signal: faulthandler
// wrote its fault file.
bool diedOfSignal(const fs::path& dir, const std::string& pid) {
  std::error_code ec;
  const auto size = fs::file_size(dir / ("fault-" + pid + ".txt"), ec);
  return !ec && size > 0;
}

// The last-op file of the process a fatal signal ended: the one whose fault
// file faulthandler wrote; else the run's first Python process when the run
// itself died (repro.py execs the command); else the newest of another
// process (a worker, Python under a shell the main process became).
std::optional<fs::path> lastCallFile(const fs::path& record_dir, bool main_died) {
  const std::vector<fs::path> left = recordsIn(record_dir, "last-op-");
  if (left.empty()) return std::nullopt;
  for (const auto& file : left)
    if (diedOfSignal(record_dir, pidOf(file, "last-op-"))) return file;
  const std::vector<fs::path> loaded = recordsIn(record_dir, "loaded-");
  const fs::path main_file =
      record_dir / ("last-op-" + (loaded.empty() ? std::string() : pidOf(loaded.front(), "loaded-")) + ".txt");
  if (main_died && fs::exists(main_file)) return main_file;
  for (auto it = left.rbegin(); it != left.rend(); ++it)
    if (*it != main_file) return *it;
  return std::nullopt;
}

// A fatal signal: the call a process died in, saved by a second run just
// before it runs (the saved process that then died, when several reached it).
std::optional<fs::path> callBeforeSignal(const fs::path& record_dir, const fs::path& repro_dir, const OpStep& step,
                                         bool main_died, OpStepResult& result) {
  const auto file = lastCallFile(record_dir, main_died);
  if (!file) {
    result.why =
        "the process died outside any ATen operator call (in the program's own native code: a C "
        "extension, ctypes)";
    return std::nullopt;
  }
  const std::string last = text::trim(readFileBytes(*file));  // "42 _ctc_loss.Tensor"
  const auto space = last.find(' ');
  if (space == std::string::npos) return std::nullopt;
  if (text::endsWith(last, " returned")) {
    result.why = "the process died outside any ATen operator call, after call " + last.substr(0, last.size() - 9) +
                 " had returned (in the program's own native code: a C extension, "
                 "ctypes)";
    return std::nullopt;
  }
  const fs::path again = freshDir(step.work / "op-record-before");
  auto env = recorderEnvironment(again, true);
  env["MINREPRO_OP_SAVE_AT"] = last.substr(0, space) + ":" + last.substr(space + 1);
  runPython(step, {(repro_dir / "repro.py").string()}, env, 2 * step.timeout);
  ++result.processes;
  const std::vector<fs::path> saved = recordsIn(again, "before-");
  for (const auto& dir : saved)
    if (diedOfSignal(again, pidOf(dir, "before-"))) return dir;
  if (!saved.empty()) return saved.front();
  result.why = "a second run did not reach call " + last + " again (the calls before it differ from run to run)";
  return std::nullopt;
}

// Runs repro.py with the recorder: the call that raised the case's error or
// died of its signal, or why there is none. The run itself may end another
// way: TorchScript re-raises an error that passed through the recorder with
// an empty message, so the recorded call's own error is what must match.
std::optional<fs::path> locateCall(const fs::path& repro_dir, const OpStep& step, OpStepResult& result) {
  const bool signal = step.signature.family == FailureFamily::Signal;
  if (!step.recorded.empty() && !signal && !recordsIn(step.recorded, "loaded-").empty()) {
    // The file trace's run carried the recorder and failed like the case.
    if (auto call = raisingCall(step.recorded, step, true)) return call;
  }
  const fs::path record_dir = step.work / "op-record";
  // A flaky failure is run until it fails, at most as often as the self-check would.
  const int attempts = step.plan.require_every_run ? 1 : std::min(step.plan.runs, 10);
  TrialOutcome outcome;
  for (int i = 0; i < attempts && !(step.stop && step.stop->load()); ++i) {
    freshDir(record_dir);
    // The recorder's own work (a write per call for a signal) must not turn the run into a timeout.
    outcome = runPython(
        step, {(repro_dir / "repro.py").string()},
        recorderEnvironment(record_dir, signal, std::nullopt, step.signature.family == FailureFamily::NonFinite),
        2 * step.timeout);
    ++result.processes;
    if (!outcome.passed()) break;
  }
  const SignatureMatch run_match = matchesCase(step, classify(outcome));
  if (recordsIn(record_dir, "loaded-").empty()) {
    result.why =
        "no process of the run loaded the op recorder: the trial runs no Python that imports torch, runs "
        "it with -I, -E or -S (which skip sitecustomize), or sets PYTHONPATH itself (case.yaml's "
        "trial.env); the call alone is found only in Python processes";
    return std::nullopt;
  }
  if (outcome.passed()) {
    result.why = "the case passed while its operator calls were recorded (" + describe(outcome) + ")";
    return std::nullopt;
  }
  if (signal) return callBeforeSignal(record_dir, repro_dir, step, outcome.end == TrialEnd::Signaled, result);
  auto call = raisingCall(record_dir, step, run_match.matches);
  if (!call && run_match.matches && step.signature.family == FailureFamily::NonFinite)
    result.why =
        "no operator made a NaN or an inf out of inputs without one: the non-finite values were in the inputs "
        "from the start (the batch, the weights or a constant)";
  else if (!call && run_match.matches)
    result.why =
        "no ATen operator raised this error: the program's own code (or autograd, or Python itself: a "
        "missing attribute or API) raised it after the operators it ran had returned, e.g. a check of its own on "
        "a value computed upstream";
  else if (!call)
    result.why = "while its operator calls were recorded the case failed differently (" + run_match.why_not + "; " +
                 describe(outcome) + ") and no call raised the case's error";
  return call;
}

// repro_op.py in `dir` (which holds inputs.pt) for the call in `call_dir`.
bool renderScript(const OpStep& step, const fs::path& call_dir, const fs::path& dir, bool literal,
                  OpStepResult& result) {
  std::vector<std::string> args{(fs::path(opRecorderDir()) / "minrepro_op.py").string(), "render", call_dir.string(),
                                dir.string()};
  if (literal) args.push_back("--literal");
  const TrialOutcome out = runPython(step, args, {}, {}, /*fresh=*/false);
  if (out.passed()) return true;
  const text::Lines lines = text::splitLines(text::trim(out.stderr_text));
  result.why = "repro_op.py could not be written: " + (lines.empty() ? describe(out) : lines.back());
  return false;
}

// The call in `call_dir` extracted into `dir` (inputs.pt as recorded, then repro_op.py).
bool extractCall(const OpStep& step, const fs::path& call_dir, const fs::path& dir, OpStepResult& result) {
  freshDir(dir);
  fs::copy_file(call_dir / "inputs.pt", dir / "inputs.pt");
  return renderScript(step, call_dir, dir, false, result);
}

// Runs repro_op.py in `dir` alone `plan.runs` times; false, with why, when it
// does not fail like the case.
bool standsAlone(const OpStep& step, const SelfCheckPlan& plan, const fs::path& dir, const std::string& op,
                 OpStepResult& result) {
  const OpAlone alone = runOpAlone(dir, step, plan);
  result.processes += static_cast<std::size_t>(alone.runs);
  result.alone_runs = alone.runs;
  result.alone_failed = alone.failed_alike;
  result.alone = "failed alone like the case in " + std::to_string(alone.failed_alike) + " of " +
                 std::to_string(alone.runs) + " runs in an empty directory (" +
                 (step.warm && alone.runs > 1 ? "the first a fresh process, the others forked from a warm Python"
                                              : "fresh processes") +
                 ")";
  if (alone.passed(plan)) return true;
  result.why = op + " called alone with the recorded inputs does not fail like the case (" + alone.first_difference +
               "): the failure needs what earlier calls did (a value or state they left, a race), so the batch-level "
               "reproducer is the one to run";
  return false;
}

// repro_op.py in `op_dir` for its inputs.pt, checked alone: with its small
// tensors spelled out, else (a literal that does not behave as the tensor
// did) every tensor loaded from inputs.pt.
bool renderAndCheck(const OpStep& step, const fs::path& call_dir, const fs::path& op_dir, const std::string& op,
                    OpStepResult& result) {
  for (bool literal : {true, false})
    if (renderScript(step, call_dir, op_dir, literal, result) && standsAlone(step, step.plan, op_dir, op, result))
      return true;
  return false;
}

}  // namespace

bool OpAlone::passed(const SelfCheckPlan& plan) const {
  return runs > 0 && (plan.require_every_run ? failed_alike == runs : failed_alike > 0);
}

OpAlone runOpAlone(const fs::path& dir, const OpStep& step, const SelfCheckPlan& plan) {
  ScratchDir scratch("minrepro-op");
  const fs::path alone = scratch.path() / "op";
  fs::create_directories(alone);
  for (const char* name : {"repro_op.py", "inputs.pt"})
    if (fs::exists(dir / name)) fs::copy_file(dir / name, alone / name);
  // The runs at once on the step's slots, kept in run order; a flaky call
  // that may stop at its first failure starts no run after one failed alike.
  const std::size_t runs = static_cast<std::size_t>(std::max(plan.runs, 0));
  std::vector<TrialOutcome> outcomes(runs);
  std::vector<SignatureMatch> matches(runs);
  std::atomic<bool> enough{false};
  JobSlots one(1);
  OpStep held = step;
  held.slots = nullptr;  // the slot is taken here, around the whole run
  std::vector<bool> ran;
  runInSlots(
      runs, step.slots ? *step.slots : one,
      [&](std::size_t i) {
        // The first run a fresh process: repro_op.py fails alone as a maintainer runs it.
        outcomes[i] = runPython(held, {(alone / "repro_op.py").string()}, {}, {}, /*fresh=*/i == 0);
        matches[i] = matchesCase(step, classify(outcomes[i]));
        if (matches[i].matches && !plan.require_every_run && plan.enough_after_one) enough = true;
      },
      [&] { return enough.load() || (step.stop && step.stop->load()); }, &ran);
  OpAlone result;
  for (std::size_t i = 0; i < runs; ++i) {
    if (!ran[i]) continue;
    ++result.runs;
    if (matches[i].matches)
      ++result.failed_alike;
    else if (result.first_difference.empty())
      result.first_difference = matches[i].why_not + " (" + describe(outcomes[i]) + ")";
  }
  return result;
}

namespace {

constexpr std::size_t kOpReductionTrials = 300;

std::string reductionEnd(ExitStatus status) {
  switch (status) {
    case ExitStatus::Reduced:
      return "reduced";
    case ExitStatus::DoesNotReproduce:
      return "the recorded inputs did not fail in the reduction's own check";
    case ExitStatus::BudgetSpent:
      return "the budget was spent";
    case ExitStatus::Interrupted:
      return "interrupted";
    case ExitStatus::ArchiveDoesNotReproduce:
      return "its result did not reproduce";
    case ExitStatus::InternalError:
      return "an internal error";
    case ExitStatus::BadInput:
      return "its case was refused";
    case ExitStatus::TrialsCannotStart:
      return "its trials could not start";
  }
  return "exit status " + std::to_string(static_cast<int>(status));
}

}  // namespace

ShrinkOptions opReductionOptions(const ShrinkOptions& outer, const fs::path& case_file, const OpStep& step,
                                 ShrinkTally* tally) {
  ShrinkOptions inner;
  inner.config = case_file;
  inner.python = outer.python;
  inner.trial_binary = outer.trial_binary;
  inner.quiet = true;
  inner.self_check = false;
  inner.op_step = false;
  inner.archive = false;           // only its best case is wanted: no trace, neighbours or archive
  inner.checked_by_caller = true;  // the op step runs the reduced call alone as often as the self-check would
  // One trial at a time: a second fork server would import torch again
  // for a reduction of a few trials, while the self-check needs the slot.
  inner.jobs = 1;
  inner.slots = step.slots;
  inner.max_trials = kOpReductionTrials;  // a spent budget still leaves its best case so far
  inner.max_seconds = step.reduction_seconds;
  inner.seconds_from_search = true;  // its Python's start and its original's check are not the search
  inner.tally = tally;
  return inner;
}

OpReduction opReductionOutcome(ExitStatus status, const fs::path& case_file) {
  OpReduction reduction;
  const fs::path best = case_file.parent_path() / "work" / "best" / "batch.pt";
  const bool ended = status == ExitStatus::Reduced || status == ExitStatus::BudgetSpent;
  if (ended && fs::exists(best))
    reduction.inputs = best;
  else
    reduction.why_not = "the reduction ended: " + reductionEnd(status);
  return reduction;
}

RecorderRide recorderRide(const CaseConfig& config, FailureFamily family) {
  if (!config.command || !recorderCanRide(family) || opRecorderDir().empty()) return {};
  const fs::path record_dir = config.work_dir / "op-record";
  std::optional<std::string> pythonpath;
  if (const auto own = config.command->env.find("PYTHONPATH"); own != config.command->env.end())
    pythonpath = own->second;
  return {recorderEnvironment(record_dir, false, pythonpath, family == FailureFamily::NonFinite), opRecorderDir(),
          record_dir};
}

OpStepRun::OpStepRun(OpStep step, Log& log, Timeline* timeline)
    : step_(std::move(step)), log_(log), timeline_(timeline) {
  result_.reduction_seconds = step_.reduction_seconds;
}

std::optional<fs::path> OpStepRun::locate() {
  started_at_ = log_.elapsedSeconds();
  log_.info(step_.recorded.empty() ? "locating the failing operator call: repro.py once more with the op recorder"
                                   : "locating the failing operator call in the op recorder's record of the file "
                                     "trace's run");
  if (opRecorderDir().empty()) {
    result_.why = "the op recorder (op_recorder/ beside minrepro) was not found; reinstall minrepro";
    return std::nullopt;
  }
  if (const std::string why = callOutOfReach(step_.signature.family); !why.empty()) {
    result_.why = why;
    return std::nullopt;
  }
  try {
    return locateOrThrow();
  } catch (const std::exception& e) {
    failed(e);
    return std::nullopt;
  }
}

// One run decides whether the call is worth reducing (all runs of a flaky
// plan); the final script then runs as often as the self-check would.
// When its inputs are reduced, the reduction's check of its original is
// that run; only when that check fails does a run of our own say why.
SelfCheckPlan OpStepRun::firstCheck() const {
  SelfCheckPlan once = step_.plan;
  if (once.require_every_run) once.runs = 1;
  once.enough_after_one = true;
  return once;
}

// Locate and extract into op/; then the case of the call's inputs in
// op-reduce/, or (nothing to reduce) the first check alone.
std::optional<fs::path> OpStepRun::locateOrThrow() {
  ScratchDir tree("minrepro-op-locate");
  const fs::path repro = tree.path() / "repro";
  extractArchive(step_.archive, repro, std::size_t{1} << 34, std::uint64_t{1} << 36);
  result_.status = OpStepStatus::NotIsolated;
  const auto call_dir = locateCall(repro, step_, result_);
  if (!call_dir) return std::nullopt;
  result_.found = readOpCall(*call_dir / "call.txt");
  if (!result_.found) {
    result_.why = "the op recorder's record of the call cannot be read (" + (*call_dir / "call.txt").string() + ")";
    return std::nullopt;
  }
  const std::string& op = result_.found->op;
  if (!result_.found->unsupported.empty()) {
    result_.why = op + " was called with " + result_.found->unsupported + ", which a script cannot rebuild";
    return std::nullopt;
  }
  const fs::path op_dir = step_.work / "op";
  if (!extractCall(step_, *call_dir, op_dir, result_)) return std::nullopt;
  const OpCaseAxes axes = sharedSampleAxes(result_.found->tensors, result_.found->args);
  reducible_ = step_.reduce && !axes.axes.empty();
  if (!reducible_) result_.not_reduced = step_.reduce ? "every argument is a scalar" : "no reduction was asked for";
  if (!reducible_ && !standsAlone(step_, firstCheck(), op_dir, op, result_)) return std::nullopt;
  fs::copy_file(op_dir / "inputs.pt", step_.work / "op-recorded-inputs.pt", fs::copy_options::overwrite_existing);
  call_dir_ = *call_dir;
  located_ = true;
  if (!reducible_ || (step_.stop && step_.stop->load())) return std::nullopt;
  const fs::path dir = freshDir(step_.work / "op-reduce");
  for (const char* name : {"repro_op.py", "inputs.pt"}) fs::copy_file(op_dir / name, dir / name);
  std::ofstream(dir / "case.yaml") << renderOpCase(step_.python, axes, step_.signature, step_.timeout,
                                                   !step_.plan.require_every_run);
  return dir / "case.yaml";
}

void OpStepRun::reduced(const OpReduction& reduction) {
  result_.reduction_trials = reduction.trials;
  result_.not_reduced = reduction.why_not;
  if (!reduction.inputs.empty()) reduced_inputs_ = reduction.inputs;
}

OpStepResult OpStepRun::finish() {
  if (located_) {
    try {
      finishOrThrow();
    } catch (const std::exception& e) {
      failed(e);
    }
  }
  if (step_.stop && step_.stop->load() && result_.status != OpStepStatus::Made) {
    result_.status = OpStepStatus::NotTried;
    result_.why = "the run was interrupted";
  }
  logOutcome();
  return result_;
}

// The reduced inputs when they fail alone like the case, else the recorded
// ones; repro_op.py rendered for them and checked alone.
void OpStepRun::finishOrThrow() {
  const fs::path op_dir = step_.work / "op";
  const std::string op = result_.found->op;
  if (reducible_ && !reduced_inputs_ && !standsAlone(step_, firstCheck(), op_dir, op, result_)) return;
  if (reduced_inputs_) fs::copy_file(*reduced_inputs_, op_dir / "inputs.pt", fs::copy_options::overwrite_existing);
  bool alone = renderAndCheck(step_, call_dir_, op_dir, op, result_);
  if (!alone && reduced_inputs_) {  // the reduction's result must stand alone too; else the recorded inputs
    result_.not_reduced = "the reduced inputs did not fail alone like the case (" + result_.why + ")";
    fs::copy_file(step_.work / "op-recorded-inputs.pt", op_dir / "inputs.pt", fs::copy_options::overwrite_existing);
    alone = renderAndCheck(step_, call_dir_, op_dir, op, result_);
  }
  if (!alone) return;
  result_.why.clear();
  result_.reduced = readOpCall(op_dir / "call.txt");
  result_.script = readFileBytes(op_dir / "repro_op.py");
  result_.dir = op_dir;
  result_.status = OpStepStatus::Made;
}

// The op step is a help beside the archive, never the run's result.
void OpStepRun::failed(const std::exception& e) {
  result_.status = result_.status == OpStepStatus::Made ? OpStepStatus::NotIsolated : result_.status;
  result_.why = std::string("the op step failed: ") + e.what();
  located_ = false;
}

// The outcome, and the step's share of the run, with why when it is more
// than a third: the op step is a help beside the archive, and its cost must
// be one the reader can weigh.
void OpStepRun::logOutcome() {
  const OpStepResult& op = result_;
  if (op.status == OpStepStatus::Made)
    log_.info("op-level reproducer: op/repro_op.py calls " + op.found->op + " alone and " + op.alone +
              " (its inputs reduced in " + std::to_string(op.reduction_trials) +
              (op.reduction_trials == 1 ? " trial)" : " trials)"));
  else
    log_.info("op-level reproducer: " + std::string(op.found ? op.found->op + ": " : "") + "none kept (" + op.why +
              ")");
  const double to = log_.elapsedSeconds();
  if (timeline_) timeline_->addPhase({"op step", started_at_, to});
  if (to - started_at_ > to / 3)
    log_.info(
        "note: the op step took " + secondsText(to - started_at_) + " s of the run's " + secondsText(to) +
        " s, more than a third (beside the self-check, which shares the --jobs slots with it): " +
        std::to_string(op.processes) + " run(s) of repro.py and repro_op.py, each starting Python and torch, and " +
        std::to_string(op.reduction_trials) +
        " trial(s) reducing the call's inputs (the search of that reduction is given at most " +
        secondsText(op.reduction_seconds) + " s) (--no-op-repro skips the op step" +
        (step_.slots && step_.slots->size() > 1 ? std::string(")") : "; --jobs 2 runs it beside the self-check)"));
}

}  // namespace minrepro
