// case.yaml: what the user gives minrepro. Loading validates every key and
// reports bad input as a BadInputError that names the file, the key, the line
// and column, what was expected and what was found.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/executor_config.h"
#include "core/failure_signature.h"
#include "core/flaky.h"

namespace minrepro {

struct SampleAxis {
  std::string tensor;  // name in the batch dict
  int axis = 0;        // may be negative (counted from the end), as in PyTorch
};

// A tensor with a sequence axis (issue: lengths). Positions cut from a
// sample's end take `pad` (0 for token ids, false for masks).
struct SequenceTensor {
  std::string tensor;
  int axis = 1;  // may be negative, as in PyTorch
  double pad = 0;
};

struct SequenceSpec {
  std::vector<SequenceTensor> tensors;  // empty: the case has no sequence axis
  std::string lengths;                  // optional batch key of a 1-D per-sample length tensor
  // Or, without one: a [batch, length] mask of 0/1 or bool whose rows are a
  // prefix of ones (a tokenizer's attention_mask): the samples' lengths
  // are its rows' counts, and it is cut as a sequence tensor padded with 0.
  std::string mask;
  std::int64_t min_length = 1;  // no window or sample gets shorter than this
};

// One step of the built-in harness's transform chain, applied in the trial
// before the model, in declared order. An optional step is a branch the
// branches pass may switch off.
struct TransformSpec {
  std::string name;  // unique among branches; defaults to the type
  std::string type;  // normalize | noise | crop | pad | cast
  std::string tensor;
  std::map<std::string, std::string> params;  // type-specific: mean, std, axis, length, value, dtype
  bool optional = true;
  std::optional<std::uint64_t> seed;  // noise and crop; default: the case's seed + the step's position
};

// A switch of a user command: what the command gets when it is on (the
// original run) and when the branches pass switches it off.
struct CommandSwitch {
  std::string name;
  std::vector<std::string> args, off_args;          // appended to the command
  std::map<std::string, std::string> env, off_env;  // added to its environment
};

// What the values pass may simplify, and to what.
struct ValuesSpec {
  std::vector<std::string> exclude;       // tensors kept as they are (ids and lengths always are)
  std::map<std::string, double> trivial;  // tensor -> its trivial value, instead of the default
};

// Checked on every candidate before a trial is spent; each may be relaxed.
struct Invariants {
  bool dtype = true;        // every tensor keeps its dtype
  bool layout = true;       // and its memory layout (contiguous, transposed, channels-last, ...)
  bool op = true;           // the failure still names the original's operator
  bool sample_axis = true;  // every tensor with a sample axis agrees on the sample count
};

// The built-in harness: a TorchScript model slice and a loss, run by minrepro-trial.
struct HarnessTrial {
  std::filesystem::path model;         // absolute
  std::string input = "input";         // batch key passed to forward()
  std::string target;                  // batch key of the targets; empty: no loss
  std::string loss = "cross_entropy";  // cross_entropy | nll | none
  std::int64_t ignore_index = -100;
  std::vector<TransformSpec> transforms;  // applied to the batch before forward(), in order
};

// A user command: argv list, never passed through a shell. "{batch}" in any
// element is replaced by the candidate batch's path, "{workdir}" by the trial
// dir, "{env:NAME}" by the variable NAME (the trial's own, else this
// process's; an archive writes a secret of its command so).
struct CommandTrial {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<CommandSwitch> switches;  // optional branches of the command
};

// An archive's case leaves a secret's value out: trial.env says
// "<secret:env-NAME>", and a run takes NAME from where it runs. NAME for
// such a value, nullopt for any other.
std::optional<std::string> withheldVariableName(const std::string& value);

// `env` with each withheld value taken from this process's environment
// (left out when it is not set there).
std::map<std::string, std::string> withWithheldFromHere(std::map<std::string, std::string> env);

// "{env:NAME}" in `arg` replaced by `env`'s NAME, else this process's, else "".
std::string substituteEnvPlaceholders(std::string arg, const std::map<std::string, std::string>& env);

// trial.diagnostic in case.yaml (engine/diagnostics.h, planDiagnostics).
enum class DiagnosticSetting { Auto, On, Off, Cuda, Rocm };

struct CaseConfig {
  std::filesystem::path case_file;  // absolute path of case.yaml
  std::filesystem::path base_dir;   // relative paths in the case are relative to this
  std::filesystem::path batch;      // absolute
  std::vector<SampleAxis> sample_axes;
  // Lists and tuples of the batch that hold one entry per sample (per-image
  // boxes, file names), by path (harness/batch_tree.h): cut with the samples.
  std::vector<std::string> sample_lists;
  std::string sample_ids;  // optional batch key of per-sample ids (reduced with the samples)
  // No samples section: the samples, ids and (unless a sequence section is
  // given) the sequence axes are inferred from the batch when the case is
  // opened, as `minrepro init` infers them (harness/case_inference.h).
  bool infer_samples = false;
  std::vector<std::string> inference_notes;  // what was inferred (completeCase), for the log

  std::optional<HarnessTrial> harness;  // exactly one of harness / command
  std::optional<CommandTrial> command;
  std::chrono::milliseconds timeout{60'000};
  std::uint64_t memory_limit_bytes = 0;
  // Compiler caches (torch.compile's inductor, triton) shared between trials
  // in work_dir/compile-cache, as a user's runs share /tmp/torchinductor_USER;
  // false (trial.compile_cache: fresh): each trial compiles in its own TMPDIR,
  // for a failure inside the compiler itself.
  bool share_compile_cache = true;
  bool deterministic = false;  // trials get MINREPRO_DETERMINISTIC=1 (the harness turns on
                               // deterministic algorithms) and CUBLAS_WORKSPACE_CONFIG
  bool fork_server = true;     // trials may run in fork servers (engine/executors/fork_server.h)
  // trial.diagnostic: diagnostic variables for the trials by backend
  // (engine/diagnostics.h); never for the final confirmation.
  DiagnosticSetting diagnostic = DiagnosticSetting::Auto;
  std::vector<std::string> preload;  // modules the Python fork server imports once (with command)
  // Globs relative to base_dir: files the archive carries besides those a
  // traced run of the trial reads, and files it never carries (engine/archive/bundle.h).
  std::vector<std::string> files;
  std::vector<std::string> exclude_files;

  ExpectedFailure expected;
  FlakyOptions flaky;
  SequenceSpec sequence;
  ValuesSpec values;
  Invariants invariants;
  std::string pipeline = "default";   // name or file of the pass order; "" when `reducers` lists them
  std::vector<std::string> reducers;  // the passes in order, from `reducers` or the pipeline
  // Where each was written ("case.yaml:10:21: reducers[1]"), for the engine's
  // message when a name is not a pass (engine/pipeline.h: checkPassNames).
  std::vector<std::string> reducer_places;
  std::filesystem::path output;    // absolute; default <base_dir>/repro.tar.gz
  std::filesystem::path work_dir;  // absolute; default <base_dir>/minrepro-work
  std::uint64_t seed = 0;
  ExecutorConfig executor;  // where trials run (executor: section; core/executor_config.h)

  // Context recorded by a capture (free-form, shown in the report).
  std::map<std::string, std::string> context;
};

// case.yaml's words for DiagnosticSetting (trial.diagnostic), in the enum's order.
const std::vector<std::string>& diagnosticSettingNames();

// Loads and validates case.yaml (file-level checks only: keys, types, files
// exist). Batch contents are checked when the batch is opened. `base_dir`
// (default: the file's directory) is the case directory: the zero-config
// start keeps its inferred case in the work directory but its case
// directory is where the user ran it (commands/init.h).
CaseConfig loadCase(const std::filesystem::path& case_file, const std::filesystem::path& base_dir = {},
                    const std::filesystem::path& confined_to = {});

// Writes a case.yaml equivalent to `config` with paths relative to `dir`
// (used for the archive and the best-so-far case).
std::string renderCase(const CaseConfig& config, const std::filesystem::path& dir, const std::string& batch_name,
                       const std::string& model_name);

// A command element that is an absolute path inside `base_dir` as
// "{case_dir}/<relative path>" (what the archive's case.yaml and repro.py
// write, so the archive's copy is run, not the user's); others unchanged.
std::string caseRelativeArg(const std::string& arg, const std::filesystem::path& base_dir);

// The files a command trial names inside the case directory, as
// "{case_dir}/NAME" or as an absolute path under base_dir, relative to
// base_dir and only those that exist. renderCase writes all of them as
// "{case_dir}/NAME", so an archive of the case must carry them.
std::vector<std::filesystem::path> commandCaseFiles(const CaseConfig& config);

// A duration as case.yaml writes it: "60", "2.5" (seconds, to the millisecond).
std::string formatSeconds(std::chrono::milliseconds duration);

}  // namespace minrepro
