// The trial-environment probe (tests/fixtures/trial_env): what a plain shell
// gives a process, against what a trial's process is given. Shared by the
// local and forked parity tests (trial_environment_test.cc) and the Slurm
// one (slurm_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/process/process.h"
#include "tests/test_util.h"

namespace minrepro::testing {

inline std::filesystem::path probeDir() {
  return std::filesystem::path(MINREPRO_SOURCE_DIR) / "tests/fixtures/trial_env";
}

// The spec that runs the probe, as shrink runs a Python script, in `work_dir`.
inline TrialSpec probeTrial(const std::filesystem::path& work_dir) {
  TrialSpec spec;
  spec.argv = {python(), "-u", (probeDir() / "probe.py").string(), "batch.pt"};
  spec.work_dir = work_dir;
  std::filesystem::create_directories(work_dir);
  spec.env_set = {{"MINREPRO_SEED", "0"}, {"PYTHONHASHSEED", "0"}, {"MINREPRO_TRIAL", "1"}};
  spec.timeout = std::chrono::seconds(120);
  return spec;
}

// The differences between the probe run from a shell (in `dir`) and the
// trial's `outcome` that docs/guide.md does not list as intended, one per
// line: "" when the trial's process is the shell's.
inline std::string unintendedDifferences(const std::filesystem::path& dir, const TrialOutcome& outcome,
                                         const std::string& kind) {
  EXPECT_EQ(outcome.end, TrialEnd::Exited) << describe(outcome) << outcome.stderr_text;
  std::string out;
  EXPECT_EQ(runCommand("cd " + dir.string() + " && " + python() + " " + (probeDir() / "probe.py").string() +
                           " < /dev/null > shell.json",
                       &out),
            0)
      << out;
  writeFile(dir / (kind + ".json"), outcome.stdout_text);
  EXPECT_EQ(runCommand(python() + " " + (probeDir() / "differences.py").string() + " " + (dir / "shell.json").string() +
                           " " + (dir / (kind + ".json")).string() + " " + kind,
                       &out),
            0)
      << out;
  return out;
}

}  // namespace minrepro::testing
