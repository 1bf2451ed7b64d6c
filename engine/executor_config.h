// case.yaml's `executor:` section: where trials run (this machine or Slurm
// jobs) and, on this machine, which accelerator each running trial gets.
// Kept apart from case_config.h so the executors (slurm_executor.h,
// device_pool.h) do not depend on the whole case.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace minrepro {

enum class ExecutorKind { Local, Slurm };

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
