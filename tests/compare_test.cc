// minrepro compare: which variants apply to which case (planVariants), what
// each run gets (a fake executor records the specs), and the real binary on
// real cases: the class4 example's archive, and a float16 case that fails
// only in half precision on the CPU (LibTorch 1.13 has no Half addmm there).
#include "commands/compare.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>

#include "core/process/sandbox.h"
#include "harness/batch_io.h"
#include "harness/precision.h"
#include "tests/e2e_fixture.h"
#include "tests/fake_trials.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::runCommand;

const Variant& find(const std::vector<Variant>& variants, const std::string& name) {
  for (const auto& v : variants)
    if (v.name == name) return v;
  throw std::runtime_error("no variant " + name);
}

CaseConfig commandCase(const std::string& backend) {
  CaseConfig c;
  c.command = CommandTrial{{"/bin/false", "{batch}"}, {}, {}};
  if (!backend.empty()) c.context["backend"] = backend;
  return c;
}

std::vector<TensorInfo> tensors(const std::string& input_dtype) {
  std::vector<TensorInfo> out(2);
  out[0].name = "input";
  out[0].dtype = input_dtype;
  out[1].name = "target";
  out[1].dtype = "int64";
  return out;
}

CommandSwitch commandSwitch(const std::string& name, std::vector<std::string> args) {
  CommandSwitch s;
  s.name = name;
  s.args = std::move(args);
  return s;
}

// ------------------------------------------------------------ planning

TEST(CompareVariants, HarnessCaseRunsOnTheCpuAlreadySoOnlyDeterminismApplies) {
  CaseConfig c;
  c.harness = HarnessTrial{};
  c.context["backend"] = "cuda 12.1";
  const auto v = planVariants(c, tensors("float32"));
  EXPECT_EQ(v.front().name, "as-is");
  EXPECT_NE(find(v, "cpu").not_applicable.find("built-in harness runs on the CPU already"), std::string::npos);
  EXPECT_NE(find(v, "cpu").not_applicable.find("CUDA 12.1"), std::string::npos);
  EXPECT_EQ(find(v, "float32").not_applicable, "no float16 or bfloat16 tensor in the batch");
  EXPECT_TRUE(find(v, "deterministic").applies());
  EXPECT_EQ(find(v, "deterministic").env_set.at("MINREPRO_DETERMINISTIC"), "1");
  EXPECT_FALSE(find(v, "branch-off").applies());
}

TEST(CompareVariants, CpuVariantFollowsTheRecordedOrDetectedBackend) {
  testing::TempDir dev;
  EXPECT_TRUE(find(planVariants(commandCase("cuda 12.1"), tensors("float32"), dev.path()), "cpu").applies());
  EXPECT_NE(find(planVariants(commandCase("rocm 5.6"), tensors("float32"), dev.path()), "cpu").change.find("ROCm 5.6"),
            std::string::npos);
  EXPECT_NE(find(planVariants(commandCase("cpu"), tensors("float32"), dev.path()), "cpu")
                .not_applicable.find("ran on the CPU"),
            std::string::npos);
  // Nothing recorded: this machine decides (a fake /dev).
  EXPECT_FALSE(find(planVariants(commandCase(""), tensors("float32"), dev.path()), "cpu").applies());
  testing::writeFile(dev.path() / "nvidiactl", "");
  const Variant cpu = find(planVariants(commandCase(""), tensors("float32"), dev.path()), "cpu");
  ASSERT_TRUE(cpu.applies());
  EXPECT_EQ(cpu.env_set.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(cpu.env_set.at("HIP_VISIBLE_DEVICES"), "");
}

TEST(CompareVariants, HalfPrecisionDeterminismAndBranches) {
  CaseConfig c = commandCase("cpu");
  c.deterministic = true;
  c.command->switches = {commandSwitch("amp", {"--amp"}), commandSwitch("ext", {"--ext"})};
  const auto v = planVariants(c, tensors("bfloat16"));
  ASSERT_TRUE(find(v, "float32").applies());
  EXPECT_TRUE(find(v, "float32").float32_batch);
  EXPECT_NE(find(v, "float32").change.find("input (bfloat16)"), std::string::npos);
  EXPECT_FALSE(find(v, "deterministic").applies());
  EXPECT_EQ(find(v, "branch-off:amp").branches_off, (std::set<std::string>{"amp"}));
  EXPECT_EQ(find(v, "branch-off:ext").branches_off, (std::set<std::string>{"ext"}));
  EXPECT_THROW(find(v, "branch-off"), std::runtime_error);  // branches declared: no "not applicable" row
  // A stranger's switch name is shown within one line and scrubbed, and run as it is (probe 42).
  const std::string token = "ghp_R7cXk2LmQ9pV4sT8wY1zB6nD3fH5jK0aE2gX";
  c.command->switches = {commandSwitch("x\n| forged | row |\x1b[31m", {"--x"}), commandSwitch(token, {"--t"})};
  const auto hostile = planVariants(c, tensors("bfloat16"));
  EXPECT_EQ(find(hostile, "branch-off:x\\x0a| forged | row |\\x1b[31m").branches_off,
            (std::set<std::string>{"x\n| forged | row |\x1b[31m"}));
  EXPECT_EQ(find(hostile, "branch-off:<secret:github-pat>").branches_off, (std::set<std::string>{token}));
  EXPECT_EQ(find(hostile, "branch-off:<secret:github-pat>").change, "branch '<secret:github-pat>' switched off");
  // A '|' in a name stays inside its cell of the table (probe 44: a name
  // "x | nothing (the reference) | 3 | 3 | 0 | 0" forged the counts).
  CompareResult result;
  VariantResult row;
  row.variant = find(hostile, "branch-off:<secret:github-pat>");
  row.variant.name = "branch-off:x | 3 | 3 | 0 | 0";
  row.runs = 1;
  result.results.push_back(row);
  EXPECT_NE(renderComparison(result).find(
                "| branch-off:x \\| 3 \\| 3 \\| 0 \\| 0 | branch '<secret:github-pat>' switched off | 1 |"),
            std::string::npos)
      << renderComparison(result);
}

TEST(CompareVariants, Float32CopyKeepsStrideOrder) {
  testing::TempDir dir;
  NamedTensors b;
  b.names = {"input", "sample_id"};
  b.tensors = {at::randn({3, 5}).to(at::kHalf).t(), at::arange(5, at::kLong)};  // transposed: strides (1, 5)
  writeBatchFile(b, dir.path() / "in.pt");
  EXPECT_EQ(writeFloat32Batch(dir.path() / "in.pt", dir.path() / "out.pt"),
            (std::vector<std::string>{"input: float16 -> float32"}));
  const NamedTensors out = readBatchFile(dir.path() / "out.pt");
  const at::Tensor& x = *out.find("input");
  EXPECT_EQ(x.scalar_type(), at::kFloat);
  EXPECT_EQ(x.strides(), (std::vector<int64_t>{1, 5}));
  EXPECT_TRUE(at::allclose(x, b.tensors[0].to(at::kFloat)));
  EXPECT_EQ(out.find("sample_id")->scalar_type(), at::kLong);
}

// Views are cast as views of their cast storage: an overlapping view stays
// one (probe 41: made dense, 98 KB of storage read as 1 GiB took compare to
// 4.3 GB), and two views of one storage still share it.
TEST(CompareVariants, Float32CopyKeepsViewsAndTheStorageTheyShare) {
  testing::TempDir dir;
  const at::Tensor base = at::randn({12}).to(at::kHalf);
  NamedTensors b;
  b.names = {"overlapping", "window", "sample_id"};
  b.tensors = {base.as_strided({4, 4}, {1, 1}), base.narrow(0, 2, 4), at::arange(4, at::kLong)};
  writeBatchFile(b, dir.path() / "in.pt");
  EXPECT_EQ(writeFloat32Batch(dir.path() / "in.pt", dir.path() / "out.pt").size(), 2u);
  const NamedTensors out = readBatchFile(dir.path() / "out.pt");
  const at::Tensor& overlapping = *out.find("overlapping");
  const at::Tensor& window = *out.find("window");
  EXPECT_EQ(overlapping.scalar_type(), at::kFloat);
  EXPECT_EQ(overlapping.strides(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(window.storage_offset(), 2);
  EXPECT_EQ(overlapping.storage().unsafeGetStorageImpl(), window.storage().unsafeGetStorageImpl());
  EXPECT_EQ(overlapping.storage().nbytes(), 12u * 4u);
  EXPECT_TRUE(at::equal(overlapping, b.tensors[0].to(at::kFloat)));
  EXPECT_TRUE(at::equal(window, b.tensors[1].to(at::kFloat)));
}

// ------------------------------------------------------------ runs (fake executor)

TEST(CompareRuns, EachVariantAloneWithoutDiagnosticVariables) {
  testing::TempDir dir;
  NamedTensors b;
  b.names = {"input", "sample_id"};
  b.tensors = {at::zeros({4, 2}), at::arange(4, at::kLong)};
  writeBatchFile(b, dir.path() / "batch.pt");
  testing::writeFile(dir.path() / "case.yaml",
                     "batch: batch.pt\nsamples: {tensors: {input: 0}, ids: sample_id}\n"
                     "trial: {command: [/bin/false, '{batch}'], env: {CUDA_LAUNCH_BLOCKING: '1'}}\n"
                     "context: {backend: cuda 12.1}\n");
  // Fails unless the accelerators are hidden: only the CPU variant passes.
  testing::FakeExecutor exec([&](const auto&) {
    return exec.specs.back().env_set.count("CUDA_VISIBLE_DEVICES") ? testing::exitedWith(0, "")
                                                                   : testing::indexError(4);
  });
  CompareOptions o;
  o.input = dir.path() / "case.yaml";
  o.runs = 2;
  const CompareResult r = compareVariants(o, nullptr, &exec);
  ASSERT_TRUE(r.reproduces());
  EXPECT_EQ(r.reference.family, FailureFamily::IndexError);
  ASSERT_EQ(exec.specs.size(), 6u);  // as-is, cpu, deterministic: 2 runs each
  for (const auto& spec : exec.specs) {
    EXPECT_FALSE(spec.env_set.count("CUDA_LAUNCH_BLOCKING"));  // removed even from the case's env
    EXPECT_NE(std::find(spec.env_unset.begin(), spec.env_unset.end(), "CUDA_LAUNCH_BLOCKING"), spec.env_unset.end());
  }
  EXPECT_FALSE(exec.specs[0].env_set.count("MINREPRO_DETERMINISTIC"));
  EXPECT_FALSE(exec.specs[2].env_set.count("MINREPRO_DETERMINISTIC"));  // cpu alone
  EXPECT_EQ(exec.specs[4].env_set.at("MINREPRO_DETERMINISTIC"), "1");
  EXPECT_FALSE(exec.specs[4].env_set.count("CUDA_VISIBLE_DEVICES"));  // deterministic alone
  ASSERT_EQ(r.results.size(), 5u);
  EXPECT_EQ(r.results[1].variant.name, "cpu");
  EXPECT_EQ(r.results[1].passed, 2);
  EXPECT_EQ(r.results[3].same, 2);
  const std::string text = renderComparison(r);
  EXPECT_NE(text.find("| cpu | the CPU instead of CUDA 12.1"), std::string::npos) << text;
  EXPECT_NE(text.find("| 2 | 0 | 0 | 2 |"), std::string::npos) << text;
  EXPECT_NE(text.find("- cpu: passes on the CPU: a hint"), std::string::npos) << text;
  EXPECT_NE(text.find("A CPU success is a hint, not a validation"), std::string::npos) << text;
}

// ------------------------------------------------------------ the real binary

std::string compare(const std::string& args, int* status) {
  std::string output;
  *status = runCommand(std::string(MINREPRO_BINARY) + " compare " + args, &output);
  return output;
}

TEST(CompareBinary, Class4ArchiveFailsTheSameWayUnderEveryApplicableVariant) {
  const testing::ShrunkExample run = testing::shrunkExample("class4");
  ASSERT_EQ(run.status, 0) << run.output;
  int status = -1;
  std::string output = compare(run.archive.string() + " --runs 2", &status);
  ASSERT_EQ(status, 0) << output;
  for (const char* line : {"Reference, the case as is: index-error in nll_loss: Target 4 is out of bounds.",
                           "Recorded in the archive: index-error in nll_loss: Target 4 is out of bounds.",
                           "| as-is | nothing (the reference) | 2 | 2 | 0 | 0 |",
                           "| cpu | not applicable (the built-in harness runs on the CPU already) | - | - | - | - |",
                           "| float32 | not applicable (no float16 or bfloat16 tensor in the batch) |",
                           "| 2 | 2 | 0 | 0 |\n| branch-off | not applicable (the case declares no optional branch",
                           "- deterministic: still fails the same way: deterministic algorithms on does not remove it",
                           "A CPU success is a hint, not a validation",
                           // The archive's op-level reproducer, under the same variants.
                           "The failing call alone (op/repro_op.py, `aten::nll_loss_forward.default`):",
                           "Reference, the case as is: index-error: Target 4 is out of bounds."})
    EXPECT_NE(output.find(line), std::string::npos) << line << "\n" << output;
  EXPECT_EQ(output.find("A CPU success"), output.rfind("A CPU success")) << "said once\n" << output;
}

// In a sandbox, the failing call alone runs too, from its own case beside
// the extracted archive. Before, that case's directory, under /tmp, was not
// bound into the sandbox's own /tmp: the call "failed differently" (its
// script was missing) and its table said nothing of the call.
TEST(CompareBinary, InASandboxTheCallAloneFailsTheSameWayToo) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  const testing::ShrunkExample run = testing::shrunkExample("class4");
  ASSERT_EQ(run.status, 0) << run.output;
  int status = -1;
  const std::string output = compare(run.archive.string() + " --runs 1 --sandbox on", &status);
  ASSERT_EQ(status, 0) << output;
  const auto call = output.find("The failing call alone (op/repro_op.py");
  ASSERT_NE(call, std::string::npos) << output;
  EXPECT_NE(output.find("| as-is | nothing (the reference) | 1 | 1 | 0 | 0 |", call), std::string::npos) << output;
}

// The command example's archive with its step.py changed to raise another
// IndexError (its case pins only the family): the table's "failed the same
// way" is the changed case's own failure, and compare says so. Before, it
// showed "1 failed the same way" beside the recorded error and said nothing.
TEST(CompareBinary, AChangedArchiveThatFailsAnotherWayIsSaidToFailOtherwiseThanRecorded) {
  const testing::ShrunkExample run = testing::shrunkExample("command");
  ASSERT_EQ(run.status, 0) << run.output;
  testing::TempDir dir("minrepro-compare-changed");
  ASSERT_TRUE(testing::extractInto(run.archive, dir.path() / "x"));
  std::string step = testing::readFile(dir.path() / "x" / "step.py");
  step.replace(step.find("import sys\n"), 11, "import sys\nraise IndexError('changed since')\n");
  testing::writeFile(dir.path() / "x" / "step.py", step);
  const fs::path changed = dir.path() / "changed.tar.gz";
  ASSERT_EQ(runCommand("cd " + (dir.path() / "x").string() + " && tar czf " + changed.string() + " ."), 0);
  int status = -1;
  const std::string output = compare(changed.string() + " --runs 1 --sandbox off", &status);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("Warning: the case as it is now fails otherwise (index-error: changed since) than the "
                        "archive records (index-error in cross_entropy: Target 4 is out of bounds.)"),
            std::string::npos)
      << output;
  // The warning said as the runs go quotes the message scrubbed too (probe 29: a URL's password).
  step.replace(step.find("changed since"), 13, "changed since https://deploy:Pa55w0rdQx@api.example.com/v1");
  testing::writeFile(dir.path() / "x" / "step.py", step);
  ASSERT_EQ(runCommand("cd " + (dir.path() / "x").string() + " && tar czf " + changed.string() + " ."), 0);
  const std::string scrubbed = compare(changed.string() + " --runs 1 --sandbox off", &status);
  EXPECT_NE(scrubbed.find("  warning: the case as it is now fails otherwise"), std::string::npos) << scrubbed;
  EXPECT_EQ(scrubbed.find("Pa55w0rdQx"), std::string::npos) << scrubbed;
}

// A stranger's archive whose step, sandboxed, swaps its op/inputs.pt for a
// link to a file the sandbox hides (probe 38: minrepro, unsandboxed, then
// read that file and copied it into the op runs): the op files are taken
// as extracted, before any run, and the call alone still fails as it did.
TEST(CompareBinary, ALinkARunPlantsInItsOpFilesIsNotFollowed) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  const testing::ShrunkExample run = testing::shrunkExample("command");
  ASSERT_EQ(run.status, 0) << run.output;
  testing::TempDir dir("minrepro-compare-link");
  ASSERT_EQ(runCommand(python() + " -c \"import torch; torch.save({'hidden': torch.arange(3)}, '" +
                       (dir.path() / "hidden.pt").string() + "')\""),
            0);
  ASSERT_TRUE(testing::extractInto(run.archive, dir.path() / "x"));
  const std::string step = testing::readFile(dir.path() / "x" / "step.py");
  testing::writeFile(dir.path() / "x" / "step.py",
                     "import os\n_p = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'op', 'inputs.pt')\n"
                     "if not os.path.islink(_p):\n    os.unlink(_p)\n    os.symlink('" +
                         (dir.path() / "hidden.pt").string() + "', _p)\n" + step);
  const fs::path changed = dir.path() / "changed.tar.gz";
  ASSERT_EQ(runCommand("cd " + (dir.path() / "x").string() + " && tar czf " + changed.string() + " ."), 0);
  int status = -1;
  const std::string output = compare(changed.string() + " --runs 1 --sandbox on", &status);
  ASSERT_EQ(status, 0) << output;
  const auto call = output.find("The failing call alone (op/repro_op.py");
  ASSERT_NE(call, std::string::npos) << output;
  EXPECT_NE(output.find("| as-is | nothing (the reference) | 1 | 1 | 0 | 0 |", call), std::string::npos) << output;
}

// The operator's name in a stranger's op/call.txt reaches the title of the
// op table within one line, escaped (probe 43: ESC M and a carriage return
// moved the cursor up over the rows above, an OSC 52 set the clipboard).
TEST(CompareBinary, AStrangersOperatorNameIsShownEscaped) {
  const testing::ShrunkExample run = testing::shrunkExample("command");
  ASSERT_EQ(run.status, 0) << run.output;
  testing::TempDir dir("minrepro-compare-opname");
  ASSERT_TRUE(testing::extractInto(run.archive, dir.path() / "x"));
  std::string call = testing::readFile(dir.path() / "x" / "op" / "call.txt");
  ASSERT_EQ(call.rfind("op: ", 0), 0u) << call;
  call.insert(call.find('\n'), "\x1bM\r| forged | row |\x1b]52;c;Y3VybA==\x07`");
  testing::writeFile(dir.path() / "x" / "op" / "call.txt", call);
  const fs::path changed = dir.path() / "changed.tar.gz";
  ASSERT_EQ(runCommand("cd " + (dir.path() / "x").string() + " && tar czf " + changed.string() + " ."), 0);
  int status = -1;
  const std::string output = compare(changed.string() + " --runs 1", &status);
  const auto title = output.find("The failing call alone (op/repro_op.py, `");
  ASSERT_NE(title, std::string::npos) << output;
  EXPECT_NE(output.find("\\x1bM\\x0d| forged | row |\\x1b]52;c;Y3VybA==\\x07'`):", title), std::string::npos) << output;
  EXPECT_EQ(output.find('\x1b'), std::string::npos) << output;
  EXPECT_EQ(output.find('\r'), std::string::npos) << output;
}

// A stranger's case.yaml may name only the archive's own files: a batch of
// yours (probe 40) or a pipeline file of yours (probe 43: compare parsed it,
// outside the sandbox, and quoted its first key) is refused before reading.
TEST(CompareBinary, AStrangersArchiveMayNameOnlyItsOwnFiles) {
  const testing::ShrunkExample run = testing::shrunkExample("command");
  ASSERT_EQ(run.status, 0) << run.output;
  testing::TempDir dir("minrepro-compare-batch");
  const fs::path yours = dir.path() / "yours.pt", notes = dir.path() / "notes.yaml";
  ASSERT_EQ(runCommand(python() + " -c \"import torch; torch.save({'SECRET_NAME': torch.zeros(2).half()}, '" +
                       yours.string() + "')\""),
            0);
  testing::writeFile(notes, "SECRET_NOTE: alice bob carol\n");
  ASSERT_TRUE(testing::extractInto(run.archive, dir.path() / "x"));
  const std::string original = testing::readFile(dir.path() / "x" / "case.yaml");
  const auto replaced = [&](const std::string& key, const std::string& line) {
    std::string yaml = original;
    const auto at = yaml.find(key);
    if (at == std::string::npos) return yaml + line + "\n";
    return yaml.replace(at, yaml.find('\n', at) - at, line);
  };
  for (const std::string& yaml :
       {replaced("batch: ", "batch: " + yours.string()), replaced("reducers: ", "pipeline: " + notes.string())}) {
    testing::writeFile(dir.path() / "x" / "case.yaml", yaml);
    const fs::path archive = dir.path() / "changed.tar.gz";
    fs::remove(archive);
    ASSERT_EQ(runCommand("cd " + (dir.path() / "x").string() + " && tar czf " + archive.string() + " ."), 0);
    int status = -1;
    const std::string output = compare(archive.string() + " --runs 1", &status);
    EXPECT_EQ(status, 2) << output;
    EXPECT_NE(output.find("an archive made elsewhere may read only its own files"), std::string::npos) << output;
    EXPECT_EQ(output.find("SECRET_"), std::string::npos) << output;
  }
}

class CompareHalf : public ::testing::Test {
 protected:
  // A float16 whitening layer on a float16 batch: LibTorch on the CPU (1.13
  // and 2.x) has no Half Cholesky, so the case fails as is and passes in float32.
  void SetUp() override {
    testing::writeFile(dir_.path() / "make.py",
                       "import torch\ntorch.manual_seed(0)\n"
                       "class Whiten(torch.nn.Module):\n"
                       "    def forward(self, x):\n"
                       "        m = (x.unsqueeze(2) * x.unsqueeze(1)).mean(0) + torch.eye(x.shape[1], dtype=x.dtype)\n"
                       "        return (x.unsqueeze(1) * torch.linalg.cholesky(m)).sum(2)[:, :4]\n"
                       "m = torch.jit.script(Whiten().eval())\n"
                       "torch.jit.save(m, 'model.pt')\n"
                       "torch.save({'input': torch.randn(6, 8).half(), 'target': torch.tensor([0, 1, 2, 3, 0, 1]),\n"
                       "            'sample_id': torch.arange(6) + 500}, 'batch.pt')\n");
    std::string output;
    ASSERT_EQ(runCommand("cd " + dir_.path().string() + " && " + python() + " make.py", &output), 0) << output;
    testing::writeFile(dir_.path() / "case.yaml",
                       "batch: batch.pt\nsamples: {tensors: {input: 0, target: 0}, ids: sample_id}\n"
                       "trial: {harness: {model: model.pt, input: input, target: target}}\n");
  }
  testing::TempDir dir_{"minrepro-compare-half"};
};

TEST_F(CompareHalf, FailsOnlyInHalfPrecision) {
  int status = -1;
  const std::string output = compare((dir_.path() / "case.yaml").string() + " --runs 2", &status);
  ASSERT_EQ(status, 0) << output;
  for (const char* line :
       {"Reference, the case as is: op-unavailable", "cholesky_cpu",
        "| as-is | nothing (the reference) | 2 | 2 | 0 | 0 |",
        "| float32 | float32 instead of half precision: input (float16) cast",
        "(the harness casts the model's half parameters too) | 2 | 0 | 0 | 2 |",
        "- float32: passes in float32: the failure needs half precision", "  - cast input: float16 -> float32"})
    EXPECT_NE(output.find(line), std::string::npos) << line << "\n" << output;
}

TEST_F(CompareHalf, CaseThatPassesAsIsHasNothingToCompareWith) {
  std::string output;
  ASSERT_EQ(
      runCommand(
          "cd " + dir_.path().string() + " && " + python() +
              " -c \"import torch; b = torch.load('batch.pt'); b['input'] = b['input'].float(); "
              "torch.save(b, 'batch.pt'); m = torch.jit.load('model.pt').float(); torch.jit.save(m, 'model.pt')\"",
          &output),
      0)
      << output;
  int status = -1;
  output = compare((dir_.path() / "case.yaml").string() + " --runs 1", &status);
  EXPECT_EQ(status, 3) << output;
  EXPECT_NE(output.find("did not fail in 1 run(s): there is nothing to compare the variants with"), std::string::npos)
      << output;
  EXPECT_EQ(output.find("| float32 |"), std::string::npos) << "stops after as-is: " << output;
}

TEST(CompareBinary, BadInputSaysWhatIsWrong) {
  testing::TempDir dir;
  int status = -1;
  std::string output = compare((dir.path() / "missing.tar.gz").string(), &status);
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("no such file; give a repro.tar.gz from minrepro shrink or a case.yaml"), std::string::npos)
      << output;
  testing::writeFile(dir.path() / "fake.tar.gz", std::string("\x1f\x8b", 2) + "not really gzip");
  output = compare((dir.path() / "fake.tar.gz").string(), &status);
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("minrepro compare: error: "), std::string::npos) << output;
  output = compare("", &status);
  EXPECT_EQ(status, 2) << output;
}

}  // namespace
}  // namespace minrepro
