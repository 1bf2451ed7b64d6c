// Does the failure depend on the batch at all?
//
// A step that raises ModuleNotFoundError, a SyntaxError in its own script, a
// missing file or a wrong command line fails the same way whatever it is
// given: reducing it "succeeds" by keeping one arbitrary sample, and the
// archive reproduces an environment error, not a bug in the data. Before
// reducing, one trial runs the command on a batch that holds no tensor at
// all (an empty dict), with every switch of the command off (a failure that
// needs a switch depends on the case after all). A step that reads its
// batch then fails otherwise (a KeyError, say); one that fails the same way
// never got as far as the data, and the run stops with exit 3, saying what
// the error is and what to do.
#pragma once

#include <optional>
#include <string>

#include "core/case_config.h"
#include "core/failure_signature.h"
#include "core/process/process.h"

namespace minrepro {

// What a batch-independent failure is and what to do about it, read from
// the trial's output: an import error (environment), an error in the
// trial's script, a file that cannot be opened, a wrong command line, or
// (none of those recognised) the general case.
std::string batchIndependentAdvice(const TrialOutcome& outcome, const CaseConfig& config);

// A failure that is a file opened by a relative name, not in the trial's
// own directory: what to do about it, else nothing. Read from the message
// alone, so that it holds whether or not the empty batch gets as far as the
// file (a step that unpacks its batch first fails on it another way).
// Required: only when the file is where the user is (the case's directory,
// minrepro's own, the script's), which tells it from a batch that names
// files which are missing everywhere; NotRequired: a failure the case says
// is not the step's (its failure section names another).
enum class FileWhereUserIs { Required, NotRequired };
std::optional<std::string> relativeFileMissing(const std::string& message, const CaseConfig& config,
                                               FileWhereUserIs where);

// The probe: a trial of the case with `spec` (a trial of the original, its
// batch path replaced by an empty batch written in its directory). Returns
// the reason to stop when it fails as the reference does, else nothing.
std::optional<std::string> checkBatchDependence(const CaseConfig& config, TrialSpec spec,
                                                const FailureSignature& reference, Executor& executor);

}  // namespace minrepro
