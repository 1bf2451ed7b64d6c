// A batch far larger than the examples: minrepro holds the original once
// and cuts each candidate from it in slabs, never copying the batch per
// candidate. Checked on the kernel's record of minrepro's peak memory
// (VmHWM, which minrepro logs at the end), which does not depend on how
// fast the machine is.
#include <gtest/gtest.h>

#include <regex>

#include "tests/e2e_fixture.h"

namespace minrepro::testing {
namespace {

// 780 000 samples of 64 float32 features (200 MB of inputs, 212 MB in all)
// with one target 4 (bench/make_scale_case.py): the one sample is found and
// minrepro's own peak stays within 1.5 times the batch plus 300 MB, where a
// copy per candidate would pass 2 times the batch on the first one.
TEST(Scale, A200MegabyteBatchIsReducedWithinOneAndAHalfTimesItsSize) {
  TempDir dir("minrepro-scale");
  std::string output;
  ASSERT_EQ(runCommand(python() + " " + std::string(MINREPRO_SOURCE_DIR) + "/bench/make_scale_case.py 780000 " +
                           dir.path().string(),
                       &output),
            0)
      << output;
  const double batch_mb = static_cast<double>(fs::file_size(dir.path() / "batch.pt")) / 1e6;
  ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " +
                           (dir.path() / "harness.yaml").string() + " --work-dir " + (dir.path() / "work").string() +
                           " --no-self-check",
                       &output),
            0)
      << output;
  EXPECT_NE(output.find("reduced 780000 -> 1 samples (ids [557142])"), std::string::npos) << output;
  std::smatch peak;
  ASSERT_TRUE(std::regex_search(output, peak, std::regex("minrepro's own peak ([0-9.]+) MB"))) << output;
  EXPECT_LE(std::stod(peak[1]), 1.5 * batch_mb + 300) << output;
  // Candidates were cut in the fork server, not written per trial.
  EXPECT_NE(readFile(dir.path() / "work" / "minrepro.log").find("samples cut in the fork server"), std::string::npos);
}

}  // namespace
}  // namespace minrepro::testing
