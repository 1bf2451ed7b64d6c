// Where the archive may be written. `output: batch.pt` (or the case file,
// or a path naming a device) used to be overwritten by the archive: the
// user's failing batch gone, exit 0. Checked before any trial, so a
// mistake costs nothing.
#pragma once

#include <filesystem>

#include "core/case_config.h"

namespace minrepro {

// Throws BadInputError (exit 2) when the archive may not go to
// config.output: a directory; a directory that does not exist or this user
// may not write; a path that is not a regular file (a device, a FIFO, a
// socket, a symbolic link); a file the run reads (the case file, the batch,
// the model, a file the command names); or an existing file that is not an
// archive minrepro wrote, unless `force` (--force) says to replace it.
// Inputs and non-regular files are refused even with `force`.
void checkArchiveOutput(const CaseConfig& config, bool force);

}  // namespace minrepro
