#include "engine/archive/op_repro.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/process/process.h"
#include "core/text_lines.h"
#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// "[3,4]" -> {3, 4}; "[]" -> {}.
std::vector<std::int64_t> parseSizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::string digits;
  for (char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (!digits.empty()) {
      sizes.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  return sizes;
}

// "self float32 [3,4] stride [4,1] offset 0 cpu storage own"
std::optional<OpTensor> parseTensorLine(const std::string& value) {
  std::istringstream words(value);
  OpTensor t;
  std::string shape, stride_word, stride, offset_word, offset, storage_word;
  if (!(words >> t.name >> t.dtype >> shape >> stride_word >> stride >> offset_word >> offset >> t.device >>
        storage_word))
    return std::nullopt;
  t.shape = parseSizes(shape);
  t.layout = "stride " + stride + " offset " + offset;
  std::getline(words, t.storage);
  t.storage = text::trim(t.storage);
  return t;
}

void readCallField(OpCall& call, const std::string& key, const std::string& value) {
  if (key == "op")
    call.op = value;
  else if (key == "call")
    call.call = value;
  else if (key == "phase")
    call.phase = value;
  else if (key == "error")
    call.error = value;
  else if (key == "unsupported")
    call.unsupported = value;
  else if (key == "arg")
    call.args.push_back(value);
  else if (key == "kwarg")
    call.args.push_back(value);
  else if (key == "index")
    call.index = std::strtoull(value.c_str(), nullptr, 10);
  else if (key == "tensor") {
    if (auto t = parseTensorLine(value)) call.tensors.push_back(std::move(*t));
  }
}

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
  spec.env_set = std::move(env);
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
                                         bool main_died, OpRepro& result) {
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

// Why the call alone is not looked for in a failure of this family, or "".
std::string familyOutOfReach(FailureFamily family) {
  switch (family) {
    case FailureFamily::Timeout:
      return "a hang or a timeout is no call that fails";
    case FailureFamily::NonzeroExit:
      return "the program exited with a status of its own; no error was raised";
    case FailureFamily::CompileError:
      return "a torch.compile failure is the compiler's, not an ATen call's (PyTorch's own minifier reduces its "
             "graph: TORCHDYNAMO_REPRO_AFTER)";
    case FailureFamily::None:
    case FailureFamily::StartFailure:
      return "the case did not fail";
    case FailureFamily::DeviceAssert:
    case FailureFamily::OutOfMemory:
    case FailureFamily::OpUnavailable:
    case FailureFamily::DeviceMismatch:
    case FailureFamily::IndexError:
    case FailureFamily::NonFinite:
    case FailureFamily::ValueError:
    case FailureFamily::RuntimeError:
    case FailureFamily::Signal:
      return "";
  }
  return "";
}

// Runs repro.py with the recorder: the call that raised the case's error or
// died of its signal, or why there is none. The run itself may end another
// way: TorchScript re-raises an error that passed through the recorder with
// an empty message, so the recorded call's own error is what must match.
std::optional<fs::path> locateCall(const fs::path& repro_dir, const OpStep& step, OpRepro& result) {
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
bool renderScript(const OpStep& step, const fs::path& call_dir, const fs::path& dir, bool literal, OpRepro& result) {
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
bool extractCall(const OpStep& step, const fs::path& call_dir, const fs::path& dir, OpRepro& result) {
  freshDir(dir);
  fs::copy_file(call_dir / "inputs.pt", dir / "inputs.pt");
  return renderScript(step, call_dir, dir, false, result);
}

// Shrinks the call's inputs in op-reduce/; the reduced inputs.pt when it worked.
std::optional<fs::path> reduceCall(const OpStep& step, const fs::path& op_dir, const OpCall& call, OpRepro& result) {
  const OpCaseAxes axes = sharedSampleAxes(call.tensors, call.args);
  if (!step.reduce || axes.axes.empty()) {
    result.not_reduced = step.reduce ? "every argument is a scalar" : "no reduction was asked for";
    return std::nullopt;
  }
  if (step.stop && step.stop->load()) return std::nullopt;
  const fs::path dir = freshDir(step.work / "op-reduce");
  for (const char* name : {"repro_op.py", "inputs.pt"}) fs::copy_file(op_dir / name, dir / name);
  std::ofstream(dir / "case.yaml") << renderOpCase(step.python, axes, step.signature, step.timeout,
                                                   !step.plan.require_every_run);
  const OpReduction reduction = step.reduce(dir / "case.yaml", {step.slots, step.reduction_seconds, step.warm});
  result.reduction_trials = reduction.trials;
  result.not_reduced = reduction.why_not;
  if (reduction.inputs.empty()) return std::nullopt;
  return reduction.inputs;
}

// Runs repro_op.py in `dir` alone `plan.runs` times; false, with why, when it
// does not fail like the case.
bool standsAlone(const OpStep& step, const SelfCheckPlan& plan, const fs::path& dir, const std::string& op,
                 OpRepro& result) {
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
                    OpRepro& result) {
  for (bool literal : {true, false})
    if (renderScript(step, call_dir, op_dir, literal, result) && standsAlone(step, step.plan, op_dir, op, result))
      return true;
  return false;
}

// Locate, extract, check alone, reduce, render, check again.
void buildOpRepro(const OpStep& step, OpRepro& result) {
  ScratchDir tree("minrepro-op-locate");
  const fs::path repro = tree.path() / "repro";
  extractArchive(step.archive, repro, std::size_t{1} << 34, std::uint64_t{1} << 36);
  result.status = OpReproStatus::NotIsolated;
  const auto call_dir = locateCall(repro, step, result);
  if (!call_dir) return;
  result.found = readOpCall(*call_dir / "call.txt");
  if (!result.found) {
    result.why = "the op recorder's record of the call cannot be read (" + (*call_dir / "call.txt").string() + ")";
    return;
  }
  const std::string& op = result.found->op;
  if (!result.found->unsupported.empty()) {
    result.why = op + " was called with " + result.found->unsupported + ", which a script cannot rebuild";
    return;
  }
  const fs::path op_dir = step.work / "op";
  // One run decides whether the call is worth reducing (all runs of a flaky
  // plan); the final script then runs as often as the self-check would.
  // When its inputs are reduced, the reduction's check of its original is
  // that run; only when that check fails does a run of our own say why.
  SelfCheckPlan once = step.plan;
  if (once.require_every_run) once.runs = 1;
  once.enough_after_one = true;
  if (!extractCall(step, *call_dir, op_dir, result)) return;
  const bool reducible = step.reduce && !sharedSampleAxes(result.found->tensors, result.found->args).axes.empty();
  if (!reducible && !standsAlone(step, once, op_dir, op, result)) return;
  const fs::path recorded = step.work / "op-recorded-inputs.pt";
  fs::copy_file(op_dir / "inputs.pt", recorded, fs::copy_options::overwrite_existing);
  const auto reduced = reduceCall(step, op_dir, *result.found, result);
  if (reducible && !reduced && !standsAlone(step, once, op_dir, op, result)) return;
  if (reduced) fs::copy_file(*reduced, op_dir / "inputs.pt", fs::copy_options::overwrite_existing);
  bool alone = renderAndCheck(step, *call_dir, op_dir, op, result);
  if (!alone && reduced) {  // the reduction's result must stand alone too; else the recorded inputs
    result.not_reduced = "the reduced inputs did not fail alone like the case (" + result.why + ")";
    fs::copy_file(recorded, op_dir / "inputs.pt", fs::copy_options::overwrite_existing);
    alone = renderAndCheck(step, *call_dir, op_dir, op, result);
  }
  if (!alone) return;
  result.why.clear();
  result.reduced = readOpCall(op_dir / "call.txt");
  result.script = readFileBytes(op_dir / "repro_op.py");
  result.dir = op_dir;
  result.status = OpReproStatus::Made;
}

}  // namespace

std::string OpTensor::describe() const {
  std::string text = name + " " + dtype + " [";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "] " + layout + " " + device + (storage == "own" ? "" : ", " + storage);
}

std::optional<OpCall> readOpCall(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  OpCall call;
  for (const std::string& line : text::splitLines(readFileBytes(file))) {
    const auto colon = line.find(": ");
    if (colon != std::string::npos) readCallField(call, line.substr(0, colon), line.substr(colon + 2));
  }
  if (call.op.empty() || call.call.empty()) return std::nullopt;
  return call;
}

namespace {

// Whether `size` is written in a non-tensor argument (a view's shape, a
// narrow's length): cutting along it would make a size error of its own.
bool sizeInArguments(std::int64_t size, const std::vector<std::string>& args) {
  const std::regex tensor(R"(T\['[^']*'\])");
  const std::regex number("(^|[^0-9A-Za-z_.])" + std::to_string(size) + "($|[^0-9A-Za-z_.])");
  for (const auto& arg : args)
    if (std::regex_search(std::regex_replace(arg, tensor, "T"), number)) return true;
  return false;
}

// The length most tensors have as their first axis, when two or more do and
// no tensor has it on two axes; 0 when none.
std::int64_t sharedLeadingLength(const std::vector<OpTensor>& tensors) {
  std::map<std::int64_t, int> leading;  // size > 1 -> tensors whose first axis has it
  for (const auto& t : tensors)
    if (!t.shape.empty() && t.shape[0] > 1) ++leading[t.shape[0]];
  std::int64_t chosen = 0;
  int most = 1;
  // The first tensor's first axis wins a tie (a loss's input before its target).
  if (!tensors.empty() && !tensors.front().shape.empty() && leading[tensors.front().shape[0]] > 1) {
    chosen = tensors.front().shape[0];
    most = leading[chosen];
  }
  for (const auto& [size, count] : leading)
    if (count > most) chosen = size, most = count;
  for (const auto& t : tensors)
    if (std::count(t.shape.begin(), t.shape.end(), chosen) > 1) return 0;  // a square matrix: which axis?
  return chosen;
}

}  // namespace

OpCaseAxes sharedSampleAxes(const std::vector<OpTensor>& tensors, const std::vector<std::string>& args) {
  OpCaseAxes result;
  const std::int64_t chosen = sharedLeadingLength(tensors);
  if (chosen != 0 && !sizeInArguments(chosen, args)) {
    result.cut = true;
    for (const auto& t : tensors) {
      const auto at = std::find(t.shape.begin(), t.shape.end(), chosen);
      if (at != t.shape.end()) result.axes[t.name] = static_cast<int>(at - t.shape.begin());
    }
    return result;
  }
  // Nothing to cut: one axis carries the case for the values pass, an axis of
  // length 1 where there is one (one unit, nothing for a minimality check to try).
  for (int want_one = 1; want_one >= 0; --want_one)
    for (const auto& t : tensors)
      for (std::size_t axis = 0; axis < t.shape.size(); ++axis)
        if (!want_one || t.shape[axis] == 1) return {{{t.name, static_cast<int>(axis)}}, false};
  return result;
}

std::string renderOpCase(const std::string& python, const OpCaseAxes& case_axes, const FailureSignature& signature,
                         std::chrono::milliseconds timeout, bool flaky) {
  const auto& axes = case_axes.axes;
  std::ostringstream yaml;
  yaml << "# The failing operator call's inputs, reduced by minrepro's op step.\nbatch: inputs.pt\nsamples:\n"
          "  tensors: {";
  bool first = true;
  for (const auto& [name, axis] : axes) yaml << (first ? "" : ", ") << '"' << name << "\": " << axis, first = false;
  // Forked trials whether there is an axis to cut or only values: the
  // server imports torch once, where a plain trial of repro_op.py imports it
  // every time; the op step's runs of the result alone are the plain check.
  std::string quoted;  // a YAML double-quoted scalar
  for (char c : python) quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  yaml << "}\ntrial:\n  command: [\"" << quoted << "\", \"{case_dir}/repro_op.py\", \"{batch}\"]\n"
       << "  timeout: " << std::max<long long>(1, timeout.count() / 1000)
       << "\nfailure:\n  family: " << familyName(signature.family) << (flaky ? "" : "\nflaky:\n  enabled: false")
       << "\nreducers: [" << (case_axes.cut ? "samples, values" : "values") << "]\nwork_dir: work\noutput: op.tar.gz\n";
  return yaml.str();
}

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

std::string opRecorderDir() {
  const std::string script = ownFile("op_recorder/minrepro_op.py",
                                     fs::path(MINREPRO_SOURCE_DIR) / "harness/python/op_recorder/minrepro_op.py");
  return script.empty() ? "" : fs::path(script).parent_path().string();
}

std::map<std::string, std::string> recorderEnvironment(const fs::path& record_dir, bool note_calls,
                                                       const std::optional<std::string>& pythonpath,
                                                       bool first_non_finite) {
  std::string path = opRecorderDir();
  const char* inherited = std::getenv("PYTHONPATH");
  const std::string after = pythonpath ? *pythonpath : inherited ? inherited : "";
  if (!after.empty()) path += ":" + after;
  std::map<std::string, std::string> env{{"PYTHONPATH", path}, {"MINREPRO_OP_RECORD", record_dir.string()}};
  if (note_calls) env["MINREPRO_OP_NOTE_CALLS"] = "1";
  if (first_non_finite) env["MINREPRO_OP_NONFINITE"] = "1";
  return env;
}

bool recorderCanRide(FailureFamily family) {
  return family != FailureFamily::Signal && familyOutOfReach(family).empty();
}

OpRepro makeOpRepro(const OpStep& step) {
  OpRepro result;
  result.reduction_seconds = step.reduction_seconds;
  if (opRecorderDir().empty()) {
    result.why = "the op recorder (op_recorder/ beside minrepro) was not found; reinstall minrepro";
    return result;
  }
  if (const std::string why = familyOutOfReach(step.signature.family); !why.empty()) {
    result.why = why;
    return result;
  }
  try {
    buildOpRepro(step, result);
  } catch (const std::exception& e) {
    // The op step is a help beside the archive, never the run's result.
    result.status = result.status == OpReproStatus::Made ? OpReproStatus::NotIsolated : result.status;
    result.why = std::string("the op step failed: ") + e.what();
  }
  if (step.stop && step.stop->load() && result.status != OpReproStatus::Made) {
    result.status = OpReproStatus::NotTried;
    result.why = "the run was interrupted";
  }
  return result;
}

}  // namespace minrepro
