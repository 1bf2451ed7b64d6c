// What a run's options and case say about where its parts run (see the header).
#include "engine/run_settings.h"

#include <unistd.h>

#include "engine/diagnostics.h"
#include "engine/torch_versions.h"
#include "engine/trial_executors.h"
#include "engine/trial_spec.h"
#include "harness/batch_store.h"

namespace minrepro {

namespace {

ExecutorKind trialsKind(const ShrinkOptions& options, const CaseConfig& config) {
  return effectiveExecutor(config, options.executor).kind;
}

// Where the trials' tensors lived, as far as minrepro can know it: the
// built-in harness runs on the CPU; a command chooses for itself, so the
// report gives what it had to choose from and what the captured run used.
std::string trialBackend(const ShrinkOptions& options, const CaseConfig& config) {
  if (config.harness) return "CPU (the built-in harness runs on the CPU)";
  const BackendInfo recorded = backendFromContext(config.context);
  const std::string captured =
      recorded.kind == Backend::Unknown ? "" : "; the captured run used " + backendName(recorded);
  const ExecutorKind kind = trialsKind(options, config);
  if (!trialsRunOnThisMachine(kind))
    return "chosen by the trial command on the machines of executor kind " + executorKindName(kind) + captured;
  return "chosen by the trial command; this machine offers " + backendName(detectMachineBackend()) + captured;
}

// "" when the trials ran on this machine, else why what runs repro.py here is skipped.
std::string offThisMachine(const ShrinkOptions& options, const CaseConfig& config, const std::string& what) {
  const ExecutorKind kind = trialsKind(options, config);
  if (trialsRunOnThisMachine(kind)) return "";
  return "the trials ran off this machine (executor kind " + executorKindName(kind) + "); " + what;
}

}  // namespace

KeyValues probeEnvironment(const ShrinkOptions& options, const CaseConfig& config) {
  KeyValues env = libtorchEnvironment();
  for (auto& entry : pythonTorchVersions(trialPython(options, config), config.work_dir / "probe"))
    env.push_back(std::move(entry));
  env.emplace_back("Backend of the trials", trialBackend(options, config));
  return env;
}

std::string selfCheckSkipped(const ShrinkOptions& options, const CaseConfig& config) {
  if (!options.self_check) return "--no-self-check";
  return offThisMachine(options, config, "repro.py may need their devices");
}

bool selfCheckConfirms(const ShrinkOptions& options, const CaseConfig& config) {
  return options.archive && !options.checked_by_caller && selfCheckSkipped(options, config).empty();
}

std::string opStepSkipped(const ShrinkOptions& options, const CaseConfig& config) {
  if (!options.op_step) return "--no-op-repro";
  return offThisMachine(options, config, "the op step runs repro.py on this machine");
}

std::string trialPython(const ShrinkOptions& options, const CaseConfig& config) {
  if (options.python_given || !config.command) return options.python;
  // A Python inside the case directory (the project's own .venv) is
  // written "{case_dir}/.venv/bin/python" in the case.
  const std::string program = substitutePlaceholders(config.command->argv.front(), {}, {}, config.base_dir);
  if (!isPythonProgram(program)) return options.python;
  const std::string own = resolveProgram(program);
  return own.empty() ? options.python : own;
}

void useThisMachinesPython(const ShrinkOptions& options, CaseConfig& config) {
  if (!config.command) return;
  std::string& program = config.command->argv.front();
  const std::string path = substitutePlaceholders(program, {}, {}, config.base_dir);
  const std::string found = resolveProgram(path);
  if (!isPythonProgram(path) || (!found.empty() && ::access(found.c_str(), X_OK) == 0)) return;
  if (!options.python_given)
    throw BadInputError(config.case_file.string() + ": trial.command runs the Python " + path +
                        ", which is not on this machine (an archive's case names the Python its trials ran with); "
                        "give a Python with PyTorch with --python");
  program = options.python;
}

}  // namespace minrepro
