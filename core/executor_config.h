// case.yaml's `executor:` section: where trials run (this machine or Slurm
// jobs) and, on this machine, which accelerator each running trial gets.
// Kept apart from case_config.h so the executors (slurm_executor.h,
// device_pool.h) do not depend on the whole case.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minrepro {

// One per line of core/executor_kinds.def.
enum class ExecutorKind {
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) enumerator,
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND
};

// "local", "slurm": the names case.yaml and --executor use.
inline const std::vector<std::pair<ExecutorKind, std::string>>& executorKinds() {
  static const std::vector<std::pair<ExecutorKind, std::string>> kinds{
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) \
  {ExecutorKind::enumerator, name},
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND
  };
  return kinds;
}

// Whether the kind's trials run on this machine (core/executor_kinds.def).
inline bool trialsRunOnThisMachine(ExecutorKind kind) {
  switch (kind) {
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) \
  case ExecutorKind::enumerator:                                                              \
    return on_this_machine;
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND
  }
  return true;
}

// "local", "slurm" for the kind.
inline std::string executorKindName(ExecutorKind kind) {
  for (const auto& [k, name] : executorKinds())
    if (k == kind) return name;
  return "?";
}

inline std::optional<ExecutorKind> parseExecutorKind(const std::string& name) {
  for (const auto& [kind, kind_name] : executorKinds())
    if (name == kind_name) return kind;
  return std::nullopt;
}

inline std::vector<std::string> executorKindNames() {
  std::vector<std::string> names;
  for (const auto& kind : executorKinds()) names.push_back(kind.second);
  return names;
}

// "local or slurm"
inline std::string executorKindChoices() {
  std::string text;
  const auto names = executorKindNames();
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

// Passed to sbatch as given; empty: Slurm's default (no option).
struct SlurmOptions {
  std::string partition;                // --partition
  std::string gres;                     // --gres, e.g. gpu:1
  std::string time;                     // --time; empty: derived from the trial timeout
  std::string account;                  // --account
  std::vector<std::string> extra_args;  // any other sbatch options, e.g. --qos=debug
  std::size_t retries = 3;              // resubmissions of one trial after cluster failures
};

struct ExecutorConfig {
  ExecutorKind kind = ExecutorKind::Local;
  SlurmOptions slurm;
  // Local only: accelerator ids handed out one per running trial (empty:
  // detected), and how many trials may share one device.
  std::vector<std::string> devices;
  std::size_t trials_per_device = 1;
};

// The command line's choices (--executor, --devices, --trials-per-device);
// each one set replaces case.yaml's.
struct ExecutorOverrides {
  std::optional<ExecutorKind> kind;
  std::optional<std::vector<std::string>> devices;
  std::optional<std::size_t> trials_per_device;
};

}  // namespace minrepro
