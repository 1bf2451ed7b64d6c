// The reproducer archive a shrink ends with: the minimal batch and its
// neighbours, the files the trial reads (traced in one plain run,
// engine/archive/bundle.h), REPORT.md, repro.py, case.yaml and signature.txt,
// written atomically (engine/archive/tar_gz.h) and then run on its own as a
// maintainer would (engine/archive/self_check.h) before the run says it is done.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "core/case_config.h"
#include "core/errors.h"
#include "core/process/job_slots.h"
#include "engine/archive/neighbours.h"
#include "engine/archive/report.h"
#include "engine/log.h"
#include "engine/oracle.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

// The neighbour batches, written beside the minimal batch in the work
// directory, with their ids and expected counts.
NeighbourPlan writeNeighbours(const CaseConfig& config, const BatchStore& batch, const Selection& minimal);

// What REPORT.md says about the run so far: the signature, the kept
// samples and what sets them apart, the trials, the environment.
ReductionSummary summarize(KeyValues environment, const CaseConfig& config, const BatchStore& batch,
                           const TrialOracle& oracle, const Selection& minimal,
                           const std::filesystem::path& minimal_batch);

// What the op step starts from.
struct OpStart {
  std::filesystem::path archive;   // just written
  std::filesystem::path recorded;  // the op recorder's record of the file trace's run; empty: none usable
  JobSlots* slots = nullptr;       // shared with the self-check
};

// What the command decided about the archive.
struct ArchiveJob {
  std::filesystem::path minimal_batch;
  NeighbourPlan neighbours;
  std::size_t plain_passes = 0;             // passes of the original in plain processes: the self-check's evidence
  std::string python;                       // runs repro.py in the self-check
  std::string skip_self_check;              // why the archive is not run on its own ("": it is)
  const std::atomic<bool>* stop = nullptr;  // set on SIGINT/SIGTERM: the trace and the self-check stop
  // The failing operator call alone (engine/archive/op_repro.h), run on the
  // archive just written, beside the self-check; null: not tried, for
  // `skip_op_step`'s reason.
  std::function<OpRepro(const OpStart&)> op_step;
  std::string skip_op_step = "--no-op-repro";
  std::size_t jobs = 1;  // --jobs: the self-check's and the op step's processes at once, together
  // The self-check is the final confirmation (no confirmation ran after the
  // search): REPORT.md's "confirmed" is its verdict.
  bool confirmation_is_self_check = false;
  Timeline* timeline = nullptr;  // gets the phases after the search (file trace, archive, self-check, op step)
};

// Writes the archive to config.output and checks it on its own unless the
// run was stopped or `job` says not to; REPORT.md records the outcome.
// Returns the run's status: `status`, Interrupted when a signal came
// meanwhile, ArchiveDoesNotReproduce when the self-check saw it fail to.
ExitStatus writeAndCheckArchive(const CaseConfig& config, TrialOracle& oracle, const Selection& best,
                                const ArchiveJob& job, ReductionSummary& summary, ExitStatus status, Log& log);

}  // namespace minrepro
