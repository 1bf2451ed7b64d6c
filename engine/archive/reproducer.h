// The reproducer archive a shrink ends with: the minimal batch and its
// neighbours, the files the trial reads (traced in one plain run,
// engine/archive/bundle.h), REPORT.md, repro.py, case.yaml and signature.txt,
// written atomically (engine/archive/tar_gz.h) and then run on its own as a
// maintainer would (engine/archive/self_check.h) before the run says it is done.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/case_config.h"
#include "core/errors.h"
#include "core/op_call.h"
#include "core/process/job_slots.h"
#include "engine/archive/bundle.h"
#include "engine/archive/neighbours.h"
#include "engine/archive/report.h"
#include "engine/archive/self_check.h"
#include "engine/log.h"
#include "engine/oracle.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

// The neighbour batches, written beside the minimal batch in the work
// directory, with their ids and expected counts.
NeighbourPlan writeNeighbours(const CaseConfig& config, const BatchStore& batch, const Selection& minimal);

// What REPORT.md says about the run so far: the signature, the kept
// samples and what sets them apart, the trials, the environment, the
// neighbours, the minimal case in one line and the samples REPORT.html
// draws (a picture that cannot be made is logged, never the run's end).
// What looks like a secret in the files the archive carries and in its
// case.yaml, a line each ("step.py:12: github-pat"), at most 20 and a count.
std::vector<std::string> secretsIn(const std::vector<BundledFile>& files, const std::string& case_yaml);

ReductionSummary summarize(KeyValues environment, const CaseConfig& config, const BatchStore& batch,
                           const TrialOracle& oracle, const Selection& minimal,
                           const std::filesystem::path& minimal_batch, const NeighbourPlan& neighbours, Log& log);

// The op recorder riding on the file trace's run (engine/op_step/op_recorder.h),
// as the op step asks: its environment, its own files (not the trial's),
// and where it writes. No environment: it does not ride.
struct RecorderRide {
  std::map<std::string, std::string> env;
  std::string program_dir;           // the recorder's own files
  std::filesystem::path record_dir;  // what it writes
};

// What the op step starts from: the archive just written, the recorder's
// record of the file trace's run (empty: none usable), the slots it shares
// with the self-check, and the variables the archive leaves out, which its
// runs of repro.py get as the self-check's do.
struct OpStart {
  std::filesystem::path archive;
  std::filesystem::path recorded;
  JobSlots* slots = nullptr;
  std::map<std::string, std::string> env;
};

// What the command decided about the archive.
struct ArchiveJob {
  std::filesystem::path minimal_batch;
  NeighbourPlan neighbours;
  std::size_t plain_passes = 0;             // passes of the original in plain processes: the self-check's evidence
  std::string python;                       // runs repro.py in the self-check
  std::string skip_self_check;              // why the archive is not run on its own ("": it is)
  const std::atomic<bool>* stop = nullptr;  // set on SIGINT/SIGTERM: the trace and the self-check stop
  // Why the op step does not run beside the self-check ("": it runs, when
  // the run ended reduced), and its recorder on the file trace's run.
  std::string skip_op_step = "--no-op-repro";
  RecorderRide recorder;
  std::size_t jobs = 1;  // --jobs: the self-check's and the op step's processes at once, together
  bool force = false;    // --force: a file minrepro did not write may be replaced at the output
  // The self-check is the final confirmation (no confirmation ran after the
  // search): REPORT.md's "confirmed" is its verdict.
  bool confirmation_is_self_check = false;
  Timeline* timeline = nullptr;  // gets the phases after the search (file trace, archive, self-check, op step)
};

// The archive step, in the conductor's order. write() traces the files the
// trial reads, writes the archive to config.output and starts its check on
// its own in the background (unless the run was stopped or `job` says
// not to). When opStart() gives a start, the conductor runs the op step
// (engine/op_step/op_step.h) meanwhile, on the same --jobs slots, and hands
// its outcome to opStepDone(). finish() waits for the self-check and writes
// the archive again with what both found; REPORT.md records the outcome.
class ArchiveStep {
 public:
  ArchiveStep(const CaseConfig& config, TrialOracle& oracle, const Selection& best, const ArchiveJob& job,
              ReductionSummary& summary, Log& log);
  ~ArchiveStep();
  ArchiveStep(const ArchiveStep&) = delete;
  ArchiveStep& operator=(const ArchiveStep&) = delete;

  void write(ExitStatus status);
  std::optional<OpStart> opStart();
  void opStepDone(OpStepResult result);
  // The run's status: the one write() was given, Interrupted when a signal
  // came meanwhile, ArchiveDoesNotReproduce when the self-check saw it fail to.
  ExitStatus finish();

 private:
  std::filesystem::path divertedOutput() const;
  void startSelfCheck();

  const CaseConfig& config_;
  TrialOracle& oracle_;
  const Selection& best_;
  const ArchiveJob& job_;
  ReductionSummary& summary_;
  Log& log_;
  ExitStatus status_ = ExitStatus::Reduced;
  CaseConfig archived_;                          // as the archive's case.yaml says it
  std::map<std::string, std::string> withheld_;  // trial.env's values it leaves out (its switches' too)
  BundlePlan bundle_;
  std::filesystem::path recorded_;
  std::filesystem::path output_;     // config.output, unless the trial reads that file (then the work directory's)
  std::unique_ptr<JobSlots> slots_;  // the --jobs slots of the self-check and the op step
  std::unique_ptr<JobSlots> bound_;  // the self-check's share of them while the op step runs
  double checked_from_ = 0, checked_at_ = 0;
  std::future<SelfCheck> checking_;  // last: joined before what it uses goes
};

}  // namespace minrepro
