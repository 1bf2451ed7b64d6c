// Scrubbing REPORT.md: units on text, then a real report made by minrepro
// shrink for a case under a home directory with a user-like name.
#include "engine/archive/scrub.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "engine/archive/tar_gz.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

ScrubContext context() {
  ScrubContext c;
  c.homes = {"/home/jdoe-ml"};
  c.users = {"jdoe-ml", "root"};
  c.hosts = {"gpu-node-17.lab.example.org", "gpu-node-17"};
  return c;
}

TEST(Scrub, HomeAndOtherAbsolutePathsKeepOnlyTheFileName) {
  EXPECT_EQ(scrubText("cannot read /home/jdoe-ml/data/run7/batch.pt: no such file", context()),
            "cannot read <home>/.../batch.pt: no such file");
  EXPECT_EQ(scrubText("script: /home/jdoe-ml/train.py", context()), "script: <home>/train.py");
  EXPECT_EQ(scrubText("cd /home/jdoe-ml", context()), "cd <home>");
  EXPECT_EQ(scrubText("File \"/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py\", line 3026",
                      context()),
            "File \"<path>/functional.py\", line 3026");
  EXPECT_EQ(scrubText("/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: kernel", context()), "<path>/Loss.cu:242: kernel");
  EXPECT_EQ(scrubText("PATH=/usr/bin:/home/jdoe-ml/bin", context()), "PATH=<path>/bin:<home>/bin");
  // A sibling of the home directory is not inside it.
  EXPECT_EQ(scrubText("/home/jdoe-ml2/x", context()), "<path>/x");
}

TEST(Scrub, LeavesUrlsRelativePathsAndFractionsAlone) {
  const std::string text = "see https://pytorch.org/docs/stable/notes/cuda.html; run python3 repro.py in "
                           "configs/examples, 1/2 of the batch, and/or <tmp>/batch.pt";
  EXPECT_EQ(scrubText(text, context()), text);
}

TEST(Scrub, UserAndHostNamesAsWords) {
  EXPECT_EQ(scrubText("owner: jdoe-ml on gpu-node-17.lab.example.org (gpu-node-17)", context()),
            "owner: <user> on <host> (<host>)");
  EXPECT_EQ(scrubText("jdoe-mlx and xjdoe-ml stay", context()), "jdoe-mlx and xjdoe-ml stay");
  // "root" is nobody in particular and a common word: left alone.
  EXPECT_EQ(scrubText("the root cause", context()), "the root cause");
}

TEST(Scrub, MachineContextNamesThisProcess) {
  const ScrubContext c = machineScrubContext();
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  EXPECT_NE(std::find(c.hosts.begin(), c.hosts.end(), std::string(host)), c.hosts.end());
  EXPECT_FALSE(c.users.empty());
  EXPECT_FALSE(c.homes.empty());
}

// The real thing: shrink a case that lives under a home directory named
// like a person, with context that names the user, the host and paths.
TEST(ScrubReport, ReportOfACaseUnderAUsersHomeNamesNoOne) {
  testing::TempDir dir("minrepro-scrub");
  const fs::path examples = dir.path() / "examples", home = dir.path() / "home" / "jdoe-ml";
  const fs::path case_dir = home / "projects" / "run7";
  fs::create_directories(case_dir);
  std::string out;
  ASSERT_EQ(testing::runCommand(testing::python() + " " + std::string(MINREPRO_SOURCE_DIR) +
                                    "/configs/examples/make_examples.py " + examples.string(), &out), 0) << out;
  // A small batch (8 samples and the bad one) keeps the shrink short.
  ASSERT_EQ(testing::runCommand(testing::python() + " -c \"import torch; b = torch.load('" +
                                    (examples / "class4" / "batch.pt").string() + "'); i = list(range(8)) + [313]; "
                                    "torch.save({k: v[i] for k, v in b.items()}, '" + (case_dir / "batch.pt").string() +
                                    "')\"", &out), 0) << out;
  fs::copy(examples / "class4" / "model.pt", case_dir / "model.pt");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  testing::writeFile(case_dir / "case.yaml",
                     testing::readFile(examples / "class4" / "case.yaml") + "context:\n  owner: jdoe-ml\n  host: " +
                         host + "\n  script: " + (case_dir / "train.py").string() +
                         "\n  data: /data/jdoe-ml/imagenet/train\n");
  const fs::path archive = case_dir / "repro.tar.gz";
  ASSERT_EQ(testing::runCommand("HOME=" + home.string() + " USER=jdoe-ml LOGNAME=jdoe-ml " + MINREPRO_BINARY +
                                    " shrink -q --config " + (case_dir / "case.yaml").string() + " 2>&1", &out), 0)
      << out;
  std::string report;
  for (const auto& e : readTarGz(archive))
    if (e.name == "REPORT.md") report = e.contents;
  ASSERT_FALSE(report.empty());
  EXPECT_EQ(report.find("jdoe"), std::string::npos) << report;
  EXPECT_EQ(report.find(dir.path().string()), std::string::npos) << report;
  EXPECT_FALSE(std::regex_search(report, std::regex("(^|[^A-Za-z0-9])" + std::string(host) + "($|[^A-Za-z0-9])")))
      << report;
  EXPECT_NE(report.find("- owner: <user>"), std::string::npos) << report;
  EXPECT_NE(report.find("- host: <host>"), std::string::npos) << report;
  EXPECT_NE(report.find("- script: <home>/.../train.py"), std::string::npos) << report;
  EXPECT_NE(report.find("- data: <path>/train"), std::string::npos) << report;
  EXPECT_NE(report.find("Target 4 is out of bounds."), std::string::npos) << report;
}

}  // namespace
}  // namespace minrepro
