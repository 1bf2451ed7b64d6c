// Capture from a real LibTorch (C++) training loop (harness/capture.h):
// tests/capture/train_loop.cc fails, the capture writes the case, the real
// minrepro shrinks it; plus the session's rules in this process.
#include "harness/capture.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/api/include/torch/version.h>

#include <filesystem>
#include <string>

#include "harness/batch_io.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

class CppCapture : public ::testing::Test {
 protected:
  int train(const std::string& mode, std::string* output) {
    return runCommand(std::string(MINREPRO_TRAIN_LOOP_BINARY) + " " + case_dir_.string() + " " + mode, output);
  }
  // Evaluates a Python expression on the captured batch b.
  std::string pyBatch(const std::string& expr) { return testing::pyEvalOnBatch(case_dir_ / "batch.pt", expr); }
  std::string caseYaml() { return readFile(case_dir_ / "case.yaml"); }

  testing::TempDir work_{"minrepro-cpp-capture"};
  fs::path case_dir_ = work_.path() / "crash-case";
};

TEST_F(CppCapture, TrainingLoopFailureIsCapturedAndShrinksToTheMislabelledSample) {
  std::string output;
  ASSERT_EQ(train("plain", &output), 1) << output;  // the c10::IndexError is rethrown; main reports it
  EXPECT_TRUE(has(output, "error: Target 4 is out of bounds.")) << output;
  EXPECT_TRUE(has(output, "step 3 ok")) << output;
  EXPECT_FALSE(has(output, "step 4 ok")) << output;
  EXPECT_TRUE(has(output, "minrepro::CaptureSession: wrote " + (case_dir_ / "case.yaml").string())) << output;
  const std::string text = caseYaml();
  for (const char* line : {"  tensors: {\"input\": 0, \"target\": 0}",
                           "  ids: \"sample_id\"",
                           "    model: model.pt",
                           "    loss: cross_entropy",
                           "    ignore_index: -100",
                           "  family: index-error",
                           "  exception: \"c10::IndexError\"",
                           "  message: \"Target 4 is out of bounds.\"",
                           "  raised_at: \"nll_loss_out_frame at ",
                           "  step: \"4\"",
                           "  last_completed_step: \"3\"",
                           "  backend: \"cpu\"",
                           "  torch_build: \"cpu only\"",
                           "  batch_size: \"32\"",
                           "  last_batch: \"no\"",
                           "  sample_ids: \"given\"",
                           "  tensor_input: \"float32 [32, 8] on cpu\"",
                           "  tensor_target: \"int64 [32] on cpu\"",
                           "  branches: \"augment=off\"",
                           "  model: \"torch::jit::Module (training mode)\"",
                           "  revision: \""})
    EXPECT_TRUE(has(text, line)) << line << "\n" << text;
  // The loop's LibTorch: this test binary's, unless the loop is another build's.
  EXPECT_TRUE(testing::programsOfAnotherBuild() ? has(text, "  libtorch: \"")
                                                : has(text, std::string("  libtorch: \"") + TORCH_VERSION + "\""))
      << text;
  EXPECT_EQ(pyBatch("sorted(b), b['sample_id'][:3].tolist(), b['target'].tolist().count(4), b['input'].requires_grad"),
            "['input', 'sample_id', 'target'] [9128, 9129, 9130] 1 False\n");

  const std::string report =
      testing::expectCapturedCaseShrinksToTheMislabelledSample(case_dir_ / "case.yaml", work_.path());
  EXPECT_TRUE(has(report, "- capture: C++ (minrepro::CaptureSession)\n")) << report;
}

TEST_F(CppCapture, LastIncompleteBatchIsRecorded) {
  std::string output;
  ASSERT_EQ(train("last-batch", &output), 1) << output;
  EXPECT_TRUE(has(output, "step 6 ok")) << output;
  const std::string text = caseYaml();
  for (const char* line : {"  step: \"7\"", "  last_completed_step: \"6\"", "  batch_size: \"26\"",
                           "  last_batch: \"yes (incomplete)\"", "  tensor_input: \"float32 [26, 8] on cpu\""})
    EXPECT_TRUE(has(text, line)) << line << "\n" << text;
  EXPECT_EQ(pyBatch("b['sample_id'][-1].item(), b['target'][-5].item()"), "9249 4\n");
}

TEST_F(CppCapture, WithoutAModelTheUsersCommandIsTheTrial) {
  std::string output;
  ASSERT_EQ(train("command", &output), 1) << output;
  EXPECT_FALSE(fs::exists(case_dir_ / "model.pt"));
  const std::string text = caseYaml();
  EXPECT_TRUE(has(text, "  command: [\"/usr/bin/python3\", \"{case_dir}/step.py\", \"{batch}\"]")) << text;
  EXPECT_TRUE(has(text, "  model: \"none given; the user's command is the trial\"")) << text;
  EXPECT_FALSE(has(text, "harness:")) << text;
  EXPECT_FALSE(has(text, "family:")) << "a command may fail its own way: " << text;
}

TEST_F(CppCapture, NeitherModelNorCommandSaysSoAndWritesNoCase) {
  std::string output;
  ASSERT_EQ(train("nothing", &output), 1) << output;
  EXPECT_FALSE(fs::exists(case_dir_ / "case.yaml"));
  EXPECT_TRUE(fs::exists(case_dir_ / "batch.pt"));
  EXPECT_TRUE(has(readFile(case_dir_ / "case.yaml.draft"), "  step: \"4\""));
  const std::string error = readFile(case_dir_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error, "no model was given and no command was given, so case.yaml has no trial")) << error;
  EXPECT_TRUE(has(output, "error: Target 4 is out of bounds.")) << output;
}

TEST_F(CppCapture, DeviceSideAssertWritesTheCaseAndStopsTheProcess) {
  std::string output;
  EXPECT_EQ(train("device-assert", &output), kDeviceAssertExitCode) << output;
  EXPECT_TRUE(has(output, "training cannot continue in this process")) << output;
  EXPECT_TRUE(has(output, "step 1 ok")) << output;
  EXPECT_FALSE(has(output, "step 2 ok")) << output;
  const std::string text = caseYaml();
  EXPECT_TRUE(has(text, "  step: \"2\"")) << text;
  EXPECT_TRUE(has(text, "  message: \"CUDA error: device-side assert triggered\"")) << text;
  EXPECT_FALSE(has(text, "family:")) << "a c10::Error is no certain family: " << text;
}

// ------------------------------------------------------------ in this process

TEST(CaptureSessionRules, FirstFailureOnlyHalfTensorsAndBadIdsAreRecorded) {
  testing::TempDir dir;
  CaptureOptions options;
  options.out_dir = dir.path() / "case";
  options.command = {"/usr/bin/python3", "{case_dir}/step.py", "{batch}"};
  CaptureSession session(options);
  const CaptureBatch good{{{"input", at::zeros({4, 3})}, {"target", at::zeros({4}, at::kLong)}}, {}, false};
  EXPECT_EQ(session.run(0, good, [] { return 7; }), 7);
  EXPECT_EQ(session.lastCompletedStep(), 0);
  const CaptureBatch bad{
      {{"input", at::ones({4, 3}, at::kHalf).t().contiguous().t()}, {"target", at::zeros({4}, at::kLong)}},
      at::arange(3, at::kLong),
      std::nullopt};
  EXPECT_THROW(session.run(1, bad, [] { throw std::runtime_error("first"); }), std::runtime_error);
  ASSERT_TRUE(session.captured());
  EXPECT_THROW(session.run(2, good, [] { throw std::logic_error("second"); }), std::logic_error);
  const std::string text = readFile(options.out_dir / "case.yaml");
  for (const char* line :
       {"  exception: \"std::runtime_error\"", "  message: \"first\"", "  step: \"1\"", "  last_completed_step: \"0\"",
        "  last_batch: \"unknown\"", "  tensor_input: \"float16 [4, 3] on cpu\"",
        "  sample_ids: \"positions in the batch (sample ids had the wrong length)\""})
    EXPECT_TRUE(has(text, line)) << line << "\n" << text;
  EXPECT_TRUE(has(readFile(options.out_dir / "CAPTURE-ERROR.txt"), "sample_ids has 3 entries for a batch of 4"));
  const NamedTensors saved = readBatchFile(options.out_dir / "batch.pt");
  EXPECT_EQ(saved.find("input")->scalar_type(), at::kHalf);
  EXPECT_EQ(saved.find("input")->strides(), (std::vector<int64_t>{1, 4}));  // stride order kept
  CaptureOptions no_batch;
  no_batch.command = {"prog"};  // no "{batch}": the trial could not get the batch
  EXPECT_THROW(CaptureSession{no_batch}, std::invalid_argument);
  EXPECT_TRUE(isLastIncompleteBatch(250, 32, 7));
  EXPECT_FALSE(isLastIncompleteBatch(250, 32, 6));
  EXPECT_FALSE(isLastIncompleteBatch(256, 32, 7));
  EXPECT_FALSE(isLastIncompleteBatch(250, 32, 7, /*drop_last=*/true));
}

}  // namespace
}  // namespace minrepro
