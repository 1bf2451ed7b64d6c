// minrepro triage: the first error of real (CPU) and documented (CUDA, ROCm)
// outputs, its line, the backend, and the command as the user runs it.
#include "commands/triage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using F = FailureFamily;

fs::path fixture(const std::string& name) { return fs::path(MINREPRO_TEST_FIXTURES) / "outputs" / name; }
std::string readFixture(const std::string& name) { return testing::readFile(fixture(name)); }

// A training log's chatter before the failure: progress lines and a warning
// that must not be read as the error.
std::string preamble(int lines) {
  std::string text =
      "/usr/lib/python3/dist-packages/torch/nn/modules/loss.py:536: UserWarning: Using a target "
      "size that is different to the input size.\n";
  for (int i = 1; i < lines; ++i) text += "epoch 3 step " + std::to_string(i) + " loss 0.4213\n";
  return text;
}

struct TriageCase {
  std::string file;
  F family;
  std::string op;
  Backend backend;
  std::size_t line;  // where the first error starts in the fixture itself
};
std::ostream& operator<<(std::ostream& out, const TriageCase& c) { return out << c.file; }

const std::vector<TriageCase> kCases = {
    {"py_cross_entropy_target4.txt", F::IndexError, "cross_entropy", Backend::Unknown, 1},
    {"py_chained_exception.txt", F::IndexError, "cross_entropy", Backend::Unknown, 1},
    {"py_linear_mat1_mat2.txt", F::ValueError, "", Backend::Unknown, 1},
    {"py_embedding_index.txt", F::IndexError, "embedding", Backend::Unknown, 1},
    {"py_cpu_oom.txt", F::OutOfMemory, "", Backend::Unknown, 1},
    {"py_addmm_half_cpu.txt", F::OpUnavailable, "addmm", Backend::Unknown, 1},
    {"py_jit_load_unknown_op.txt", F::OpUnavailable, "frobnicate", Backend::Unknown, 1},
    {"py_typeerror_cat.txt", F::ValueError, "", Backend::Unknown, 1},
    {"cpp_nll_loss_terminate.txt", F::IndexError, "nll_loss", Backend::Unknown, 1},
    {"cpp_cpu_oom_terminate.txt", F::OutOfMemory, "", Backend::Unknown, 1},
    {"py_segfault_faulthandler.txt", F::Signal, "", Backend::Unknown, 1},
    {"doc_cuda_device_assert_cascade.txt", F::DeviceAssert, "nll_loss", Backend::Cuda, 1},
    {"doc_cuda_device_assert_stdout.txt", F::DeviceAssert, "nll_loss", Backend::Cuda, 2},
    {"doc_cuda_device_assert_stderr.txt", F::DeviceAssert, "", Backend::Cuda, 1},
    {"doc_cuda_oom.txt", F::OutOfMemory, "", Backend::Cuda, 1},
    {"doc_cuda_oom_expandable.txt", F::OutOfMemory, "", Backend::Cuda, 1},
    {"doc_cuda_device_mismatch.txt", F::DeviceMismatch, "addmm", Backend::Cuda, 1},
    {"doc_cuda_no_kernel_image.txt", F::OpUnavailable, "", Backend::Cuda, 7},
    {"doc_rocm_device_assert_abort.txt", F::DeviceAssert, "nll_loss", Backend::Rocm, 1},
    {"doc_rocm_hip_device_assert.txt", F::DeviceAssert, "", Backend::Rocm, 1},
    {"doc_rocm_oom.txt", F::OutOfMemory, "", Backend::Rocm, 1},
    {"doc_rocm_hip_error_oom.txt", F::OutOfMemory, "", Backend::Rocm, 1},
    {"doc_rocm_no_binary_for_gpu.txt", F::OpUnavailable, "", Backend::Rocm, 1},
};

class TriageFixture : public ::testing::TestWithParam<TriageCase> {};

TEST_P(TriageFixture, FamilyOperatorBackendAndLine) {
  const TriageCase& c = GetParam();
  const Triage t = triageText(readFixture(c.file));
  EXPECT_EQ(familyName(t.signature.family), familyName(c.family));
  EXPECT_EQ(t.signature.op, c.op);
  EXPECT_EQ(t.backend, c.backend);
  EXPECT_EQ(t.first_line, c.line);
}

// The same text after 40 lines of training output: the line moves by 40 and
// nothing else changes (the warning and the progress are not errors).
TEST_P(TriageFixture, FindsTheErrorAfterALogsChatter) {
  const TriageCase& c = GetParam();
  const std::string text = readFixture(c.file);
  const Triage alone = triageText(text);
  const Triage in_log = triageText(preamble(40) + text);
  EXPECT_EQ(in_log.first_line, c.line + 40);
  EXPECT_EQ(in_log.signature.family, alone.signature.family);
  EXPECT_EQ(in_log.signature.message, alone.signature.message);
  EXPECT_EQ(in_log.first_line_text, alone.first_line_text);
}

std::string caseName(const ::testing::TestParamInfo<TriageCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Triage, TriageFixture, ::testing::ValuesIn(kCases), caseName);

TEST(Triage, TheFirstErrorWinsOverTheCascadeAfterIt) {
  // A device assert at line 3, then an unrelated-looking OOM at exit: the
  // assert is the cause, the OOM its consequence.
  const std::string text =
      "step 1\nstep 2\n" + readFixture("doc_cuda_device_assert_cascade.txt") + readFixture("doc_cuda_oom.txt");
  const Triage t = triageText(text);
  EXPECT_EQ(t.signature.family, F::DeviceAssert);
  EXPECT_EQ(t.first_line, 3u);
  EXPECT_NE(t.first_line_text.find("Assertion `t >= 0 && t < n_classes` failed."), std::string::npos);
}

TEST(Triage, BareLibTorchErrorStartsAtItsMessageLine) {
  const std::string text =
      "loading\n\nTarget 4 is out of bounds.\n"
      "Exception raised from nll_loss_out_frame at ../aten/src/ATen/native/LossNLL.cpp:226 "
      "(most recent call first):\n";
  const Triage t = triageText(text);
  EXPECT_EQ(t.first_line, 3u);
  EXPECT_EQ(t.signature.op, "nll_loss");
  EXPECT_EQ(t.first_line_text, "Target 4 is out of bounds.");
}

// torch 2.13's torch.compile errors (tests/fixtures/outputs/torch213): the
// stage that failed, and advice about the stages.
TEST(Triage, CompileErrorsNameTheStage) {
  const std::string backend = renderTriage(triageText(readFixture("torch213/py_compile_backend.txt")), "x.log");
  EXPECT_NE(backend.find("family:              compile-error\n"), std::string::npos) << backend;
  EXPECT_NE(backend.find("compiler stage:      my_backend\n"), std::string::npos) << backend;
  EXPECT_NE(backend.find("first message:       RuntimeError: my_backend cannot lower aten.mul"), std::string::npos);
  EXPECT_NE(backend.find("aot_eager"), std::string::npos) << backend;
  const std::string inductor =
      renderTriage(triageText(readFixture("torch213/py_compile_inductor_no_compiler.txt")), "x.log");
  EXPECT_NE(inductor.find("compiler stage:      inductor\n"), std::string::npos) << inductor;
}

// A coloured traceback (rich, loguru, Python 3.13 on a terminal) reads as a
// plain one; an error past the first bytes of a very long line is not read,
// and "no error found" says lines were cut.
TEST(Triage, ColouredTracebacksReadAndCutLinesAreSaidWhenNothingIsFound) {
  const std::string esc = "\x1b[";
  const Triage coloured =
      triageText("step 1\n" + esc + "1;31mTraceback (most recent call last):" + esc + "0m\n" + esc +
                 "35m  File \"/src/train.py\", line 9, in <module>" + esc + "0m\n    step()\n" + esc +
                 "1;35mRuntimeError" + esc + "0m: " + esc + "35mshape mismatch" + esc + "0m\n");
  EXPECT_EQ(coloured.signature.family, F::RuntimeError);
  EXPECT_EQ(coloured.signature.message, "shape mismatch");
  EXPECT_EQ(coloured.user_frame, "/src/train.py:9 in <module>");
  const Triage cut = triageText("progress " + std::string(5000, '.') + " RuntimeError: late\n");
  EXPECT_FALSE(cut.signature.failed());
  EXPECT_NE(renderTriage(cut, "x.log").find("note: 1 line(s) longer than 2048 bytes were read in their first"),
            std::string::npos)
      << renderTriage(cut, "x.log");
}

TEST(Triage, CleanLogHasNoError) {
  const Triage t = triageText(preamble(20));
  EXPECT_FALSE(t.signature.failed());
  EXPECT_EQ(t.first_line, 0u);
  EXPECT_NE(renderTriage(t, "train.log").find("no error found"), std::string::npos);
}

TEST(Triage, RenderGivesTheGuidesAdviceAndTheBackendsSwitch) {
  const std::string cuda = renderTriage(triageText(readFixture("doc_cuda_device_assert_cascade.txt")), "x.log");
  EXPECT_NE(cuda.find("family:              device-assert"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("conclusion to avoid: that the GPU is broken"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("rerun once with CUDA_LAUNCH_BLOCKING=1"), std::string::npos) << cuda;
  const std::string rocm = renderTriage(triageText(readFixture("doc_rocm_device_assert_abort.txt")), "x.log");
  EXPECT_NE(rocm.find("AMD_SERIALIZE_KERNEL=3"), std::string::npos) << rocm;
  EXPECT_EQ(rocm.find("rerun once with CUDA_LAUNCH_BLOCKING"), std::string::npos) << rocm;
  EXPECT_NE(rocm.find("backend:             ROCm (HIP)"), std::string::npos) << rocm;
}

TEST(Triage, AnEmbeddingIndexErrorIsATokenPastTheTableNotAClassPastTheOutputLayer) {
  const std::string log =
      "Traceback (most recent call last):\n"
      "  File \"/src/train.py\", line 40, in <module>\n    logits = model(tokens, lengths)\n"
      "  File \"/venv/lib/python3.11/site-packages/torch/nn/functional.py\", line 2615, in embedding\n"
      "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
      "IndexError: index out of range in self\n";
  const std::string out = renderTriage(triageText(log), "train.log");
  EXPECT_NE(out.find("largest id against the embedding's num_embeddings (a token id"), std::string::npos) << out;
  EXPECT_EQ(out.find("growing the output layer"), std::string::npos) << out;
  EXPECT_NE(out.find("clamping or wrapping the ids"), std::string::npos) << out;
}

// ------------------------------------------------------------ the binary

std::string minrepro() { return MINREPRO_BINARY; }

// A large log is read in bounded memory: past the first bytes, only lines
// near what reads like an error are kept (commands/log_window.h).
// Windowed from the first byte, every fixture inside hundreds of progress
// lines gives the same triage as the whole log: the same first error, at
// the same line, and the same errors set aside at theirs.
TEST(Triage, AWindowedLogGivesTheSameAnswerAsTheWholeLog) {
  for (const TriageCase& c : kCases) {
    SCOPED_TRACE(c.file);
    const std::string text = preamble(300) + readFixture(c.file) + preamble(300);
    const Triage whole = triageText(text);
    std::istringstream in(text);
    const Triage windowed = triageStream(in, /*exact_bytes=*/0);
    EXPECT_GT(windowed.dropped, 400u);
    EXPECT_EQ(windowed.signature.summary(), whole.signature.summary());
    EXPECT_EQ(windowed.first_line, whole.first_line);
    EXPECT_EQ(windowed.where, whole.where);
    ASSERT_EQ(windowed.set_aside.size(), whole.set_aside.size());
    for (std::size_t i = 0; i < whole.set_aside.size(); ++i) {
      EXPECT_EQ(windowed.set_aside[i].line, whole.set_aside[i].line);
      EXPECT_EQ(windowed.set_aside[i].summary, whole.set_aside[i].summary);
    }
  }
}

// /dev/zero grew triage to gigabytes: a device is refused, and a line
// without an end is read in its first 2 KiB only (#30.8).
TEST(TriageCommand, ADeviceIsRefusedAndALineWithoutEndCostsNoMemory) {
  std::string out;
  EXPECT_EQ(testing::runCommand(minrepro() + " triage /dev/zero 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("/dev/zero is a device or a socket, not a log file"), std::string::npos) << out;
  const auto peakKb = [&](const std::string& input) {
    testing::runCommand("( " + input + " ) | /usr/bin/time -f 'peak-kb %M' " + minrepro() + " triage - 2>&1", &out);
    const auto at = out.find("peak-kb ");
    return at == std::string::npos ? -1L : std::stol(out.substr(at + 8));
  };
  const long baseline = peakKb("printf 'RuntimeError: boom\\n'");
  const long long_line = peakKb("head -c 200000000 /dev/zero; printf '\\nRuntimeError: boom\\n'");
  EXPECT_NE(out.find("note: 1 line(s) longer than 2048 bytes were read in their first 2048 bytes only"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("first message:       boom"), std::string::npos) << out;
  EXPECT_LT(long_line - baseline, 32 * 1024) << "a 200 MB line took " << long_line - baseline << " KB more";
}

// A log that is nothing but errors grew triage by ten times its size (20 MB
// of traceback headers: 410 MB). The lines near errors are read up to a
// bound: the first ones, where the first error is, and the last ones,
// where the death is reported; the lines between are counted, not read.
TEST(Triage, OfALogOfNothingButErrorsTheFirstAndLastLinesAreReadTheRestCounted) {
  std::string text = readFixture("cpp_nll_loss_terminate.txt");
  const std::size_t header = std::count(text.begin(), text.end(), '\n');
  for (int i = 0; i < 20000; ++i) text += "Traceback (most recent call last):\n";
  text += "Segmentation fault (core dumped)\n";
  std::istringstream in(text);
  const LogLines log = readLogBounded(in, /*exact_bytes=*/0, /*head_bytes=*/64 << 10, /*tail_bytes=*/16 << 10);
  std::size_t kept = 0;
  for (const std::string& line : log.lines) kept += line.size();
  EXPECT_LT(kept, std::size_t{80} << 10);
  EXPECT_GT(log.not_read, 15000u);
  EXPECT_GT(log.first_not_read, header);
  EXPECT_LT(log.first_not_read, log.last_not_read);
  EXPECT_LT(log.last_not_read, header + 20001 - 100);
  EXPECT_EQ(log.lines.front(), text.substr(0, text.find('\n')));
  EXPECT_EQ(log.lines.back(), "Segmentation fault (core dumped)");
  EXPECT_EQ(log.numberInLog(log.lines.size()), header + 20001);
}

// The same as the user runs it, on 100 MB: what triage holds stays the
// same whatever the log's size, and it says which lines it did not read.
TEST(TriageCommand, ALogOfNothingButErrorsCostsABoundedMemory) {
  testing::TempDir dir;
  const fs::path log = dir.path() / "train.log";
  {
    std::ofstream out(log, std::ios::binary);
    out << readFixture("cpp_nll_loss_terminate.txt");
    const std::string block = [] {
      std::string lines;
      for (int i = 0; i < 1000; ++i) lines += "Traceback (most recent call last):\n";
      return lines;
    }();
    for (std::size_t written = 0; written < (std::size_t{100} << 20); written += block.size()) out << block;
  }
  std::string out;
  const auto peakKb = [&](const fs::path& file) {
    testing::runCommand("/usr/bin/time -f 'peak-kb %M' " + minrepro() + " triage " + file.string() + " 2>&1", &out);
    const auto at = out.find("peak-kb ");
    return at == std::string::npos ? -1L : std::stol(out.substr(at + 8));
  };
  const fs::path small = dir.path() / "small.log";
  testing::writeFile(small, readFixture("cpp_nll_loss_terminate.txt"));
  const long baseline = peakKb(small);
  const long large = peakKb(log);
  EXPECT_NE(out.find("suspect operator:    nll_loss"), std::string::npos) << out.substr(0, 4000);
  EXPECT_NE(out.find("note: the log holds more lines near errors than triage reads (8 MiB):"), std::string::npos)
      << out.substr(0, 4000);
  EXPECT_LT(large - baseline, 160 * 1024) << "a 100 MB log of errors took " << large - baseline << " KB more";
}

TEST(TriageCommand, ReadsALogFileAndNamesTheLine) {
  testing::TempDir dir;
  const fs::path log = dir.path() / "train.log";
  testing::writeFile(log, preamble(12) + readFixture("doc_rocm_hip_device_assert.txt"));
  std::string out;
  ASSERT_EQ(testing::runCommand(minrepro() + " triage " + log.string(), &out), 0) << out;
  EXPECT_NE(out.find("first error:         " + log.string() + ":13: Traceback (most recent call last):"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("family:              device-assert"), std::string::npos) << out;
  EXPECT_NE(out.find("first message:       HIP error: device-side assert triggered"), std::string::npos) << out;
  EXPECT_NE(out.find("first check:         indices, targets and the operator's conditions"), std::string::npos);
}

// A secret the log quotes is scrubbed on the terminal (probe 28: a URL's
// password and a GitHub token were printed as they were).
TEST(TriageCommand, ASecretTheLogQuotesIsScrubbed) {
  testing::TempDir dir;
  const fs::path log = dir.path() / "train.log";
  testing::writeFile(log,
                     "Traceback (most recent call last):\n  File \"/home/bob/t.py\", line 3, in <module>\n"
                     "RuntimeError: postgres://bob:S3cr3tP4ss@db.example.com/x token "
                     "ghp_1234567890abcdefghijABCDEFGHIJ123456\n");
  std::string out;
  ASSERT_EQ(testing::runCommand(minrepro() + " triage " + log.string(), &out), 0) << out;
  EXPECT_EQ(out.find("S3cr3tP4ss"), std::string::npos) << out;
  EXPECT_EQ(out.find("ghp_1234567890"), std::string::npos) << out;
  EXPECT_NE(out.find("<secret:basic-auth-url>"), std::string::npos) << out;
}

TEST(TriageCommand, ReadsStandardInput) {
  std::string out;
  ASSERT_EQ(testing::runCommand(minrepro() + " triage - < " + fixture("cpp_nll_loss_terminate.txt").string(), &out), 0)
      << out;
  EXPECT_NE(out.find("first error:         stdin:1: terminate called after throwing an instance of "
                     "'c10::IndexError'"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("suspect operator:    nll_loss"), std::string::npos) << out;
  EXPECT_NE(out.find("conclusion to avoid: growing the output layer"), std::string::npos) << out;
}

TEST(TriageCommand, ExitStatusSaysWhetherAnErrorWasFound) {
  testing::TempDir dir;
  testing::writeFile(dir.path() / "clean.log", preamble(5));
  std::string out;
  EXPECT_EQ(testing::runCommand(minrepro() + " triage " + (dir.path() / "clean.log").string(), &out), 1) << out;
  EXPECT_NE(out.find("no error found"), std::string::npos) << out;
  EXPECT_EQ(testing::runCommand(minrepro() + " triage " + (dir.path() / "missing.log").string() + " 2>&1", &out), 2);
  EXPECT_NE(out.find("cannot read " + (dir.path() / "missing.log").string()), std::string::npos) << out;
  EXPECT_EQ(testing::runCommand(minrepro() + " triage 2>&1", &out), 2);
}

}  // namespace
}  // namespace minrepro
