// The reduction of the failing call's inputs (engine/archive/op_repro.h):
// the same engine as the batch's (a nested shrink of the call's case, in
// the work directory's op-reduce/), quiet, without a self-check or an op
// step of its own: a call of the run itself (engine/shrink.h), not a
// re-entry through the command.
#pragma once

#include <filesystem>
#include <functional>

#include "engine/archive/op_repro.h"
#include "engine/shrink.h"

namespace minrepro {

// A reducer for OpStep::reduce that runs shrink with `outer`'s Python and
// jobs, at most 300 trials or 10 minutes, on the case file it is given.
std::function<OpReduction(const std::filesystem::path& case_file)> opReducer(const ShrinkOptions& outer);

}  // namespace minrepro
