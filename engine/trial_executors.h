// The executor a shrink job runs its trials with, from case.yaml's
// `executor:` section and the command line:
//   slurm: SlurmExecutor (each trial a job), checked with sbatch --test-only
//          before anything runs;
//   local: LocalExecutor, under fork servers where they apply, under a
//          DevicePoolExecutor when there are devices to hand out (given, or
//          detected with --jobs > 1).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/case_config.h"
#include "core/executor_config.h"
#include "engine/executors/device_pool.h"
#include "engine/executors/fork_server.h"
#include "engine/executors/slurm_executor.h"

namespace minrepro {

// The executors a shrink runs its trials with, as a stack: this machine's
// processes at the bottom, each layer a kind's builder pushes wrapping the
// one below (fork servers, a device pool; or Slurm jobs), the top the one
// the oracle calls. A new kind adds layers here, not members.
class TrialExecutors {
 public:
  TrialExecutors() = default;
  TrialExecutors(const TrialExecutors&) = delete;
  TrialExecutors& operator=(const TrialExecutors&) = delete;
  ~TrialExecutors() {
    while (!layers_.empty()) layers_.pop_back();  // the top first: a layer may still use the one below
  }

  Executor& top() { return layers_.empty() ? static_cast<Executor&>(local_) : *layers_.back(); }
  Executor& local() { return local_; }
  // Puts `layer` on top (it usually wraps top()); the stack keeps it alive.
  template <class E>
  E& push(std::unique_ptr<E> layer) {
    E& pushed = *layer;
    layers_.push_back(std::move(layer));
    return pushed;
  }

  // One line for the log: "local processes, fork servers, one of CUDA_VISIBLE_DEVICES=0,1 per trial".
  const std::string& description() const { return description_; }
  void describe(std::string text) { description_ = std::move(text); }
  void describeMore(const std::string& text) { description_ += text; }

  // The fork servers in the stack, if any: their counts say whether trials were forked.
  const ForkServerExecutor* forkServers() const { return forked_; }
  void noteForkServers(const ForkServerExecutor* forked) { forked_ = forked; }

 private:
  LocalExecutor local_;
  std::vector<std::unique_ptr<Executor>> layers_;
  const ForkServerExecutor* forked_ = nullptr;
  std::string description_ = "local processes";
};

// One builder per line of core/executor_kinds.def: puts the kind's
// executors on the stack.
#define MINREPRO_EXECUTOR_KIND(enumerator, name, builder, keys, on_this_machine, description) \
  void builder(TrialExecutors&, const CaseConfig&, const ExecutorConfig&, const std::string&, std::size_t);
#include "core/executor_kinds.def"
#undef MINREPRO_EXECUTOR_KIND

// The command line's --executor, --devices and --trials-per-device ("" and
// 0: not given). Throws BadInputError with what to write instead.
ExecutorOverrides parseExecutorOverrides(const std::string& kind, const std::string& devices,
                                         std::size_t trials_per_device);

// The case's executor section with the command line's overrides applied.
ExecutorConfig effectiveExecutor(const CaseConfig& config, const ExecutorOverrides& overrides);

// The executor of a shrink job: the built-in harness and Python-script
// commands in fork servers (one per job slot and kind of trial); null when
// case.yaml says `trial.fork_server: false`.
std::unique_ptr<ForkServerExecutor> makeForkServerExecutor(const CaseConfig& config, const std::string& trial_binary,
                                                           Executor& fallback, std::size_t jobs = 1);

// Throws BadInputError (exit 2) for Slurm options the cluster refuses and
// TrialStartError (exit 4) when Slurm cannot be reached: before any trial.
std::unique_ptr<TrialExecutors> makeTrialExecutors(const CaseConfig& config, const ExecutorOverrides& overrides,
                                                   const std::string& trial_binary, std::size_t jobs);

}  // namespace minrepro
