// The start without a hand-written case.yaml, as C-Vise needs only a test
// and a file:
//
//   minrepro init   --batch saved.pt -- python step.py {batch}   writes case.yaml, commented
//   minrepro shrink --batch saved.pt -- python step.py {batch}   infers the same case and shrinks
//
// What is inferred from the batch (harness/case_inference.h) is said, and
// an ambiguous choice is written into the case for the user to edit. The
// command is the user's shell command as typed: files it names relative to
// the current directory become {case_dir}/NAME (the trial runs in a
// directory of its own, and the archive carries them), and an argument
// that is the batch's own path becomes {batch}.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace minrepro {

struct InitOptions {
  std::filesystem::path batch;     // the failing batch, as given
  std::vector<std::string> argv;   // the trial command, as typed after --
  std::filesystem::path case_dir;  // where relative paths in the case resolve: the case file's directory
  // Where the command's relative paths resolve, as the shell did: the current
  // directory (empty: case_dir; init --output elsewhere makes them differ).
  std::filesystem::path command_dir;
  const std::filesystem::path& commandDir() const { return command_dir.empty() ? case_dir : command_dir; }
};

// The case.yaml text for the batch and command, with the inference as
// comments; `notes` gets what was inferred, one sentence each. Throws
// BadInputError for a command without {batch} (nor the batch's path) and
// for a batch that cannot be read or has no sample axis.
std::string renderInitCase(const InitOptions& options, std::vector<std::string>& notes);

// `minrepro init`: writes `output` (refused when it exists, unless `force`),
// prints what was inferred and the command that shrinks it. Returns 0.
int runInit(const InitOptions& options, const std::filesystem::path& output, bool force, std::ostream& out);

// `minrepro shrink --batch`: writes the inferred case to work_dir/case.yaml
// (atomically) and returns its path; its case directory is
// options.case_dir. Prints the inference unless `quiet`.
std::filesystem::path writeZeroConfigCase(const InitOptions& options, const std::filesystem::path& work_dir, bool quiet,
                                          std::ostream& out);

}  // namespace minrepro
