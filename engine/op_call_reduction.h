// The op step's wiring into a run: the step itself (opStepFor, which the
// archive step calls once the archive is written) and the reduction of the
// failing call's inputs (engine/archive/op_repro.h):
// the same engine as the batch's (a nested shrink of the call's case, in
// the work directory's op-reduce/), quiet, without a self-check or an op
// step of its own: a call of the run itself (engine/shrink.h), not a
// re-entry through the command.
#pragma once

#include <filesystem>
#include <functional>

#include "engine/archive/op_repro.h"
#include "engine/archive/reproducer.h"
#include "engine/shrink.h"

namespace minrepro {

// A reducer for OpStep::reduce that runs shrink with `outer`'s Python, one
// trial at a time on the slots it is given (the self-check runs beside it),
// on the warm Python it is given (the run's fork server) or a server of its
// own, forked without the comparison with plain processes (the op step runs the
// result alone in plain processes, and falls back to the recorded inputs
// when it does not fail there), at most 300 trials and the seconds it is
// given (10 minutes when none), on the case file it is given.
std::function<OpReduction(const std::filesystem::path& case_file, const OpReductionBounds& bounds)> opReducer(
    const ShrinkOptions& outer);

// The op step of a run (ArchiveJob::op_step): the run's Python, failure and
// self-check plan; the call's inputs reduced by opReducer within half the
// time the run had taken when the step began (at least 5 s of search);
// `warm` (the run's fork servers, or null) serves its Python runs.
std::function<OpRepro(const OpStart&)> opStepFor(const ShrinkOptions& options, const CaseConfig& config,
                                                 const FailureSignature& signature, const SelfCheckPlan& plan,
                                                 const Log& log, Executor* warm);

}  // namespace minrepro
