#include "commands/compare.h"

#include "core/build_info.h"
#include "core/disk_space.h"
#include "core/errors.h"
#include "core/text_lines.h"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "engine/archive/manifest.h"
#include "engine/archive/run_archive.h"
#include "engine/archive/scrub.h"
#include "engine/archive/seal.h"
#include "engine/archive/self_check.h"
#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"
#include "engine/op_step/op_case.h"
#include "engine/op_step/op_recorder.h"
#include "engine/trial_spec.h"
#include "harness/case_inference.h"
#include "harness/precision.h"

namespace fs = std::filesystem;

namespace minrepro {

// ---------------------------------------------------------------- planning

namespace {

Variant named(std::string name, std::string change = "", std::string not_applicable = "") {
  Variant v;
  v.name = std::move(name);
  v.change = std::move(change);
  v.not_applicable = std::move(not_applicable);
  return v;
}

std::string backendText(const BackendInfo& b) {
  const std::string version = b.version.empty() ? "" : " " + b.version;
  switch (b.kind) {
    case Backend::Cuda:
      return "CUDA" + version;
    case Backend::Rocm:
      return "ROCm" + version;
    case Backend::Cpu:
      return "the CPU";
    case Backend::Unknown:
      break;
  }
  return "the accelerators";
}

Variant cpuVariant(const CaseConfig& config, const fs::path& dev_root) {
  Variant v = named("cpu");
  const BackendInfo recorded = backendFromContext(config.context);
  if (config.harness) {
    v.not_applicable = "the built-in harness runs on the CPU already";
    if (recorded.kind == Backend::Cuda || recorded.kind == Backend::Rocm)
      v.not_applicable += "; the captured run used " + backendText(recorded) +
                          ": run your own program with CUDA_VISIBLE_DEVICES= to compare";
    return v;
  }
  const BackendInfo backend = recorded.kind != Backend::Unknown ? recorded : detectMachineBackend(dev_root);
  if (backend.kind == Backend::Cpu) {
    v.not_applicable = recorded.kind == Backend::Cpu ? "the case ran on the CPU (backend in the captured context)"
                                                     : "no accelerator recorded in the case and none on this machine";
    return v;
  }
  // Hidden devices: a program that picks "cuda if available" runs on the
  // CPU; one that insists on a device fails to find it (a different failure).
  v.env_set = {{"CUDA_VISIBLE_DEVICES", ""}, {"HIP_VISIBLE_DEVICES", ""}, {"MINREPRO_DEVICE", "cpu"}};
  v.change = "the CPU instead of " + backendText(backend) +
             ": accelerators hidden (CUDA_VISIBLE_DEVICES= HIP_VISIBLE_DEVICES=), MINREPRO_DEVICE=cpu";
  return v;
}

Variant float32Variant(const CaseConfig& config, const std::vector<TensorInfo>& tensors) {
  Variant v = named("float32");
  std::string names;
  for (const auto& t : tensors)
    if (t.dtype == "float16" || t.dtype == "bfloat16")
      names += (names.empty() ? "" : ", ") + t.name + " (" + t.dtype + ")";
  if (names.empty()) {
    v.not_applicable = "no float16 or bfloat16 tensor in the batch";
    return v;
  }
  v.float32_batch = true;
  v.env_set = {{"MINREPRO_FLOAT32", "1"}};
  v.change = "float32 instead of half precision: " + names + " cast, stride order kept; MINREPRO_FLOAT32=1 " +
             (config.harness ? "(the harness casts the model's half parameters too)"
                             : "(your program must cast its model when it is set)");
  return v;
}

Variant deterministicVariant(const CaseConfig& config) {
  Variant v = named("deterministic");
  if (config.deterministic) {
    v.not_applicable = "the case runs with deterministic algorithms already (trial.deterministic: true)";
    return v;
  }
  v.env_set = {{"MINREPRO_DETERMINISTIC", "1"}, {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}};
  v.change =
      std::string("deterministic algorithms on: MINREPRO_DETERMINISTIC=1 CUBLAS_WORKSPACE_CONFIG=:4096:8") +
      (config.harness ? "" : " (your program must call torch.use_deterministic_algorithms(True) when it is set)");
  return v;
}

// Optional branches the case declares: harness transforms marked optional,
// command switches.
std::vector<std::string> optionalBranches(const CaseConfig& config) {
  std::vector<std::string> names;
  if (config.harness)
    for (const auto& t : config.harness->transforms)
      if (t.optional) names.push_back(t.name);
  if (config.command)
    for (const auto& s : config.command->switches) names.push_back(s.name);
  return names;
}

}  // namespace

std::vector<Variant> planVariants(const CaseConfig& config, const std::vector<TensorInfo>& tensors,
                                  const fs::path& dev_root) {
  std::vector<Variant> variants;
  variants.push_back(named("as-is", "nothing (the reference)"));
  variants.push_back(cpuVariant(config, dev_root));
  variants.push_back(float32Variant(config, tensors));
  variants.push_back(deterministicVariant(config));
  const std::vector<std::string> branches = optionalBranches(config);
  if (branches.empty())
    variants.push_back(
        named("branch-off", "", "the case declares no optional branch (trial.harness.transforms or trial.switches)"));
  for (const auto& b : branches) {
    // The name as shown, within one line of the progress, the table and
    // the suggestions: a stranger's case.yaml may name a switch with a
    // newline, an escape or a token (probe 42); the run gets it as it is.
    const std::string shown = text::printableInLine(scrubSecretsOnly(b, machineScrubContext()));
    variants.push_back(named("branch-off:" + shown, "branch '" + shown + "' switched off"));
    variants.back().branches_off = {b};
  }
  return variants;
}

// ---------------------------------------------------------------- running

namespace {

bool isGzip(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in && magic[0] == 0x1f && magic[1] == 0x8b;
}

// The case to compare: case.yaml as given, or the one inside an archive
// (extracted with verify's checks); `recorded` gets the archive's failure.
CaseConfig loadInput(const fs::path& input, const fs::path& scratch, std::optional<Manifest>* manifest,
                     bool* made_here) {
  std::error_code ec;
  if (!fs::is_regular_file(input, ec))
    throw BadInputError(input.string() + ": no such file; give a repro.tar.gz from minrepro shrink or a case.yaml");
  if (!isGzip(input)) {
    *made_here = true;  // your own case.yaml: runs as it is unless --sandbox on
    return loadCase(input);
  }
  const fs::path dir = scratch / "case";
  const std::vector<std::string> names = extractArchive(input, dir);
  if (!fs::is_regular_file(dir / "case.yaml"))
    throw BadInputError(input.string() + ": no case.yaml in the archive: not a minrepro reproducer");
  if (fs::is_regular_file(dir / "signature.txt")) {
    *manifest = readManifestFile(dir / "signature.txt", input.string() + ":signature.txt");
    *made_here = sealedByThisUser(dir, names);
  }
  // A stranger's case may name only the archive's own regular files (its batch, its pipeline):
  // minrepro reads them outside the sandbox (probes 40 and 43).
  CaseConfig config = loadCase(dir / "case.yaml", {}, *made_here ? fs::path() : dir);
  return config;
}

TrialSpec variantSpec(const CaseConfig& c, const Variant& v, const fs::path& batch, const fs::path& dir,
                      const std::string& trial_binary, int run) {
  TrialSpec spec = trialSpecFor(c, trial_binary, {batch, dir, v.branches_off, static_cast<std::size_t>(run)});
  // The normal configuration: the variant is the only change.
  removeDiagnosticVariables(spec);
  for (const auto& [name, value] : v.env_set) spec.env_set[name] = value;
  return spec;
}

struct Runner {
  const CaseConfig& config;
  const CompareOptions& options;
  Executor& executor;
  const fs::path& scratch;
  CompareResult& result;
  int run_number = 0;

  // The float32 copy of the batch, written before the first run: a
  // sandboxed run may replace the batch with a link to a user's file
  // (probe 40). Beside an extracted archive's files, which the sandbox
  // binds (in the scratch directory, the sandboxed run could not see it).
  fs::path float32_batch;
  std::vector<std::string> float32_cast;
  void castBeforeTheRuns(const std::vector<Variant>& variants) {
    const bool needed =
        std::any_of(variants.begin(), variants.end(), [](const Variant& v) { return v.applies() && v.float32_batch; });
    if (!needed) return;
    const bool extracted = fs::weakly_canonical(config.base_dir) == fs::weakly_canonical(scratch / "case");
    float32_batch = (extracted ? config.base_dir : scratch) / "minrepro-float32-batch.pt";
    float32_cast = writeFloat32Batch(config.batch, float32_batch);
  }

  VariantResult runVariant(const Variant& v) {
    VariantResult r;
    r.variant = v;
    fs::path batch = config.batch;
    if (v.float32_batch) {
      batch = float32_batch;
      r.cast = float32_cast;
    }
    for (int i = 0; i < options.runs && !options.cancelled(); ++i) record(r, runOnce(v, batch));
    return r;
  }

  TrialOutcome runOnce(const Variant& v, const fs::path& batch) {
    const fs::path dir = scratch / ("run-" + std::to_string(++run_number));
    fs::create_directories(dir);
    const std::string binary = options.trial_binary.empty() ? defaultTrialBinary() : options.trial_binary;
    TrialSpec spec = variantSpec(config, v, batch, dir, binary, run_number);
    spec.cancel = options.cancel;
    TrialOutcome outcome = executor.run(spec);
    if (outcome.end == TrialEnd::FailedToStart)
      throw TrialStartError("variant " + v.name + ": the run could not start: " + outcome.start_error);
    if (outcome.end != TrialEnd::Cancelled) requireRoomAfterRun(dir, "variant " + v.name + "'s run");
    std::error_code ec;
    fs::remove_all(dir, ec);
    return outcome;
  }

  void record(VariantResult& r, const TrialOutcome& outcome) {
    const FailureSignature sig = classify(outcome);
    ++r.runs;
    // The first failure of the case as is (as case.yaml's failure section
    // expects it) is what every other run is compared with.
    if (!result.reference.failed() && sig.failed() && matchSignature(sig, sig, config.expected).matches)
      result.reference = sig;
    if (!sig.failed())
      ++r.passed;
    else if (result.reference.failed() && matchSignature(result.reference, sig, config.expected).matches)
      ++r.same;
    else
      ++r.different, ++r.other_failures[sig.summary()];
  }
};

void printProgress(std::ostream* progress, const VariantResult& r) {
  if (!progress) return;
  if (!r.variant.applies()) {
    *progress << "  " << r.variant.name << ": not applicable (" << r.variant.not_applicable << ")\n";
    return;
  }
  *progress << "  " << r.variant.name << ": " << r.runs << " run(s): " << r.same << " failed the same way, "
            << r.different << " failed differently, " << r.passed << " passed\n"
            << std::flush;
}

// The archive's op/call.txt and op/inputs.pt, copied before any of its
// runs into a directory no run can reach: a sandboxed run may replace them
// with links to files the sandbox hides, which minrepro itself, unsandboxed,
// then read and copied into the op runs (probe 38: a user's torch.save file
// under /tmp). Regular files only; the copy's directory, or empty.
fs::path snapshotOpFiles(const fs::path& extracted, const fs::path& scratch) {
  const fs::path from = extracted / "op", to = scratch / "op-as-extracted";
  std::error_code ec;
  for (const char* name : {"call.txt", "inputs.pt"})
    if (fs::symlink_status(from / name, ec).type() != fs::file_type::regular) return {};
  fs::create_directories(to);
  for (const char* name : {"call.txt", "inputs.pt"}) fs::copy_file(from / name, to / name);
  return to;
}

// The op-level reproducer of an extracted archive as a case of its own, in
// `scratch`: the call rendered to load every tensor from its batch (the
// archived script spells small ones out, which a float32 variant could not
// cast), its inputs.pt the batch. `op` is the archive's op/ as extracted
// (snapshotOpFiles). Empty when the archive has none.
fs::path opCaseOf(const fs::path& op, const fs::path& scratch, FailureFamily family, const std::string& python) {
  if (op.empty()) return {};
  const auto call = readOpCall(op / "call.txt");
  if (!call || !fs::is_regular_file(op / "inputs.pt") || opRecorderDir().empty()) return {};
  const OpCaseAxes axes = sharedSampleAxes(call->tensors, call->args);
  if (axes.axes.empty()) return {};
  const fs::path dir = scratch / "op-case";
  fs::create_directories(dir);
  fs::copy_file(op / "inputs.pt", dir / "inputs.pt");
  TrialSpec render;
  render.argv = {python, (fs::path(opRecorderDir()) / "minrepro_op.py").string(), "render", op.string(), dir.string()};
  render.work_dir = scratch / "op-render";
  if (!LocalExecutor().run(render).passed()) return {};
  FailureSignature signature;
  signature.family = family;
  std::ofstream(dir / "case.yaml") << renderOpCase(python, axes, signature, std::chrono::seconds(600), false);
  return dir / "case.yaml";
}

// An archive's trial command runs with the torch the archive was made with
// when this machine has it (engine/torch_versions.h): its Python, the
// command's first word, is replaced by the one chosen. The built-in
// harness's trials run this build's LibTorch, which is not chosen.
TorchChoice chooseTorch(const Manifest& m, const CompareOptions& options, CaseConfig& config, const fs::path& scratch,
                        bool trusted) {
  const bool python_command = config.command && !config.command->argv.empty() &&
                              fs::path(config.command->argv[0]).filename().string().rfind("python", 0) == 0;
  if (!python_command) return {};
  const std::string recorded = m.python.empty() ? config.command->argv[0] : m.python;
  TorchChoice choice =
      chooseArchiveTorch(recorded, m.torch, options.python, kDefaultPython, scratch / "torch-probe", trusted);
  config.command->argv[0] = choice.python;
  return choice;
}

}  // namespace

// What the report says when the case as is fails otherwise than recorded.
// Scrubbed: it quotes the run's message, and is printed as it happens
// (probe 29: a URL's password the run printed reached the terminal here).
static std::string otherwiseThanRecorded(const CompareResult& result) {
  return scrubSecretsOnly(
      "the case as it is now fails otherwise (" + result.reference.summary() + ") than the archive records (" +
          result.recorded +
          "): it was changed since it was made, or fails otherwise on this machine; \"failed the same way\" below "
          "means as the case as is, not as recorded (minrepro verify checks the recorded failure)",
      machineScrubContext());
}

CompareResult compareVariants(const CompareOptions& options, std::ostream* progress, Executor* executor) {
  if (options.runs < 1) throw BadInputError("--runs must be at least 1, found " + std::to_string(options.runs));
  const auto scratch = std::make_unique<ScratchDir>("minrepro-compare");
  CompareResult result;
  result.input = options.input;
  bool made_here = false;
  std::optional<Manifest> manifest;
  CaseConfig config = loadInput(options.input, scratch->path(), &manifest, &made_here);
  const fs::path op_files = snapshotOpFiles(scratch->path() / "case", scratch->path());
  completeCase(config);
  if (manifest) {
    result.recorded = manifest->signature.summary();
    result.torch = chooseTorch(*manifest, options, config, scratch->path(), made_here);
    if (progress && result.torch.checked)
      *progress << scrubSecretsOnly(result.torch.line, machineScrubContext()) << "\n";
  }
  const SandboxChoice sandbox = chooseSandbox(options.sandbox, made_here);
  const std::vector<Variant> variants = planVariants(config, BatchStore::open(config)->describe(), options.dev_root);
  if (progress)
    *progress << "compare " << text::printableInLine(options.input.string()) << ": " << sandbox.describe << "; "
              << options.runs << " run(s) per variant, each a fresh process without diagnostic variables\n";
  LocalExecutor plain;
  std::optional<SandboxedExecutor> sandboxed;
  if (sandbox.used)
    sandboxed.emplace(executor ? *executor : plain, fs::absolute(config.base_dir), *findBubblewrap(),
                      archiveKeyDirectories(), inheritedByArchiveRuns);
  Executor& chosen = sandboxed ? static_cast<Executor&>(*sandboxed) : executor ? *executor : plain;
  Runner runner{config, options, chosen, scratch->path(), result, 0, {}, {}};
  runner.castBeforeTheRuns(variants);
  for (const Variant& v : variants) {
    if (options.cancelled()) return result;
    VariantResult skipped;
    skipped.variant = v;
    result.results.push_back(v.applies() ? runner.runVariant(v) : skipped);
    printProgress(progress, result.results.back());
    if (v.name == "as-is" && !result.reproduces()) break;  // nothing to compare with
    if (v.name == "as-is" && manifest && !matchRecorded(*manifest, result.reference).matches) {
      result.fails_otherwise_than_recorded = true;
      if (progress) *progress << "  warning: " << otherwiseThanRecorded(result) << "\n";
    }
  }
  const fs::path op_case =
      result.reproduces() && !result.recorded.empty() && !options.cancelled()
          ? opCaseOf(op_files, scratch->path(), result.reference.family,
                     result.torch.python.empty() ? options.python.value_or(kDefaultPython) : result.torch.python)
          : fs::path();
  if (!op_case.empty()) {
    if (progress) *progress << "op/repro_op.py, the failing call alone, under the same variants:\n";
    CompareOptions op_options = options;
    op_options.input = op_case;
    // The archive's op/repro_op.py: sandboxed as the archive was, in its own scratch directory.
    op_options.sandbox = sandbox.used ? SandboxMode::On : SandboxMode::Off;
    result.op = std::make_shared<CompareResult>(compareVariants(op_options, progress, executor));
    // Within one line and its code span: no control byte, no backtick (probes 43 and 44).
    result.op_call = text::printableInLine(readOpCall(op_files / "call.txt")->op);
    std::replace(result.op_call.begin(), result.op_call.end(), '`', '\'');
  }
  return result;
}

// ---------------------------------------------------------------- report

namespace {

// What an applicable variant's counts suggest, one line.
std::string reading(const VariantResult& r) {
  const Variant& v = r.variant;
  if (r.same == r.runs)
    return "still fails the same way: " + v.change.substr(0, v.change.find(':')) + " does not remove it";
  if (r.passed == r.runs) {
    if (v.name == "cpu")
      return "passes on the CPU: a hint that the accelerator path (its kernel, driver or placement) matters; "
             "not a validation, the CPU runs other kernels";
    if (v.name == "float32") return "passes in float32: the failure needs half precision";
    if (v.name == "deterministic") return "passes with deterministic algorithms: a nondeterministic kernel is involved";
    return "passes with this branch off: the branch is needed for the failure";
  }
  if (r.same == 0 && r.passed == 0)
    return "fails differently in every run: this variant meets another error first, which says nothing about "
           "the original failure";
  return "mixed: " + std::to_string(r.same) + " of " + std::to_string(r.runs) +
         " runs fail the same way (a flaky failure, or one the change makes rarer)";
}

// A table cell's text: a '|' in a stranger's switch or transform name would
// end the cell and forge the counts after it (probe 44).
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

void writeTable(std::ostream& out, const CompareResult& result) {
  out << "| variant | change | runs | failed the same way | failed differently | passed |\n"
      << "|---|---|---:|---:|---:|---:|\n";
  for (const auto& r : result.results) {
    if (!r.variant.applies()) {
      out << "| " << cell(r.variant.name) << " | not applicable (" << cell(r.variant.not_applicable)
          << ") | - | - | - | - |\n";
      continue;
    }
    out << "| " << cell(r.variant.name) << " | " << cell(r.variant.change) << " | " << r.runs << " | " << r.same
        << " | " << r.different << " | " << r.passed << " |\n";
  }
}

}  // namespace

std::string renderComparison(const CompareResult& result) {
  std::ostringstream out;
  out << "\nReference, the case as is: " << (result.reproduces() ? result.reference.summary() : "no failure") << "\n";
  if (!result.recorded.empty()) out << "Recorded in the archive: " << result.recorded << "\n";
  if (result.fails_otherwise_than_recorded) out << "Warning: " << otherwiseThanRecorded(result) << "\n";
  if (result.torch.checked && !result.torch.matches) out << "Runs under another torch: " << result.torch.line << "\n";
  out << "\n";
  writeTable(out, result);
  out << "\nWhat the variants suggest:\n";
  for (const auto& r : result.results) {
    if (!r.variant.applies() || r.variant.name == "as-is") continue;
    out << "- " << r.variant.name << ": " << reading(r) << "\n";
    for (const auto& [summary, count] : r.other_failures)
      out << "  - failed differently " << count << "x: " << summary << "\n";
    for (const auto& line : r.cast) out << "  - cast " << line << "\n";
  }
  if (result.op) {
    out << "\nThe failing call alone (op/repro_op.py, `" << result.op_call << "`):\n";
    std::string op_text = renderComparison(*result.op);
    op_text.erase(op_text.rfind("\nA CPU success"));  // said once, below
    out << op_text;
  }
  out << "\nA CPU success is a hint, not a validation: the CPU runs other kernels, so a case that passes on the "
         "CPU can still be a bug of the accelerator path, and a fix must be checked on the accelerator.\n";
  return out.str();
}

int runCompare(const CompareOptions& options, std::ostream& out, std::ostream&) {
  requireUsableTmpdir();
  const CompareResult result = compareVariants(options, &out);
  if (options.cancelled())
    throw RunStopped(RunStopped::Reason::Interrupted,
                     "interrupted: the running variant was stopped and no other started; nothing was compared, and "
                     "nothing of the archive is left extracted");
  // The runs' messages are quoted: a token a run printed is scrubbed, as verify's lines are.
  out << scrubSecretsOnly(renderComparison(result), machineScrubContext());
  if (!result.reproduces())
    throw DoesNotReproduceError("the case as is did not fail in " + std::to_string(options.runs) +
                                " run(s): there is nothing to compare the variants with (check the case, or give "
                                "more --runs for a flaky failure" +
                                (result.torch.matches ? std::string(")")
                                                      : "; it ran under PyTorch " + result.torch.running_torch +
                                                            ", not the archive's: give --python a Python with it)"));
  return 0;
}

}  // namespace minrepro
