// What travels between minrepro and a trial's Slurm job, through files in
// the trial's directory (a shared filesystem on a real cluster):
//
//   trial.spec     the TrialSpec, written by SlurmExecutor before sbatch
//   job.sh         the batch script: exec minrepro-slurm-job trial.spec
//   outcome.txt    the TrialOutcome (end, exit status, signal, duration),
//                  written by minrepro-slurm-job and renamed into place, so
//                  a reader sees all of it or nothing
//   stdout.txt, stderr.txt   the trial's output (as with LocalExecutor)
//
// minrepro-slurm-job runs the trial with LocalExecutor inside the job, so a
// trial on a node gets exactly what a local trial gets: its own process
// group, TMPDIR, core dumps off, RLIMIT_AS, and the per-trial timeout with
// SIGTERM then SIGKILL to the whole group (Slurm's --time is in minutes and
// checked about every 30 s: only a backstop). The wait status is recorded
// exactly (exit 124 and "killed by SIGTERM" stay distinct, which
// `timeout(1)` would not give).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/process/process.h"

namespace minrepro {

inline constexpr const char* kSlurmSpecFile = "trial.spec";
inline constexpr const char* kSlurmOutcomeFile = "outcome.txt";
inline constexpr const char* kSlurmScriptFile = "job.sh";

// Length-prefixed records ("key N\n" then N bytes and "\n"): any byte may
// appear in an argument or a variable.
void writeTrialSpecFile(const std::filesystem::path& file, const TrialSpec& spec);
TrialSpec readTrialSpecFile(const std::filesystem::path& file);  // throws std::runtime_error

// Written to file + ".partial" and renamed.
void writeTrialOutcomeFile(const std::filesystem::path& file, const TrialOutcome& outcome);
// nullopt while the file does not exist (or is incomplete); stdout/stderr
// are not in it (they are in the trial's own files).
std::optional<TrialOutcome> readTrialOutcomeFile(const std::filesystem::path& file);

// main() of minrepro-slurm-job: `minrepro-slurm-job SPEC_FILE`. Runs the
// trial, writes outcome.txt beside the spec and exits 0; SIGTERM (scancel,
// node shutdown) kills the trial's group and exits 143 without an outcome,
// so minrepro sees a cancelled job, never a result. Exit 2: unusable spec.
int slurmJobMain(int argc, char** argv);

}  // namespace minrepro
