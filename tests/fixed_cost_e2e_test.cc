// Whole-binary tier: the cost around the search (#34). A user's own step
// script importing torch, started without a case.yaml, run through a
// `python3` of its own that logs when each Python process it starts begins
// and ends: the runs after the search (the file trace, the self-check's
// runs of repro.py, the op step's runs) go side by side, never more at once
// than --jobs; the op recorder rides on the file trace's run; the
// self-check is the confirmation; REPORT.md and the log say where the time
// went. Real processes and real PyTorch throughout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A tabular classifier's step: 16 features, 4 classes, one target of 4.
constexpr const char* kStep = R"(import sys
import torch

batch = torch.load(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
loss = torch.nn.functional.cross_entropy(model(batch["input"]), batch["target"])
loss.backward()
)";

// Logs "<ns> +1" and "<ns> -1" around every Python it runs but fork servers
// (alive the whole run, they fork rather than start Pythons), and "trace"
// once the file trace's run starts: from there on, the runs after the search.
// Its settings are files beside it, not variables: the self-check's runs
// get only what any machine's environment has.
constexpr const char* kLoggingPython = R"(#!/usr/bin/env bash
here=$(dirname "$0")
REAL_PYTHON=$(cat "$here/real-python")
RUNS_LOG=$(cat "$here/runs-log")
for a in "$@"; do case "$a" in *py_fork_server.py) exec "$REAL_PYTHON" "$@";; esac; done
[ -n "${MINREPRO_FILE_TRACE:-}" ] && echo trace >> "$RUNS_LOG"
echo "$(date +%s%N) +1" >> "$RUNS_LOG"
"$REAL_PYTHON" "$@"
rc=$?
echo "$(date +%s%N) -1" >> "$RUNS_LOG"
exit $rc
)";

// The most Python processes alive at once after the file trace began.
int mostAtOnceAfterTrace(const std::string& log) {
  std::istringstream lines(log.substr(std::min(log.size(), log.find("trace"))));
  std::vector<std::pair<long long, int>> events;
  for (std::string line; std::getline(lines, line);) {
    long long at = 0;
    int step = 0;
    if (std::istringstream(line) >> at >> step) events.emplace_back(at, step);
  }
  std::sort(events.begin(), events.end());  // an end before a start at the same instant
  int now = 0, most = 0;
  for (const auto& [at, step] : events) most = std::max(most, now += step);
  return most;
}

class FixedCost : public ::testing::Test {
 protected:
  testing::TempDir dir_{"minrepro-fixed-cost"};
  fs::path user_ = dir_.path() / "project";

  void SetUp() override {
    fs::create_directories(user_ / "bin");
    testing::writeFile(user_ / "step.py", kStep);
    testing::writeFile(user_ / "bin" / "python3", kLoggingPython);
    testing::writeFile(user_ / "bin" / "real-python", testing::python());
    fs::permissions(user_ / "bin" / "python3", fs::perms::owner_all);
    std::string out;
    ASSERT_EQ(testing::runCommand(
                  testing::python() +
                      " -c \"import torch; g = torch.Generator().manual_seed(3); t = torch.randint(0, 4, (32,), "
                      "generator=g); t[5] = 4; torch.save({'input': torch.randn(32, 16, generator=g), 'target': "
                      "t, 'sample_id': torch.arange(500, 532)}, '" +
                      (user_ / "batch.pt").string() + "')\"",
                  &out),
              0)
        << out;
  }

  // shrink with --jobs `jobs`; the runs' log.
  std::string shrink(int jobs, std::string* output) {
    const fs::path runs = dir_.path() / ("runs-" + std::to_string(jobs) + ".log");
    const std::string work = "w" + std::to_string(jobs);
    testing::writeFile(user_ / "bin" / "runs-log", runs.string());
    EXPECT_EQ(
        testing::runCommand("cd " + user_.string() + " && " + MINREPRO_BINARY + " shrink --batch batch.pt --jobs " +
                                std::to_string(jobs) + " --work-dir " + work + " --output " + work + ".tar.gz -- " +
                                (user_ / "bin" / "python3").string() + " step.py '{batch}'",
                            output),
        0)
        << *output;
    return testing::readFile(runs);
  }
};

TEST_F(FixedCost, RunsAfterTheSearchGoSideBySideWithinJobs) {
  std::string out;
  const std::string runs = shrink(2, &out);
  ASSERT_THAT(out, HasSubstr("minrepro: reduced 32 -> 1 samples (ids [505])"));
  EXPECT_THAT(runs, HasSubstr("trace"));
  // Never more than --jobs at once. That two do run at once is not certain
  // from the fresh processes alone: the op step's runs but its first fork
  // from the warm Python, and that first one may end before a run of the
  // self-check starts. The log says the two phases shared the slots.
  EXPECT_LE(mostAtOnceAfterTrace(runs), 2) << runs;
  EXPECT_THAT(out, HasSubstr("checking the archive on its own: repro.py in plain processes, extracted into an "
                             "empty directory, beside the op step"));
  const std::string one = shrink(1, &out);
  ASSERT_THAT(out, HasSubstr("minrepro: reduced 32 -> 1 samples (ids [505])"));
  EXPECT_EQ(mostAtOnceAfterTrace(one), 1) << one;
}

TEST_F(FixedCost, TheRecorderRidesOnTheTraceAndTheSelfCheckConfirms) {
  std::string out;
  shrink(2, &out);
  const std::string log = testing::readFile(user_ / "w2" / "minrepro.log");
  // The features are no sequence: no lengths pass cutting the model's input size.
  EXPECT_THAT(out, HasSubstr("no sequence axis (no tensor is padded past a lengths tensor or a mask"));
  EXPECT_THAT(log, Not(HasSubstr("mat1 and mat2 shapes cannot be multiplied")));
  EXPECT_THAT(log, HasSubstr("the op recorder rode along"));
  EXPECT_THAT(log, HasSubstr("locating the failing operator call in the op recorder's record of the file trace's run"));
  // One plain run, started beside the forked ones, settles the comparison.
  EXPECT_THAT(log, HasSubstr("failed the same way in 3 of 3 forked runs and 1 of 1 plain processes"));
  EXPECT_THAT(log, HasSubstr("time: phases: original "));
  std::string report;
  ASSERT_EQ(testing::runCommand("tar xzf " + (user_ / "w2.tar.gz").string() + " -O REPORT.md", &report), 0);
  EXPECT_THAT(report, HasSubstr("Final case confirmed in a fresh process: yes (the self-check's plain runs"));
  EXPECT_THAT(report, HasSubstr("op/repro_op.py failed like the case in 3 of 3 runs"));
  EXPECT_THAT(report, HasSubstr("Trials' own time: "));
  for (const char* phase : {"original ", "search ", "file trace ", "self-check ", "op step "})
    EXPECT_THAT(report, HasSubstr(phase));
}

}  // namespace
}  // namespace minrepro
