// A trial's process is given what a plain shell gives it, apart from what
// docs/guide.md ("What a trial's process is given") lists as intended:
// tests/fixtures/trial_env/probe.py reports everything a program's
// behaviour may depend on besides its arguments, run once from a shell and
// once as a plain and a forked trial (slurm_test.cc: a Slurm trial), and
// differences.py names every difference that is not intended. The work
// directory is deep on purpose: its trials' TMPDIR must still leave room
// for the socket paths DataLoader workers make under it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/case_config.h"
#include "engine/executors/fork_server.h"
#include "engine/trial_executors.h"
#include "tests/trial_env_probe.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

class TrialEnvironment : public ::testing::Test {
 protected:
  testing::TempDir dir_{"minrepro-trial-env"};
  // 120 bytes of directories below the temporary one.
  fs::path deep_ = dir_.path() / std::string(40, 'w') / std::string(40, 'o') / std::string(40, 'r');
};

TEST_F(TrialEnvironment, APlainTrialIsGivenWhatAShellGives) {
  LocalExecutor local;
  EXPECT_EQ(testing::unintendedDifferences(dir_.path(), local.run(testing::probeTrial(deep_ / "plain")), "plain"), "");
}

TEST_F(TrialEnvironment, AForkedTrialIsGivenWhatAShellGives) {
  CaseConfig config;
  config.command =
      CommandTrial{{testing::python(), "-u", (testing::probeDir() / "probe.py").string(), "{batch}"}, {}, {}};
  config.work_dir = deep_ / "work";
  LocalExecutor local;
  auto forked = makeForkServerExecutor(config, MINREPRO_TRIAL_BINARY, local, 1);
  const TrialSpec spec = testing::probeTrial(deep_ / "forked");
  ASSERT_TRUE(forked->routes(spec));
  EXPECT_EQ(testing::unintendedDifferences(dir_.path(), forked->run(spec), "forked"), "");
  EXPECT_EQ(forked->counts().forked, 1u) << "the trial did not run in the fork server";
}

}  // namespace
}  // namespace minrepro
