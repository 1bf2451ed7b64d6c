// Trials as Slurm jobs: `--executor slurm` / case.yaml `executor: {kind: slurm}`.
//
// Each trial is one batch job (sbatch, then polling; see slurm_executor.cc
// for why not srun) whose script runs minrepro-slurm-job (slurm_job.h) on
// the trial's spec; the outcome and output come back through files in the
// trial's directory, which must be on a filesystem the nodes share. Up to
// --jobs trials are in flight (one oracle thread waits on each).
//
// A job that ends without an outcome for a reason of the cluster's (node
// failure, preemption, boot or launch failure, cancelled by someone else,
// lost from the controller) is submitted again, up to SlurmOptions::retries
// times in a row; it is never a pass and never the bug. Past that the trial
// "could not start" (the run stops, exit 4). When the run is interrupted
// (TrialSpec::cancel), the executor scancels its own jobs, by id, and only those.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/executor_config.h"
#include "core/process/process.h"

namespace minrepro {

struct SlurmExecutorOptions {
  SlurmOptions slurm;
  std::string job_binary;                           // minrepro-slurm-job; must be at the same path on the nodes
  std::string job_name = "minrepro";                // jobs are named NAME.PID.TRIALDIR
  std::chrono::milliseconds state_poll{1'000};      // scontrol queries per job (the outcome file is watched faster)
  std::chrono::milliseconds outcome_grace{30'000};  // a finished job's outcome file may show late on NFS
};

struct SlurmAttempt;  // one job's end: a trial outcome, or a cluster failure to retry

struct SlurmCounts {
  std::size_t submitted = 0;
  std::size_t resubmitted = 0;                  // after cluster failures
  std::map<std::string, std::size_t> failures;  // cluster failure ("NODE_FAIL", "CANCELLED") -> count
};

class SlurmExecutor : public Executor {
 public:
  explicit SlurmExecutor(SlurmExecutorOptions options);
  ~SlurmExecutor() override;  // scancels jobs still in flight
  SlurmExecutor(const SlurmExecutor&) = delete;
  SlurmExecutor& operator=(const SlurmExecutor&) = delete;

  // Before the first trial: sbatch --test-only with the case's options.
  // Throws BadInputError (exit 2) when Slurm refuses them (no such partition,
  // bad gres or time) and TrialStartError (exit 4) when sbatch, the
  // controller or minrepro-slurm-job cannot be reached.
  void preflight(const std::filesystem::path& scratch_dir);

  TrialOutcome run(const TrialSpec& spec) override;  // thread-safe
  SlurmCounts counts() const;
  std::vector<std::string> liveJobs() const;  // ids of jobs submitted and not yet finished

  // sbatch's options for one trial (without the script), for tests and the bench.
  std::vector<std::string> sbatchOptions(const TrialSpec& spec) const;

 private:
  SlurmAttempt submitAndWait(const TrialSpec& spec);
  SlurmAttempt waitForJob(const std::string& id, const TrialSpec& spec);
  std::string submit(const TrialSpec& spec, std::string* error);
  void cancelJob(const std::string& id);
  void forget(const std::string& id);

  SlurmExecutorOptions options_;
  mutable std::mutex mutex_;
  std::set<std::string> live_;
  SlurmCounts counts_;
};

// minrepro-slurm-job next to the running executable.
std::string defaultSlurmJobBinary();

// A Slurm job's state from `scontrol -o show job ID`: JobState, Reason and
// ExitCode fields; state "" when the controller no longer knows the job.
struct SlurmJobState {
  std::string state;
  std::string reason;
  std::string exit_code;
  bool final() const;
};
SlurmJobState parseScontrolJob(const std::string& scontrol_output);
SlurmJobState querySlurmJob(const std::string& id);

}  // namespace minrepro
