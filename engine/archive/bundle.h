// The files a trial reads travel with the archive.
//
// A user's step script loads weights, vocabularies or configs from beside
// itself (os.path.dirname(__file__)); an archive without them fails with
// "file not found" instead of the bug. Which files a trial reads is found by
// running the minimal case once more as a plain process with
// libminrepro_filetrace.so preloaded (harness/file_trace.c: every regular
// file that the trial and its children open for reading through libc), plus
// case.yaml's trial.files globs, less trial.exclude_files. What is not the
// user's never travels: the batch (the archive has its own), the work
// directory, system directories and installed Python packages.
//
// Files under the case directory keep their relative paths, so that loads
// relative to the script resolve in the extracted archive. Files read from
// elsewhere go under external/, named from their nearest common directory
// (its name, then their paths below it: no home directory or user name in
// the archive); a command argument naming one (a script outside the case
// directory) is rewritten to {case_dir}/external/..., so that its own
// siblings resolve too. A module the trial imported through PYTHONPATH is
// found the same way: the PYTHONPATH directories whose files travel are
// named from that common directory too, and the archived case sets
// PYTHONPATH to their copies ({case_dir}/external/...), so the archive does
// not need the reporter's shell. A file the
// code opens by an absolute path cannot be redirected: it is bundled all the
// same and REPORT.md says so.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/case_config.h"

namespace minrepro {

struct BundledFile {
  std::string archive_name;  // relative, inside the archive
  std::filesystem::path source;
};

struct BundlePlan {
  std::vector<BundledFile> files;
  // Command arguments to rewrite in the archive: absolute path -> "{case_dir}/external/...".
  std::map<std::string, std::string> argv_rewrites;
  // The trial's PYTHONPATH directories whose files the archive carries, as
  // archive-relative directories, in PYTHONPATH's order.
  std::vector<std::string> python_path;
  // For REPORT.md: files bundled from outside the case directory, and files
  // seen in the trace but left out, each with why.
  std::vector<std::string> from_outside;
  std::vector<std::string> left_out;
  // The trial read the file --output names (a config beside the script):
  // it is bundled like any other, and the archive goes elsewhere.
  bool output_read = false;
};

// The variable that names the trace file for libminrepro_filetrace.so.
inline constexpr const char* kFileTraceVariable = "MINREPRO_FILE_TRACE";
// Places (':'-separated absolute paths) where the tracer also lists what is
// only looked at (stat'ed, listed): the self-check's watch (self_check.h).
inline constexpr const char* kFileTraceWatchVariable = "MINREPRO_FILE_TRACE_WATCH";

// libminrepro_filetrace.so beside the running executable (else the build
// tree's); "" when neither exists.
std::string fileTraceLibrary();

// The absolute paths a trace file lists, each once, in first-seen order.
std::vector<std::filesystem::path> readTrace(const std::filesystem::path& trace_file);

// The directories on the trial's PYTHONPATH: trial.env's when the case sets
// it, else the one the trials inherit from this process; absolute ones only.
std::vector<std::filesystem::path> trialPythonPath(const CaseConfig& config);

// Which of the traced files, of those trial.files matches and of those the
// command names, the archive carries, and under which names. `python_path`:
// the trial's PYTHONPATH directories (trialPythonPath). Never throws for a
// file that vanished.
BundlePlan planBundle(const CaseConfig& config, const std::vector<std::filesystem::path>& traced,
                      const std::vector<std::filesystem::path>& python_path = {});

// The case as the archive holds it: command arguments rewritten by `plan`,
// and PYTHONPATH set to the bundled copies of its directories.
CaseConfig withBundledPaths(CaseConfig config, const BundlePlan& plan);

}  // namespace minrepro
