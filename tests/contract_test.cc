// The class-index target contract (docs/method.md, "Target contracts") on real batch files, as a
// library call and through the minrepro check and minrepro-trial binaries.
#include "harness/contract.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/case_config.h"
#include "harness/batch_io.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

class ContractTest : public ::testing::Test {
 protected:
  // A batch with the given targets and ids 100, 101, ...
  fs::path batchWith(const at::Tensor& target, const std::string& name = "batch.pt") {
    NamedTensors batch;
    batch.names = {"target", "sample_id"};
    const std::int64_t n = target.dim() == 0 ? 1 : target.size(0);
    batch.tensors = {target, at::arange(n, at::kLong) + 100};
    const fs::path file = dir_.path() / name;
    writeBatchFile(batch, file);
    return file;
  }
  static at::Tensor longs(std::vector<std::int64_t> v) { return at::tensor(v, at::kLong); }
  static TargetContract contract(std::int64_t classes, std::string ids = "sample_id") {
    TargetContract c;
    c.target = "target";
    c.classes = classes;
    c.ids = std::move(ids);
    return c;
  }
  testing::TempDir dir_{"minrepro-contract"};
};

TEST_F(ContractTest, FourClassesRejectTargetFourAndNameItsSample) {
  const ContractResult r = checkClassTargets(batchWith(longs({0, 2, 4})), contract(4));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.offenders.size(), 1u);
  EXPECT_EQ(r.offenders[0].index, 2);
  EXPECT_EQ(r.offenders[0].id, 102);
  EXPECT_EQ(r.offenders[0].value, 4);
  EXPECT_EQ(r.usable, 2);
}

TEST_F(ContractTest, ValidTargetsAndIgnoredOnesPass) {
  EXPECT_TRUE(checkClassTargets(batchWith(longs({0, 2, 3})), contract(4)).ok());
  const ContractResult r = checkClassTargets(batchWith(longs({0, -100, 3})), contract(4));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.ignored, 1);
  EXPECT_EQ(r.usable, 2);
}

TEST_F(ContractTest, NegativeTargetsOtherThanIgnoreIndexAreOffenders) {
  const ContractResult r = checkClassTargets(batchWith(longs({-1, 1, -100})), contract(4));
  ASSERT_EQ(r.offenders.size(), 1u);
  EXPECT_EQ(r.offenders[0].value, -1);
  TargetContract c = contract(4);
  c.ignore_index = -1;  // honoured: now -1 is ignored and -100 is the offender
  const ContractResult other = checkClassTargets(batchWith(longs({-1, 1, -100})), c);
  ASSERT_EQ(other.offenders.size(), 1u);
  EXPECT_EQ(other.offenders[0].value, -100);
}

TEST_F(ContractTest, AllIgnoredOrEmptyHasNoUsableTarget) {
  const ContractResult r = checkClassTargets(batchWith(longs({-100, -100})), contract(4));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("no usable target"), std::string::npos) << r.violations[0];
  EXPECT_FALSE(checkClassTargets(batchWith(at::empty({0}, at::kLong)), contract(4, "")).ok());
}

TEST_F(ContractTest, FloatAndTwoDimensionalTargetsAreRejected) {
  const ContractResult f = checkClassTargets(batchWith(at::tensor({0.0, 2.0, 3.0})), contract(4));
  EXPECT_FALSE(f.ok());
  EXPECT_NE(f.violations[0].find("expected int64"), std::string::npos) << f.violations[0];
  const ContractResult probs = checkClassTargets(batchWith(at::full({3, 4}, 0.25)), contract(4));
  EXPECT_FALSE(probs.ok());
  EXPECT_NE(probs.violations[0].find("class probabilities"), std::string::npos) << probs.violations[0];
  const ContractResult scalar = checkClassTargets(batchWith(at::scalar_tensor(1, at::kLong)), contract(4, ""));
  EXPECT_FALSE(scalar.ok());
  EXPECT_NE(scalar.violations[0].find("is a scalar"), std::string::npos) << scalar.violations[0];
  // int32 is the wrong dtype, but its values are still checked.
  const ContractResult i32 = checkClassTargets(batchWith(at::tensor({0, 5}, at::kInt)), contract(4));
  EXPECT_EQ(i32.violations.size(), 2u);
  EXPECT_EQ(i32.offenders.size(), 1u);
}

// Token tags: one class per position, padded with ignore_index past each
// sentence; the offender is named by its sample and its position.
TEST_F(ContractTest, PerPositionTargetsAreCheckedPositionByPosition) {
  const at::Tensor tags = longs({0, 4, 1, -100, 2, 3, -100, -100, 1, 1, 1, 5}).reshape({3, 4});
  const ContractResult r = checkClassTargets(batchWith(tags), contract(5));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.samples, 3);
  EXPECT_EQ(r.targets, 12);
  EXPECT_EQ(r.ignored, 3);
  EXPECT_EQ(r.usable, 8);
  ASSERT_EQ(r.offenders.size(), 1u);
  EXPECT_EQ(r.offenders[0].id, 102);
  EXPECT_EQ(r.offenders[0].position, 3);
  EXPECT_EQ(r.offenders[0].value, 5);
  const std::string text = renderContractResult(r, contract(5), "tags.pt");
  EXPECT_NE(text.find("  sample 102 (index 2, position 3): 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("checked 12 targets of 3 samples: 8 usable, 3 ignored, 1 out of range"), std::string::npos)
      << text;
  EXPECT_TRUE(checkClassTargets(batchWith(tags.clamp_max(4)), contract(5)).ok());
}

TEST_F(ContractTest, BadInputNamesTheBatchFile) {
  const fs::path file = batchWith(longs({0}));
  TargetContract c = contract(4);
  c.target = "labels";
  try {
    checkClassTargets(file, c);
    FAIL() << "missing tensor accepted";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ": no tensor named 'labels'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(checkClassTargets(file, contract(0)), BadInputError);
  EXPECT_THROW(checkClassTargets(file, contract(4, "nope")), BadInputError);
  EXPECT_THROW(checkClassTargets(dir_.path() / "missing.pt", contract(4)), BadInputError);
}

// ------------------------------------------------------------ the binaries

TEST_F(ContractTest, CheckCommandPrintsOffendingIdsAndExitStatus) {
  const std::string bin = MINREPRO_BINARY;
  std::string out;
  const fs::path bad = batchWith(longs({0, 2, 4}), "bad.pt");
  EXPECT_EQ(testing::runCommand(
                bin + " check --batch " + bad.string() + " --target target --classes 4 --ids sample_id 2>&1", &out),
            1)
      << out;
  EXPECT_NE(out.find("violates the class-index target contract (4 classes, valid [0, 4), ignore_index -100)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  sample 102 (index 2): 4\n"), std::string::npos) << out;
  const fs::path good = batchWith(longs({0, 2, 3}), "good.pt");
  EXPECT_EQ(testing::runCommand(bin + " check --batch " + good.string() + " --target target --classes 4 2>&1", &out), 0)
      << out;
  EXPECT_NE(out.find("satisfies"), std::string::npos) << out;
  EXPECT_EQ(testing::runCommand(bin + " check --batch " + good.string() + " --target nope --classes 4 2>&1", &out), 2);
  EXPECT_NE(out.find("no tensor named 'nope'"), std::string::npos) << out;
  EXPECT_EQ(testing::runCommand(bin + " check --batch " + good.string() + " --classes 4 2>&1", &out), 2) << out;
}

TEST_F(ContractTest, TrialHarnessChecksTargetsBeforeTheTrial) {
  const std::string trial = MINREPRO_TRIAL_BINARY;
  // No model is needed: the check runs before the model is loaded.
  const fs::path bad = batchWith(longs({0, 2, 4}), "bad.pt");
  std::string out;
  EXPECT_EQ(testing::runCommand(trial + " --model none.pt --batch " + bad.string() +
                                    " --target target --loss cross_entropy --check-targets 4 --ids sample_id 2>&1",
                                &out),
            1)
      << out;
  EXPECT_NE(out.find("minrepro-trial: error: target contract violated"), std::string::npos) << out;
  EXPECT_NE(out.find("sample 102 (index 2): 4"), std::string::npos) << out;
}

}  // namespace
}  // namespace minrepro
