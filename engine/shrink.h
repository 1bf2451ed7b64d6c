// `minrepro shrink`: check that the original reproduces, run the reducer
// passes until none makes progress, confirm, and write the archive.
#pragma once

#include "core/errors.h"
#include "core/process/process.h"
#include "engine/shrink_options.h"

namespace minrepro {

// Runs the whole job and returns how it ended (Reduced, DoesNotReproduce,
// BudgetSpent, Interrupted, ArchiveDoesNotReproduce). Bad input and trials
// that cannot start are thrown (core/errors.h). `executor` null: the
// executors of the case's executor kind (engine/trial_executors.h).
ExitStatus runShrink(const ShrinkOptions& options, Executor* executor = nullptr);

}  // namespace minrepro
