// Whole-binary tier: the failing operator call alone (engine/op_step/op_step.h).
// Real failures made with real PyTorch (tests/fixtures/op_cases/make_cases.py
// and the guide's class-4 example): an index error in a loss, an operator
// with no kernel for the dtype, a fatal signal from a real out-of-bounds read,
// a failure in backward, and one raised by the step's own check on a value
// computed upstream. Where the failure lives in one call, the archive's
// op/repro_op.py must fail alone in an empty directory with the case's
// signature; where it does not, the archive says why and has no op/.
#include <gtest/gtest.h>

#include "engine/op_step/op_case.h"
#include "engine/op_step/op_recorder.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

class OpRepro : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new TempDir("minrepro-op-cases");
    ASSERT_EQ(testing::makeCases("tests/fixtures/op_cases/make_cases.py", cases_->path() / "op"), "");
  }
  static void TearDownTestSuite() {
    delete cases_;
    cases_ = nullptr;
  }

  // shrink, then the archive extracted into an empty directory elsewhere.
  fs::path shrinkAndExtract(const fs::path& case_file) {
    archive_ = work_.path() / "repro.tar.gz";
    EXPECT_EQ(testing::shrinkCase(case_file, archive_, work_.path() / "work", &log_), 0) << log_;
    return extractElsewhere();
  }
  // The same for a bundled example, whose run the tests share (tests/e2e_fixture.h).
  fs::path shrinkExampleAndExtract(const std::string& name) {
    const testing::ShrunkExample run = testing::shrunkExample(name);
    EXPECT_EQ(run.status, 0) << run.output;
    archive_ = run.archive;
    log_ = run.output;
    return extractElsewhere();
  }
  fs::path extractElsewhere() {
    const fs::path dir = elsewhere_.path() / "repro";
    EXPECT_TRUE(testing::extractInto(archive_, dir));
    return dir;
  }
  // Plain `python3 op/repro_op.py` from another directory; its status as the shell reports it.
  int runOpAlone(const fs::path& dir, std::string* output) {
    return runCommand("cd / && ulimit -c 0 && " + python() + " " + (dir / "op" / "repro_op.py").string(), output);
  }
  int verify(std::string* output) {
    return runCommand(std::string(MINREPRO_BINARY) + " verify " + archive_.string() + " --runs 1", output);
  }
  static fs::path opCase(const std::string& name) { return cases_->path() / "op" / name / "case.yaml"; }

  static inline TempDir* cases_ = nullptr;
  std::string log_;
  fs::path archive_;
  TempDir work_{"minrepro-op-work"};
  TempDir elsewhere_{"minrepro-op-elsewhere"};
};

TEST_F(OpRepro, IndexErrorInALossBecomesFiveLinesWithLiteralTensors) {
  const fs::path dir = shrinkExampleAndExtract("class4");
  const std::string script = readFile(dir / "op" / "repro_op.py");
  EXPECT_NE(script.find("torch.ops.aten.nll_loss_forward.default(self, target, None, 1, -100)"), std::string::npos)
      << script;
  // The values pass left the logits trivial and the target that matters.
  EXPECT_NE(script.find("self = torch.full((1, 4), 0.0, dtype=torch.float32)"), std::string::npos) << script;
  EXPECT_NE(script.find("target = torch.tensor([4], dtype=torch.int64)"), std::string::npos) << script;
  EXPECT_EQ(script.find("torch.load"), std::string::npos) << "every tensor is written into the script\n" << script;
  std::string output;
  EXPECT_EQ(runOpAlone(dir, &output), 1) << output;
  EXPECT_NE(output.find("IndexError: Target 4 is out of bounds."), std::string::npos) << output;
  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_LT(report.find("## The failing operator alone (`op/repro_op.py`)"), report.find("## Failure")) << report;
  EXPECT_NE(report.find("`aten::nll_loss_forward.default`"), std::string::npos) << report;
  EXPECT_NE(readFile(dir / "signature.txt").find("op-repro: op/repro_op.py\n"), std::string::npos);
  EXPECT_NE(log_.find("op/repro_op.py calls aten::nll_loss_forward.default alone and failed alone like the case in 3 "
                      "of 3 runs"),
            std::string::npos)
      << log_;
  // The op step's runs alone are the self-check's runs of op/repro_op.py (it runs beside them).
  EXPECT_NE(log_.find("op/repro_op.py failed like the case in 3 of 3 runs"), std::string::npos) << log_;
  EXPECT_EQ(verify(&output), 0) << output;
  EXPECT_NE(output.find("op/repro_op.py failed alike in 1 of 1 runs"), std::string::npos) << output;
}

TEST_F(OpRepro, OperatorWithoutAKernelForTheDtypeIsCalledWithThatDtype) {
  const fs::path dir = shrinkAndExtract(opCase("bool_masks"));
  const std::string script = readFile(dir / "op" / "repro_op.py");
  EXPECT_NE(script.find("torch.ops.aten.bmm.default(self, mat2)"), std::string::npos) << script;
  EXPECT_NE(script.find("self = torch.full((1, 6, 6), True, dtype=torch.bool)"), std::string::npos) << script;
  // bmm(pair, pair): one tensor passed twice, and so in the reproducer.
  EXPECT_NE(script.find("mat2 = self\n"), std::string::npos) << script;
  std::string output;
  EXPECT_EQ(runOpAlone(dir, &output), 1) << output;
  EXPECT_NE(output.find("\"bmm\" not implemented for 'Bool'"), std::string::npos) << output;
  EXPECT_NE(readFile(dir / "REPORT.md").find("- `self bool [1, 6, 6] stride [36,6,1] offset 0 cpu, shared with mat2`"),
            std::string::npos)
      << readFile(dir / "REPORT.md");
}

TEST_F(OpRepro, FatalSignalFromAnOutOfBoundsReadIsTheCallTheProcessDiedIn) {
  const fs::path dir = shrinkAndExtract(opCase("ctc_labels"));
  EXPECT_NE(log_.find("reduced 12 -> 1 samples (ids [8049])"), std::string::npos) << log_;
  const std::string script = readFile(dir / "op" / "repro_op.py");
  // log_probs is a transposed view ([T, 1, C] with strides [C, T*C, 1]): loaded as it was.
  EXPECT_NE(script.find("torch.ops.aten._ctc_loss.Tensor(T['log_probs'], targets, input_lengths, target_lengths)"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("68719476736"), std::string::npos) << "the corrupted label is kept\n" << script;
  std::string output;
  EXPECT_EQ(runOpAlone(dir, &output), 128 + SIGSEGV) << output;
  EXPECT_EQ(verify(&output), 0) << output;
}

TEST_F(OpRepro, FailureInBackwardKeepsTheGradientsLayout) {
  const fs::path dir = shrinkAndExtract(opCase("backward_view"));
  const std::string script = readFile(dir / "op" / "repro_op.py");
  EXPECT_NE(script.find("torch.ops.aten.view.default(T['self'], ["), std::string::npos) << script;
  // The gradient of a sum is one value expanded (strides 0): loaded as it
  // was, with weights_only, not rewritten as a contiguous literal.
  EXPECT_NE(script.find("weights_only=True"), std::string::npos) << script;
  EXPECT_EQ(testing::pyEvalOnBatch(dir / "op" / "inputs.pt", "b['self'].stride()[-1], b['self'].shape[-1]"), "0 8\n");
  std::string output;
  EXPECT_EQ(runOpAlone(dir, &output), 1) << output;
  EXPECT_NE(output.find("RuntimeError: shape '["), std::string::npos) << output;
  EXPECT_NE(output.find(", 8]' is invalid for input of size "), std::string::npos) << output;
}

TEST_F(OpRepro, ErrorRaisedByTheProgramOnAValueComputedUpstreamIsNotIsolated) {
  const fs::path dir = shrinkAndExtract(opCase("nan_check"));
  EXPECT_FALSE(fs::exists(dir / "op")) << "no call fails alone";
  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_NE(report.find("- Operator call alone: not tried (the batch itself holds the NaN or inf"), std::string::npos)
      << report;
  EXPECT_EQ(readFile(dir / "signature.txt").find("op-repro"), std::string::npos);
  std::string output;
  EXPECT_EQ(verify(&output), 0) << output;
}

TEST_F(OpRepro, NoOpReproSwitchSkipsTheStepAndSaysSo) {
  const fs::path archive = work_.path() / "repro.tar.gz";
  std::string output;
  ASSERT_EQ(
      runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + opCase("bool_masks").string() +
                     " --output " + archive.string() + " --work-dir " + (work_.path() / "work").string(),
                 &output),
      0)
      << output;
  const fs::path dir = elsewhere_.path() / "repro";
  ASSERT_TRUE(testing::extractInto(archive, dir));
  EXPECT_FALSE(fs::exists(dir / "op"));
  EXPECT_NE(readFile(dir / "REPORT.md").find("- Operator call alone: not tried (--no-op-repro)"), std::string::npos);
  EXPECT_NE(readFile(dir / "REPORT.md").find("- Op step (the failing operator call alone): 0 runs"), std::string::npos);
}

// ----------------------------------------------------------------- units

OpTensor tensor(const std::string& name, std::vector<std::int64_t> shape) {
  OpTensor t;
  t.name = name;
  t.shape = std::move(shape);
  return t;
}

TEST(OpCaseAxes, ALossIsCutAlongTheBatchItsInputAndTargetShare) {
  const OpCaseAxes a = sharedSampleAxes({tensor("self", {8, 4}), tensor("target", {8})});
  EXPECT_TRUE(a.cut);
  EXPECT_EQ(a.axes, (std::map<std::string, int>{{"self", 0}, {"target", 0}}));
}

TEST(OpCaseAxes, CtcLogProbsAreCutAlongTheBatchTheTargetsAndLengthsLead) {
  const OpCaseAxes a = sharedSampleAxes({tensor("log_probs", {30, 3, 20}), tensor("targets", {3, 4}),
                                         tensor("input_lengths", {3}), tensor("target_lengths", {3})});
  EXPECT_TRUE(a.cut);
  EXPECT_EQ(a.axes, (std::map<std::string, int>{
                        {"log_probs", 1}, {"targets", 0}, {"input_lengths", 0}, {"target_lengths", 0}}));
}

TEST(OpCaseAxes, NothingSharedLeavesTheValuesPassOnALengthOneAxis) {
  const OpCaseAxes a = sharedSampleAxes({tensor("self", {1, 6, 6}), tensor("mat2", {1, 6, 6})});
  EXPECT_FALSE(a.cut);
  EXPECT_EQ(a.axes, (std::map<std::string, int>{{"self", 0}}));
  const OpCaseAxes b = sharedSampleAxes({tensor("self", {3, 8})});
  EXPECT_FALSE(b.cut);
  EXPECT_EQ(b.axes, (std::map<std::string, int>{{"self", 0}}));
  EXPECT_TRUE(sharedSampleAxes({tensor("a", {}), tensor("b", {})}).axes.empty());
}

TEST(OpCaseAxes, ALengthTheArgumentsNameOrASquareMatrixIsNotCut) {
  // narrow(self, 0, 0, 8): cutting the 8 rows would make narrow's own size error.
  const OpCaseAxes a = sharedSampleAxes({tensor("self", {8, 4}), tensor("index", {8})}, {"T['self']", "0", "0", "8"});
  EXPECT_FALSE(a.cut);
  // 8 elsewhere (a float, another number) does not count.
  EXPECT_TRUE(sharedSampleAxes({tensor("self", {8, 4}), tensor("index", {8})}, {"T['self']", "0.8", "18"}).cut);
  // A square [8, 8] matrix: which of its axes is the batch?
  EXPECT_FALSE(sharedSampleAxes({tensor("self", {8, 8}), tensor("target", {8})}).cut);
}

TEST(OpLiterals, SpelledOutTensorsAreTheRecordedOnesBitForBit) {
  // Signed zeros, NaN and infinities, bfloat16 and float16, int64 extremes,
  // bool, one-valued and empty tensors spelled out exactly; views, offsets,
  // broadcasts, odd strides of size-1 axes and complex values left to inputs.pt.
  std::string output;
  EXPECT_EQ(
      runCommand(python() + " " + MINREPRO_SOURCE_DIR + "/tests/fixtures/op_cases/check_literals.py " + opRecorderDir(),
                 &output),
      0)
      << output;
}

TEST(OpCall, ReadsTheRecordersCallFile) {
  TempDir dir("minrepro-op-call");
  testing::writeFile(dir.path() / "call.txt",
                     "op: aten::mm.default\ncall: torch.ops.aten.mm.default\nphase: backward\nindex: 12\npid: 7\n"
                     "error: RuntimeError: mat1 and mat2 shapes cannot be multiplied (3x2 and 3x3)\n"
                     "arg: T['self']\narg: T['mat2']\n"
                     "tensor: self float32 [3,2] stride [4,1] offset 1 cpu storage shared with mat2\n"
                     "tensor: mat2 float32 [3,3] stride [1,4] offset 0 cpu storage shared with self\n");
  const auto call = readOpCall(dir.path() / "call.txt");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->op, "aten::mm.default");
  EXPECT_EQ(call->phase, "backward");
  EXPECT_EQ(call->index, 12u);
  EXPECT_EQ(call->args, (std::vector<std::string>{"T['self']", "T['mat2']"}));
  ASSERT_EQ(call->tensors.size(), 2u);
  EXPECT_EQ(call->tensors[0].shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(call->tensors[0].describe(), "self float32 [3, 2] stride [4,1] offset 1 cpu, shared with mat2");
  EXPECT_FALSE(readOpCall(dir.path() / "missing.txt"));
}

}  // namespace
}  // namespace minrepro
