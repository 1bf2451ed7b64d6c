// Where the archive may be written. `output: batch.pt` (or the case file,
// or a path naming a device) used to be overwritten by the archive: the
// user's failing batch gone, exit 0. Checked before any trial, so a
// mistake costs nothing.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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

// The same rule at the run's end, for what appeared at the output while the
// trials ran (a step's own file, a link; probe 37: replaced silently, the
// check having been made at the start only): why the archive may not go
// there now, "" when it may.
std::string outputTakenDuringRun(const std::filesystem::path& output, bool force);

// The path a command argument may name: FILE of `--opt=FILE`, else the
// argument itself (a trial command's own log or output file).
std::string argumentPath(const std::string& arg);

// The same rule for any file a command writes (init's case.yaml too):
// `what` names it in the message ("the case (--output)"); `inputs` are the
// files the command reads, each with what it is to the user; `ours` says
// whether an existing file is one minrepro wrote (replaced without
// `force`), `existing` what the message says of one that is not. Throws
// BadInputError (exit 2) before anything is written.
void checkOutputPath(const std::filesystem::path& output, const std::string& what,
                     const std::vector<std::pair<std::filesystem::path, std::string>>& inputs, bool force, bool ours,
                     const std::string& existing = "exists");

}  // namespace minrepro
