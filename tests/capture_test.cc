// Capture from a real Python training loop (harness/python/minrepro_capture):
// the loop fails, capture writes the case, the real minrepro shrinks it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;

const std::string kSource = MINREPRO_SOURCE_DIR;

class Capture : public ::testing::Test {
 protected:
  // Runs tests/capture/train_loop.py in MODE, capturing into case_dir_. PYTHONPATH,
  // not the installed minrepro.pth, finds the module.
  int train(const std::string& mode, std::string* output) {
    return runCommand("cd " + work_.path().string() + " && PYTHONPATH=" + kSource + "/harness/python " + python() +
                          " " + kSource + "/tests/capture/train_loop.py " + case_dir_.string() + " " + mode,
                      output);
  }
  // Evaluates a Python expression on the captured batch b.
  std::string pyBatch(const std::string& expr) { return testing::pyEvalOnBatch(case_dir_ / "batch.pt", expr); }
  static bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

  testing::TempDir work_{"minrepro-capture"};
  fs::path case_dir_ = work_.path() / "crash-case";
};

TEST_F(Capture, TrainingLoopFailureIsCapturedAndShrinksToTheMislabelledSample) {
  std::string output;
  ASSERT_EQ(train("plain", &output), 1) << output;  // the IndexError is re-raised
  EXPECT_TRUE(has(output, "IndexError: Target 4 is out of bounds.")) << output;
  EXPECT_TRUE(has(output, "step 3 ok")) << output;
  EXPECT_FALSE(has(output, "step 4 ok")) << output;
  EXPECT_TRUE(has(output, "minrepro_capture: wrote " + (case_dir_ / "case.yaml").string())) << output;
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  for (const char* line :
       {"# No samples section: minrepro infers the samples", "    loss: cross_entropy", "    ignore_index: -100",
        "  family: index-error", "  step: \"4\"", "  last_completed_step: \"3\"", "  exception: \"IndexError\"",
        "  message: \"Target 4 is out of bounds.\"", "  backend: \"cpu\"", "  batch_size: \"32\"",
        "  last_batch: \"no\"", "  tensor_input: \"float32 [32, 8] on cpu\"", "  branches: \"augment=off\"",
        "  trial: \"torch.jit.script (training mode)\""})
    EXPECT_TRUE(has(case_yaml, line)) << line << "\n" << case_yaml;
  EXPECT_TRUE(has(case_yaml, "  revision: \"")) << case_yaml;
  EXPECT_TRUE(has(case_yaml, "  pytorch: \"" + testing::torchVersion() + "\"")) << case_yaml;
  EXPECT_EQ(pyBatch("sorted(b), b['sample_id'][:3].tolist(), b['target'].tolist().count(4), b['input'].requires_grad"),
            "['input', 'sample_id', 'target'] [9128, 9129, 9130] 1 False\n");

  testing::expectCapturedCaseShrinksToTheMislabelledSample(case_dir_ / "case.yaml", work_.path());
}

// The batch_size capture records: a list of per-sample dicts is as long as
// it is (a new user's 8 graphs were recorded as "2", their edge_index's
// first dimension); in a packed graph batch, the labels and the graph
// names outvote nothing against the nodes alone (it said "104"); an
// (images, per-image targets) detection batch is its 12 images, not the
// most common number of boxes in a target (it said "1").
TEST_F(Capture, TheRecordedBatchSizeCountsSamplesNotNodes) {
  std::string out;
  ASSERT_EQ(runCommand("PYTHONPATH=" + kSource + "/harness/python " + python() + " -c \"" +
                           "import torch\n"
                           "from minrepro_capture import _batch\n"
                           "n = lambda b: _batch.SavedBatch(b, None, []).batch_size()\n"
                           "graphs = [{'x': torch.zeros(5 + i, 16), 'edge_index': torch.zeros(2, 7, dtype=torch.long), "
                           "'y': torch.tensor([1])} for i in range(8)]\n"
                           "packed = {'x': torch.zeros(104, 16), 'edge_index': torch.zeros(2, 300, dtype=torch.long), "
                           "'batch': torch.zeros(104, dtype=torch.long), 'ptr': torch.zeros(9), 'y': torch.zeros(8), "
                           "'gid': ['g%d' % i for i in range(8)]}\n"
                           "detection = (torch.zeros(12, 3, 8, 8), [{'boxes': torch.zeros(1 + i % 2, 4), "
                           "'labels': torch.zeros(1 + i % 2, dtype=torch.long), 'image_id': torch.tensor(i)} "
                           "for i in range(12)])\n"
                           "print(n(graphs), n(packed), n((torch.zeros(32, 3), torch.zeros(32))), n(detection))\n\" "
                           "2>&1",
                       &out),
            0)
      << out;
  EXPECT_EQ(out, "8 8 32 12\n");
}

TEST_F(Capture, DecoratorFormTakesBatchAndStepFromTheCall) {
  std::string output;
  ASSERT_EQ(train("decorator", &output), 1) << output;
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  EXPECT_TRUE(has(case_yaml, "  step: \"4\"")) << case_yaml;
  EXPECT_TRUE(has(case_yaml, "  last_completed_step: \"3\"")) << case_yaml;
  EXPECT_EQ(pyBatch("b['sample_id'].tolist()[9], b['target'].tolist()[9]"), "9137 4\n");
}

// A relative directory is where the loop runs, not where the step had
// moved when it failed (probe 37: a step's os.chdir("/") put the case in
// /crash-chdir).
TEST_F(Capture, ARelativeDirectoryIsWhereTheLoopRunsWhereverTheStepMoved) {
  std::string output;
  ASSERT_EQ(runCommand("cd " + work_.path().string() + " && PYTHONPATH=" + kSource + "/harness/python " + python() +
                           " " + kSource + "/tests/capture/train_loop.py crash-rel chdir",
                       &output),
            1)
      << output;
  EXPECT_TRUE(fs::exists(work_.path() / "crash-rel" / "case.yaml")) << output;
  EXPECT_FALSE(fs::exists(work_.path() / "elsewhere" / "crash-rel")) << output;
}

// A capture directory that holds the user's own files (a case.yaml, a
// batch, a link planted under a capture's file name) is not written into:
// the capture goes to crash-case-2 and says so, nothing is replaced and no
// link is followed. Its own directory, a later capture replaces.
TEST_F(Capture, ADirectoryOfTheUsersIsNeitherReplacedNorWrittenThrough) {
  fs::create_directories(case_dir_);
  testing::writeFile(case_dir_ / "case.yaml", "# mine\n");
  testing::writeFile(case_dir_ / "batch.pt", "MY BATCH");
  testing::writeFile(work_.path() / "victim.txt", "victim\n");
  fs::create_symlink(work_.path() / "victim.txt", case_dir_ / "step.json");
  std::string output;
  ASSERT_EQ(train("decorator", &output), 1) << output;
  const fs::path second = work_.path() / "crash-case-2";
  EXPECT_TRUE(has(output, "holds files that are not a capture's; writing " + second.string() + " instead")) << output;
  EXPECT_EQ(readFile(case_dir_ / "case.yaml"), "# mine\n");
  EXPECT_EQ(readFile(case_dir_ / "batch.pt"), "MY BATCH");
  EXPECT_EQ(readFile(work_.path() / "victim.txt"), "victim\n");
  EXPECT_TRUE(has(readFile(second / "case.yaml"), "  step: \"4\"")) << readFile(second / "case.yaml");
  // Its own directory (marked), with links planted in it, symbolic and
  // hard: replaced, not followed.
  fs::create_symlink(work_.path() / "victim.txt", second / "case.yaml.draft");
  fs::remove(second / "step.json");
  fs::create_symlink(work_.path() / "victim.txt", second / "step.json");
  fs::remove(second / "captured_step.py");
  fs::create_hard_link(work_.path() / "victim.txt", second / "captured_step.py");
  ASSERT_EQ(train("decorator", &output), 1) << output;
  EXPECT_FALSE(has(output, "crash-case-3")) << output;
  EXPECT_EQ(readFile(work_.path() / "victim.txt"), "victim\n");
  EXPECT_FALSE(fs::is_symlink(second / "step.json"));
}

TEST_F(Capture, DeviceSideAssertWritesTheCaseAndStopsTheProcess) {
  std::string output;
  EXPECT_EQ(train("device-assert", &output), 87) << output;
  EXPECT_TRUE(has(output, "training cannot continue in this process")) << output;
  EXPECT_TRUE(has(output, "step 1 ok")) << output;
  EXPECT_FALSE(has(output, "step 2 ok")) << output;
  EXPECT_FALSE(has(output, "training finished")) << output;
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  EXPECT_TRUE(has(case_yaml, "  step: \"2\"")) << case_yaml;
  EXPECT_TRUE(has(case_yaml, "  message: \"CUDA error: device-side assert triggered\"")) << case_yaml;
  EXPECT_FALSE(has(case_yaml, "family:")) << "a RuntimeError is no certain family: " << case_yaml;
  EXPECT_EQ(pyBatch("b['sample_id'][0].item()"), "9064\n");
}

TEST_F(Capture, ModelThatCannotBeExportedWithoutCommandSaysSoAndWritesNoCase) {
  std::string output;
  ASSERT_EQ(train("unscriptable", &output), 1) << output;
  EXPECT_FALSE(fs::exists(case_dir_ / "case.yaml"));
  EXPECT_FALSE(fs::exists(case_dir_ / "model.pt"));
  EXPECT_FALSE(fs::exists(case_dir_ / "model.pt.partial"));  // a save that failed half-way leaves nothing
  EXPECT_TRUE(fs::exists(case_dir_ / "batch.pt"));
  EXPECT_TRUE(fs::exists(case_dir_ / "case.yaml.draft"));
  const std::string error = readFile(case_dir_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error, "could not be scripted")) << error;
  EXPECT_TRUE(has(error, "no command=[...] was given")) << error;
  EXPECT_TRUE(has(output, "IndexError: Target 4 is out of bounds.")) << output;
}

TEST_F(Capture, ModelThatCannotBeExportedFallsBackToTheUsersCommand) {
  std::string output;
  ASSERT_EQ(train("unscriptable-command", &output), 1) << output;
  EXPECT_FALSE(fs::exists(case_dir_ / "model.pt"));
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  EXPECT_TRUE(has(case_yaml, "  command: [\"/usr/bin/python3\", \"{case_dir}/step.py\", \"{batch}\"]")) << case_yaml;
  EXPECT_FALSE(has(case_yaml, "harness:")) << case_yaml;
  // The test run cannot open the command's step.py: the failure section
  // holds shrink to the step's IndexError (exit 3 until the script is
  // there), and CAPTURE-ERROR.txt says what is missing.
  EXPECT_TRUE(has(case_yaml, "failure:\n  family: index-error")) << case_yaml;
  EXPECT_TRUE(has(case_yaml, "  trial: \"the user's command (command= given; the model is not used)\"")) << case_yaml;
  const std::string error = readFile(case_dir_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error, "The trial's command names a script that is not there")) << error;
}

// Left to choose, capture tries the step itself first: this block's step is a
// closure inside main(), which no import can find, so the model slice is the
// trial and CAPTURE-ERROR.txt says why.
TEST_F(Capture, AStepThatCannotBeSavedFallsBackToTheModelSliceAndSaysWhy) {
  std::string output;
  ASSERT_EQ(train("closure", &output), 1) << output;
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  EXPECT_TRUE(has(case_yaml, "    model: model.pt")) << case_yaml;
  EXPECT_FALSE(fs::exists(case_dir_ / "step_state.pt"));
  const std::string error = readFile(case_dir_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error, "the step itself could not be made the trial: ")) << error;
  EXPECT_TRUE(has(error, "train_step (")) << error;
  EXPECT_TRUE(has(error, "the model slice is the trial instead")) << error;
}

// A model TorchScript cannot compile (a ModuleDict indexed by a Python list
// of names). torch 2.x: exported with torch.export, run by the capture's own
// step script as the trial; 1.13 (no torch.export): traced. Either way the
// case shrinks to the mislabelled sample and the archive carries what the
// trial reads.
TEST_F(Capture, ModelThatCannotBeScriptedIsExportedWithTorch2ElseTraced) {
  std::string output;
  ASSERT_EQ(train("blocks", &output), 1) << output;
  const std::string case_yaml = readFile(case_dir_ / "case.yaml");
  EXPECT_TRUE(has(case_yaml, "  family: index-error")) << case_yaml;
  const bool torch2 = testing::torchVersion().rfind("1.", 0) != 0;
  if (torch2) {
    EXPECT_TRUE(fs::exists(case_dir_ / "model.pt2"));
    EXPECT_FALSE(fs::exists(case_dir_ / "model.pt"));
    EXPECT_TRUE(has(case_yaml,
                    "  command: [\"" + testing::python() + "\", \"-u\", \"{case_dir}/exported_step.py\", \"{batch}\"]"))
        << case_yaml;
    EXPECT_TRUE(has(case_yaml, "  trial: \"torch.export (script failed: RuntimeError: ")) << case_yaml;
  } else {
    EXPECT_TRUE(fs::exists(case_dir_ / "model.pt"));
    EXPECT_TRUE(has(case_yaml, "    model: model.pt")) << case_yaml;
    EXPECT_TRUE(has(case_yaml, "  trial: \"torch.jit.trace (script failed: RuntimeError: ")) << case_yaml;
  }
  const fs::path archive = work_.path() / "repro.tar.gz";
  ASSERT_EQ(testing::shrinkCase(case_dir_ / "case.yaml", archive, work_.path() / "work", &output), 0) << output;
  EXPECT_TRUE(has(output, "reduced 32 -> 1 samples (ids [9137])")) << output;
  const fs::path dir = work_.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(archive, dir));
  EXPECT_EQ(fs::exists(dir / "model.pt2"), torch2);
  EXPECT_EQ(fs::exists(dir / "exported_step.py"), torch2);
  std::string repro;
  EXPECT_EQ(runCommand("cd / && " + testing::python() + " " + (dir / "repro.py").string(), &repro), 1) << repro;
  EXPECT_TRUE(has(repro, "IndexError: Target 4 is out of bounds.")) << repro;
}

}  // namespace
}  // namespace minrepro
