// Whole-binary tier: a NaN or inf loss is located to the first operator that
// made a non-finite value (#42.4-5), with real PyTorch processes. Three
// steps (tests/fixtures/non_finite_steps/), each raising on its loss as a
// training loop does: log of a zero variance (the -inf of log comes before
// the NaN an inf minus an inf makes), an overflow in float16 (not the
// uninitialised memory a Linear's construction holds), and a softmax over a
// row a mask filled with -inf (the -inf was asked for; the NaN is the bug).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::runCommand;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const fs::path kSteps = fs::path(MINREPRO_SOURCE_DIR) / "tests/fixtures/non_finite_steps";

class NonFinite : public ::testing::Test {
 protected:
  testing::TempDir work_{"minrepro-non-finite"};

  void SetUp() override {
    std::string out;
    ASSERT_EQ(
        runCommand(testing::python() + " " + (kSteps / "make_batches.py").string() + " " + work_.path().string(), &out),
        0)
        << out;
  }

  // Shrinks `name`'s step on its batch with the zero-config start; extracts
  // the archive into DIR/extracted. Returns the shrink's output.
  std::string shrink(const std::string& name) {
    std::string out;
    fs::copy_file(kSteps / (name + "_step.py"), work_.path() / "step.py", fs::copy_options::overwrite_existing);
    const int status = runCommand("cd " + work_.path().string() + " && " + MINREPRO_BINARY + " shrink --batch " + name +
                                      ".pt --output repro.tar.gz --force -- " + testing::python() + " step.py {batch}",
                                  &out);
    EXPECT_EQ(status, 0) << out;
    EXPECT_TRUE(testing::extractInto(work_.path() / "repro.tar.gz", extracted())) << out;
    return out;
  }
  fs::path extracted() const { return work_.path() / "extracted"; }
  std::string report() const { return readFile(extracted() / "REPORT.md"); }

  // op/repro_op.py run alone, in a directory holding only the archive's files.
  void expectOpReproFailsAlone(const std::string& op) {
    ASSERT_TRUE(fs::exists(extracted() / "op/repro_op.py")) << report();
    std::string out;
    EXPECT_EQ(runCommand("cd " + extracted().string() + "/op && " + testing::python() + " repro_op.py", &out), 1)
        << out;
    EXPECT_TRUE(has(out, "FloatingPointError: " + op)) << out;
  }
};

TEST_F(NonFinite, LogOfAZeroIsTheFirstOperatorNotTheSubtractionAfterIt) {
  const std::string out = shrink("gaussian_nll");
  EXPECT_TRUE(has(out, "reduced 24 -> 1 samples (ids [13])")) << out;
  const std::string r = report();
  EXPECT_TRUE(has(r, "First non-finite value: `aten::log.default`")) << r;
  // The output names no operator; the op step's is said beside it (a new
  // user read "(not named by the output)" above the call it had located).
  EXPECT_TRUE(has(r, "- Operator: not named by the output; the op step located `aten::log.default` (below)\n")) << r;
  EXPECT_TRUE(has(r, "the batch holds no NaN or inf")) << r;
  EXPECT_TRUE(has(r, "- `noise_var` = [0]\n")) << "the culprit's real value is shown with the minimal case: " << r;
  expectOpReproFailsAlone("log.default returned 0 NaN and 1 inf values from finite inputs");
  // verify judges op/repro_op.py as the self-check did: by its family (the
  // call names its NaN in its own words, not in the step's "loss is nan").
  std::string verified;
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " verify " + (work_.path() / "repro.tar.gz").string() +
                           " --runs 2 --python " + testing::python() + " 2>&1",
                       &verified),
            0)
      << verified;
  EXPECT_TRUE(has(verified, "op/repro_op.py reproduced: non-finite")) << verified;
}

TEST_F(NonFinite, AFloat16OverflowIsNotBlamedOnUninitialisedMemory) {
  const std::string out = shrink("half_overflow");
  EXPECT_TRUE(has(out, "reduced 20 -> 1 samples (ids [7])")) << out;
  const std::string r = report();
  EXPECT_FALSE(has(r, "aten::empty")) << r;
  EXPECT_TRUE(has(r, "First non-finite value: `aten::pow.Tensor_Scalar`")) << r;
  expectOpReproFailsAlone("pow.Tensor_Scalar returned 0 NaN and 1 inf values from finite inputs");
}

TEST_F(NonFinite, AMaskFilledWithMinusInfIsAskedForTheSoftmaxNaNIsNot) {
  const std::string out = shrink("masked_softmax");
  EXPECT_TRUE(has(out, "-> 1 samples (ids [5])")) << out;
  const std::string r = report();
  EXPECT_FALSE(has(r, "First non-finite value: `aten::masked_fill")) << r;
  EXPECT_TRUE(has(r, "First non-finite value: `aten::_softmax.default`")) << r;
  expectOpReproFailsAlone("_softmax.default returned");
}

}  // namespace
}  // namespace minrepro
