// The original case, before the search: it must fail, and fail as the
// user expects when case.yaml says how (a pass of a flaky original is not
// "does not reproduce": it runs until enough failures are seen or the
// budget of runs is spent), and a command's failure must depend on the
// batch at all. Also what the run says when its minimal case did not fail
// again. Steps of the conductor (engine/shrink.cc), kept apart so that it
// reads as its steps.
#pragma once

#include <string>
#include <vector>

#include "core/case_config.h"
#include "core/process/process.h"
#include "engine/archive/report.h"
#include "engine/log.h"
#include "engine/oracle.h"
#include "engine/pipeline.h"

namespace minrepro {

// The original's runs (the oracle's estimate, free job slots trying what
// the search asks first) and the log's verdict: Reduced when it fails as
// expected, DoesNotReproduce (with why) when not.
ExitStatus originalFailsAsExpected(const CaseConfig& config, const CaseView& view, TrialOracle& oracle,
                                   const Selection& all, Log& log, OriginalEstimate& estimate);

// A command that fails the same way on a batch with no tensor and every
// switch off never reached the data (engine/batch_dependence.h):
// DoesNotReproduce with what it is. Then, when the case keeps tensors
// whole, one with none of its samples: failing the same way, what fails is
// in those tensors (engine/case_check.h, samplesDoNotMatterMessage), and
// DoesNotReproduce says so. Not for a hang (the probe would cost a whole
// timeout) nor the built-in harness, which reads the batch first.
ExitStatus checkDependsOnBatch(const CaseConfig& config, const BatchStore& batch, TrialOracle& oracle,
                               Executor& executor, const Selection& all, Log& log);

// The torch versions that differ (engine/torch_versions.h), logged once as
// warnings; REPORT.md lists them too.
std::vector<std::string> logTorchMismatches(const CaseConfig& config, const KeyValues& environment, Log& log);

// Why the minimal case may not have failed again `where`, by what the run
// saw: runs failing another way, else what a step may read of the
// candidate files that a tensor does not show.
std::string notConfirmedWhy(const TrialOracle& oracle, const std::string& where);

}  // namespace minrepro
