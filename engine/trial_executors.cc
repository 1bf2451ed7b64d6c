#include "engine/trial_executors.h"

#include <stdexcept>

#include "core/errors.h"

namespace minrepro {

namespace {

std::string joined(const std::vector<std::string>& ids) {
  std::string text;
  for (const auto& id : ids) text += (text.empty() ? "" : ",") + id;
  return text;
}

// Devices are handed out when the user named them, or when several trials
// run at once on a machine that has some; one trial at a time with nothing
// asked keeps the environment as it was (it may want every GPU).
std::optional<DeviceList> devicesToLease(const ExecutorConfig& e, std::size_t jobs) {
  if (!e.devices.empty()) return DeviceList{deviceVariable(), e.devices, "given"};
  if (jobs <= 1) return std::nullopt;
  DeviceList detected = detectDevices();
  if (detected.ids.empty()) return std::nullopt;
  return detected;
}

}  // namespace

std::unique_ptr<ForkServerExecutor> makeForkServerExecutor(const CaseConfig& config, const std::string& trial_binary,
                                                           Executor& fallback, std::size_t jobs) {
  if (!config.fork_server) return nullptr;
  ForkServerOptions options;
  options.log_file = config.work_dir / "fork-server.log";
  options.servers_per_route = std::max<std::size_t>(jobs, 1);
  return std::make_unique<ForkServerExecutor>(trialForkRouter(trial_binary, config.preload), fallback, options);
}

ExecutorOverrides parseExecutorOverrides(const std::string& kind, const std::string& devices,
                                         std::size_t trials_per_device) {
  ExecutorOverrides o;
  if (!kind.empty()) {
    o.kind = parseExecutorKind(kind);
    if (!o.kind) throw BadInputError("--executor must be " + executorKindChoices() + ", found '" + kind + "'");
  }
  if (!devices.empty()) o.devices = parseDeviceList(devices);
  if (trials_per_device > 0) o.trials_per_device = trials_per_device;
  return o;
}

ExecutorConfig effectiveExecutor(const CaseConfig& config, const ExecutorOverrides& overrides) {
  ExecutorConfig e = config.executor;
  if (overrides.kind) e.kind = *overrides.kind;
  if (overrides.devices) e.devices = *overrides.devices;
  if (overrides.trials_per_device) e.trials_per_device = *overrides.trials_per_device;
  if (e.kind == ExecutorKind::Slurm && !e.devices.empty())
    throw BadInputError(
        "devices (--devices or executor.devices) are for local trials; on Slurm ask for GPUs "
        "with executor.gres (e.g. gpu:1) and Slurm sets CUDA_VISIBLE_DEVICES in each job");
  return e;
}

void buildSlurmExecutors(TrialExecutors& stack, const CaseConfig& config, const ExecutorConfig& e, const std::string&,
                         std::size_t) {
  SlurmExecutorOptions options;
  options.slurm = e.slurm;
  SlurmExecutor& slurm = stack.push(std::make_unique<SlurmExecutor>(options));
  try {
    slurm.preflight(config.work_dir / "slurm-preflight");
  } catch (const BadInputError& refused) {
    throw BadInputError(config.case_file.string() + ": executor: " + refused.what());
  }
  stack.describe("Slurm jobs" + (e.slurm.partition.empty() ? "" : " in partition " + e.slurm.partition));
}

void buildLocalExecutors(TrialExecutors& stack, const CaseConfig& config, const ExecutorConfig& e,
                         const std::string& trial_binary, std::size_t jobs) {
  // Fork servers: still a fresh process per trial, LibTorch / torch start-up paid once.
  if (auto forked = makeForkServerExecutor(config, trial_binary, stack.local(), jobs)) {
    stack.noteForkServers(&stack.push(std::move(forked)));
    stack.describeMore(" from fork servers");
  }
  if (const auto devices = devicesToLease(e, jobs)) {
    stack.push(std::make_unique<DevicePoolExecutor>(stack.top(), *devices, e.trials_per_device));
    stack.describeMore(", " + devices->variable + " one of " + joined(devices->ids) + " (" + devices->source + "), " +
                       std::to_string(e.trials_per_device) + " trial(s) per device");
  }
}

std::unique_ptr<TrialExecutors> makeTrialExecutors(const CaseConfig& config, const ExecutorOverrides& overrides,
                                                   const std::string& trial_binary, std::size_t jobs) {
  const ExecutorConfig e = effectiveExecutor(config, overrides);
  auto stack = std::make_unique<TrialExecutors>();
  switch (e.kind) {
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) \
  case ExecutorKind::enumerator:                                                              \
    builder(*stack, config, e, trial_binary, jobs);                                           \
    break;
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND
  }
  return stack;
}

}  // namespace minrepro
