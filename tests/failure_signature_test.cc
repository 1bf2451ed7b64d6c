// Failure signatures from real outputs (captured on CPU with torch 1.13 by
// tests/fixtures/outputs/capture.sh) and from documented CUDA/ROCm texts
// (the doc_* fixtures, written by hand: no GPU on the capture machine).
#include "core/failure_signature.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef MINREPRO_TEST_FIXTURES
#define MINREPRO_TEST_FIXTURES "tests/fixtures"
#endif

namespace minrepro {
namespace {

std::string readOutputFixture(const std::string& name) {
  const std::string path = std::string(MINREPRO_TEST_FIXTURES) + "/outputs/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TrialOutcome exited(int code, std::string stderr_text, std::string stdout_text = "") {
  TrialOutcome outcome;
  outcome.end = TrialEnd::Exited;
  outcome.exit_code = code;
  outcome.stderr_text = std::move(stderr_text);
  outcome.stdout_text = std::move(stdout_text);
  return outcome;
}

TrialOutcome signaled(int signal, std::string stderr_text) {
  TrialOutcome outcome;
  outcome.end = TrialEnd::Signaled;
  outcome.signal = signal;
  outcome.stderr_text = std::move(stderr_text);
  return outcome;
}

FailureSignature signature(FailureFamily family, std::string op, std::string message) {
  FailureSignature s;
  s.family = family;
  s.op = std::move(op);
  s.message = std::move(message);
  return s;
}

// ------------------------------------------------------------ fixtures

struct FixtureCase {
  std::string file;
  TrialEnd end;
  int status;  // exit code or signal, as recorded by capture.sh
  FailureFamily family;
  std::string op;
  std::string message;
  bool message_is_prefix = false;
};

std::ostream& operator<<(std::ostream& out, const FixtureCase& c) { return out << c.file; }

using F = FailureFamily;
constexpr auto kExit = TrialEnd::Exited;
constexpr auto kSignal = TrialEnd::Signaled;
constexpr int kSigabrt = 6;
constexpr int kSigsegv = 11;
const std::string kCpuOom =
    "[enforce fail at alloc_cpu.cpp:?] err == 0. DefaultCPUAllocator: can't allocate memory: you "
    "tried to allocate 4503599627370496 bytes. Error code 12 (Cannot allocate memory)";
const std::string kNllAssert = "nll_loss_forward_reduce_cuda_kernel_2d: Assertion `t >= 0 && t < n_classes` failed.";

const std::vector<FixtureCase> kFixtureCases = {
    // Real captures: Python exits 1 on an uncaught exception.
    {"py_cross_entropy_target4.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"py_chained_exception.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"py_linear_mat1_mat2.txt", kExit, 1, F::ValueError, "", "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"},
    {"py_scalar_type_long_int.txt", kExit, 1, F::ValueError, "nll_loss", "expected scalar type Long but found Int"},
    {"py_batch_size_mismatch.txt", kExit, 1, F::ValueError, "cross_entropy",
     "Expected input batch_size (2) to match target batch_size (3)."},
    {"py_embedding_index.txt", kExit, 1, F::IndexError, "embedding", "index out of range in self"},
    {"py_view_shape_invalid.txt", kExit, 1, F::ValueError, "", "shape '[4, 2]' is invalid for input of size 6"},
    {"py_script_cross_entropy.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"py_cpu_oom.txt", kExit, 1, F::OutOfMemory, "", kCpuOom},
    {"py_addmm_half_cpu.txt", kExit, 1, F::OpUnavailable, "addmm", "\"addmm_impl_cpu_\" not implemented for 'Half'"},
    {"py_sparse_view_not_implemented.txt", kExit, 1, F::OpUnavailable, "view",
     "Could not run 'aten::view' with arguments from the 'SparseCPU' backend. This could be", true},
    {"py_typeerror_cat.txt", kExit, 1, F::ValueError, "",
     "cat() received an invalid combination of arguments - got (Tensor, Tensor), but expected one of:"},
    {"py_file_not_found_tmp.txt", kExit, 1, F::RuntimeError, "",
     "[Errno 2] No such file or directory: '<tmp>/batch.pt'"},
    {"py_jit_load_unknown_op.txt", kExit, 1, F::OpUnavailable, "frobnicate", "Unknown builtin op: aten::frobnicate."},
    {"py_segfault.txt", kSignal, kSigsegv, F::Signal, "", ""},
    {"py_segfault_faulthandler.txt", kSignal, kSigsegv, F::Signal, "", "Fatal Python error: Segmentation fault"},
    // Real captures: a C++ program dies of SIGABRT from std::terminate.
    {"cpp_nll_loss_terminate.txt", kSignal, kSigabrt, F::IndexError, "nll_loss", "Target 4 is out of bounds."},
    {"cpp_script_cross_entropy_terminate.txt", kSignal, kSigabrt, F::IndexError, "cross_entropy",
     "Target 4 is out of bounds."},
    {"cpp_jit_load_unknown_op_terminate.txt", kSignal, kSigabrt, F::OpUnavailable, "frobnicate",
     "Unknown builtin op: aten::frobnicate."},
    {"cpp_cpu_oom_terminate.txt", kSignal, kSigabrt, F::OutOfMemory, "", kCpuOom},
    // Documented CUDA texts.
    {"doc_cuda_device_assert_cascade.txt", kExit, 1, F::DeviceAssert, "nll_loss", kNllAssert},
    {"doc_cuda_oom.txt", kExit, 1, F::OutOfMemory, "",
     "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity;", true},
    {"doc_cuda_oom_expandable.txt", kExit, 1, F::OutOfMemory, "",
     "CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.15 GiB of "
     "which 301.06 MiB is free. Process ? has 78.84 GiB memory in use.",
     true},
    {"doc_cuda_device_mismatch.txt", kExit, 1, F::DeviceMismatch, "addmm",
     "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
     "(when checking argument for argument mat1 in method wrapper_addmm)"},
    {"doc_cuda_no_kernel_image.txt", kExit, 1, F::OpUnavailable, "",
     "CUDA error: no kernel image is available for execution on the device"},
    // Documented ROCm texts.
    {"doc_rocm_device_assert_abort.txt", kSignal, kSigabrt, F::DeviceAssert, "nll_loss", kNllAssert},
    {"doc_rocm_hip_device_assert.txt", kExit, 1, F::DeviceAssert, "", "HIP error: device-side assert triggered"},
    {"doc_rocm_oom.txt", kExit, 1, F::OutOfMemory, "", "HIP out of memory. Tried to allocate 2.00 GiB.", true},
    {"doc_rocm_hip_error_oom.txt", kExit, 1, F::OutOfMemory, "", "HIP error: hipErrorOutOfMemory"},
    {"doc_rocm_no_binary_for_gpu.txt", kSignal, kSigabrt, F::OpUnavailable, "",
     "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"},
};

class FixtureTest : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(FixtureTest, FamilyOperatorAndMessage) {
  const FixtureCase& c = GetParam();
  TrialOutcome outcome =
      c.end == kExit ? exited(c.status, readOutputFixture(c.file)) : signaled(c.status, readOutputFixture(c.file));
  const FailureSignature s = classify(outcome);
  EXPECT_EQ(familyName(s.family), familyName(c.family));
  EXPECT_EQ(s.op, c.op);
  if (c.message_is_prefix)
    EXPECT_EQ(s.message.substr(0, c.message.size()), c.message) << s.message;
  else
    EXPECT_EQ(s.message, c.message);
  EXPECT_EQ(s.signal_name, c.end == kSignal ? signalName(c.status) : "");
}

std::string fixtureTestName(const ::testing::TestParamInfo<FixtureCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(FailureSignature, FixtureTest, ::testing::ValuesIn(kFixtureCases), fixtureTestName);

// The same scripts and C++ program run with PyTorch 2.13 from pip (and the
// LibTorch its wheel carries): capture.sh VENV/bin/python torch213. 2.13
// words some errors differently (an int32 target: "expected target dtype to
// be Long or Byte, but got Int"; half addmm now runs on the CPU and is not
// captured) and adds torch.compile's errors: a graph break under
// fullgraph=True, a backend that raises, Inductor without a C++ compiler
// (compile-error, the stage as the operator), a shape error met by Dynamo's
// fake tensors (logged by torch's logging before Dynamo raises its own), and
// a bad target inside an Inductor kernel (whose path holds a content hash).
const std::vector<FixtureCase> kTorch213Cases = {
    {"torch213/py_cross_entropy_target4.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"torch213/py_chained_exception.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"torch213/py_linear_mat1_mat2.txt", kExit, 1, F::ValueError, "",
     "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"},
    {"torch213/py_scalar_type_long_int.txt", kExit, 1, F::ValueError, "nll_loss",
     "expected target dtype to be Long or Byte, but got Int"},
    {"torch213/py_batch_size_mismatch.txt", kExit, 1, F::ValueError, "cross_entropy",
     "Expected input batch_size (2) to match target batch_size (3)."},
    {"torch213/py_embedding_index.txt", kExit, 1, F::IndexError, "embedding", "index out of range in self"},
    {"torch213/py_view_shape_invalid.txt", kExit, 1, F::ValueError, "",
     "shape '[4, 2]' is invalid for input of size 6"},
    {"torch213/py_script_cross_entropy.txt", kExit, 1, F::IndexError, "cross_entropy", "Target 4 is out of bounds."},
    {"torch213/py_cpu_oom.txt", kExit, 1, F::OutOfMemory, "", kCpuOom},
    {"torch213/py_sparse_view_not_implemented.txt", kExit, 1, F::OpUnavailable, "view",
     "Could not run 'aten::view' with arguments from the 'SparseCPU' backend. This could be", true},
    {"torch213/py_typeerror_cat.txt", kExit, 1, F::ValueError, "",
     "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"},
    {"torch213/py_file_not_found_tmp.txt", kExit, 1, F::RuntimeError, "",
     "[Errno 2] No such file or directory: '<tmp>/batch.pt'"},
    {"torch213/py_jit_load_unknown_op.txt", kExit, 1, F::OpUnavailable, "frobnicate",
     "Unknown builtin op: aten::frobnicate."},
    {"torch213/py_segfault.txt", kSignal, kSigsegv, F::Signal, "", ""},
    {"torch213/py_segfault_faulthandler.txt", kSignal, kSigsegv, F::Signal, "",
     "Fatal Python error: Segmentation fault"},
    {"torch213/cpp_nll_loss_terminate.txt", kSignal, kSigabrt, F::IndexError, "nll_loss", "Target 4 is out of bounds."},
    {"torch213/cpp_script_cross_entropy_terminate.txt", kSignal, kSigabrt, F::IndexError, "cross_entropy",
     "Target 4 is out of bounds."},
    {"torch213/cpp_jit_load_unknown_op_terminate.txt", kSignal, kSigabrt, F::OpUnavailable, "frobnicate",
     "Unknown builtin op: aten::frobnicate."},
    {"torch213/cpp_cpu_oom_terminate.txt", kSignal, kSigabrt, F::OutOfMemory, "", kCpuOom},
    {"torch213/py_compile_unsupported.txt", kExit, 1, F::CompileError, "dynamo", "Data-dependent branching"},
    {"torch213/py_compile_backend.txt", kExit, 1, F::CompileError, "my_backend",
     "RuntimeError: my_backend cannot lower aten.mul"},
    {"torch213/py_compile_inductor_no_compiler.txt", kExit, 1, F::CompileError, "inductor",
     "InvalidCxxCompiler: No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, '/usr/bin/false')"},
    {"torch213/py_compile_fake_shape.txt", kExit, 1, F::ValueError, "",
     "a and b must have same reduction dim, but got [2, 3] X [4, 5]."},
    {"torch213/py_compile_target4.txt", kExit, 1, F::IndexError, "",
     "kernel, <tmp>/<hash>.main.cpp:?, index out of bounds: 0 <= tmp18 < 4L"},
    {"torch213/py_compile_bounds_serial.txt", kExit, 1, F::IndexError, "",
     "kernel, <tmp>/<hash>.main.cpp:?, index out of bounds: 0 <= tmp7 < 4L"},
    {"torch213/py_compile_bounds_openmp.txt", kSignal, kSigabrt, F::IndexError, "",
     "kernel, <tmp>/<hash>.main.cpp:?, index out of bounds: 0 <= tmp7 < 4L"},
};

INSTANTIATE_TEST_SUITE_P(FailureSignatureTorch213, FixtureTest, ::testing::ValuesIn(kTorch213Cases), fixtureTestName);

// Where both versions ran the same script, they fall in the same family and
// name the same operator.
TEST(FailureSignatureFixtures, BothVersionsAgreeOnFamilyAndOperator) {
  for (const FixtureCase& c213 : kTorch213Cases) {
    const std::string name = c213.file.substr(std::string("torch213/").size());
    const auto c113 =
        std::find_if(kFixtureCases.begin(), kFixtureCases.end(), [&](const FixtureCase& c) { return c.file == name; });
    if (c113 == kFixtureCases.end()) continue;
    EXPECT_EQ(familyName(c113->family), familyName(c213.family)) << name;
    EXPECT_EQ(c113->op, c213.op) << name;
  }
}

TEST(FailureSignatureFixtures, ClassifyTextReadsALogAlone) {
  const FailureSignature s = classifyText(readOutputFixture("cpp_nll_loss_terminate.txt"));
  EXPECT_EQ(s.family, FailureFamily::IndexError);
  EXPECT_EQ(s.summary(), "index-error in nll_loss: Target 4 is out of bounds.");
  EXPECT_EQ(classifyText("epoch 1 loss 0.31\nepoch 2 loss 0.29\n").family, FailureFamily::None);
  EXPECT_EQ(classifyText("").family, FailureFamily::None);
}

// ------------------------------------------------------------ first error wins

TEST(FailureSignatureFirstError, ChainedPythonExceptionKeepsTheFirst) {
  const FailureSignature s = classify(exited(1, readOutputFixture("py_chained_exception.txt")));
  EXPECT_EQ(s.message, "Target 4 is out of bounds.");
  EXPECT_EQ(s.message.find("checkpoint"), std::string::npos);
}

TEST(FailureSignatureFirstError, CascadeAfterDeviceAssertDoesNotWin) {
  // The cascade ends in a c10::Error from c10_cuda_check_implementation.
  const FailureSignature s = classify(exited(1, readOutputFixture("doc_cuda_device_assert_cascade.txt")));
  EXPECT_EQ(s.family, FailureFamily::DeviceAssert);
  EXPECT_EQ(s.op, "nll_loss");
}

TEST(FailureSignatureFirstError, EarlierBareErrorBeatsLaterTraceback) {
  const std::string text =
      "ValueError: bad sample 17\n"
      "Traceback (most recent call last):\n"
      "  File \"x.py\", line 1, in <module>\n"
      "IndexError: Target 4 is out of bounds.\n";
  const FailureSignature s = classify(exited(1, text));
  EXPECT_EQ(s.family, FailureFamily::ValueError);
  EXPECT_EQ(s.message, "bad sample 17");
}

// A line that only mentions a CUDA runtime error's name is no error: the
// traceback after it is the first (a probe's watchdog line was taken for
// the failure, and the wrong sample kept).
TEST(FailureSignatureFirstError, AMentionOfACudaErrorNameIsNotAnError) {
  const auto sig = classify(exited(1,
                                   "health: watchdog armed for cudaErrorIllegalAddress / cudaErrorLaunchFailure\n"
                                   "Traceback (most recent call last):\n  File \"/src/step.py\", line 5, in <module>\n"
                                   "    check(y)\nValueError: label out of range\n"));
  EXPECT_EQ(sig.family, F::ValueError);
  EXPECT_EQ(sig.message, "label out of range");
  EXPECT_EQ(classify(exited(1, "cudaErrorIllegalAddress: an illegal memory access was encountered\n")).message,
            "cudaErrorIllegalAddress: an illegal memory access was encountered");
  EXPECT_EQ(classify(exited(1, "kernel launch failed with cudaErrorLaunchFailure\n")).message,
            "kernel launch failed with cudaErrorLaunchFailure");
}

TEST(FailureSignatureFirstError, StderrIsReadBeforeStdout) {
  FailureSignature s = classify(exited(1, "RuntimeError: from stderr\n", "IndexError: from stdout\n"));
  EXPECT_EQ(s.message, "from stderr");
  s = classify(exited(1, "loading...\n", "IndexError: from stdout\n"));
  EXPECT_EQ(s.family, FailureFamily::IndexError);
  EXPECT_EQ(s.message, "from stdout");
}

TEST(FailureSignatureFirstError, KernelAssertInStdoutNamesTheOperator) {
  // Device printf goes to stdout; the RuntimeError, raised later at .item(), to stderr.
  const FailureSignature s = classify(exited(1, readOutputFixture("doc_cuda_device_assert_stderr.txt"),
                                             readOutputFixture("doc_cuda_device_assert_stdout.txt")));
  EXPECT_EQ(s.family, FailureFamily::DeviceAssert);
  EXPECT_EQ(s.op, "nll_loss");
  EXPECT_EQ(s.message, kNllAssert);
}

TEST(FailureSignatureFirstError, HugeLinesAreSafe) {
  // A progress bar or a printed tensor on one line must not exhaust std::regex's stack.
  const std::string text =
      std::string(300000, 'x') + "\nRuntimeError: " + std::string(300000, '7') + "\nIndexError: later\n";
  const FailureSignature s = classify(exited(1, text));
  EXPECT_EQ(s.family, FailureFamily::RuntimeError);
  EXPECT_EQ(messageShape(s.message).substr(0, 1), "#");
}

TEST(FailureSignatureFirstError, WarningsAreNotErrors) {
  const std::string text =
      "/usr/lib/python3/dist-packages/torch/nn/modules/loss.py:536: UserWarning: Using a target size "
      "that is different to the input size.\n"
      "  return F.mse_loss(input, target, reduction=self.reduction)\n";
  EXPECT_EQ(classify(exited(2, text)).family, FailureFamily::NonzeroExit);
}

// ------------------------------------------------------------ exits without text

TEST(FailureSignatureExit, PassWhateverWasPrinted) {
  const FailureSignature s = classify(exited(0, "IndexError: Target 4 is out of bounds.\n"));
  EXPECT_EQ(s.family, FailureFamily::None);
  EXPECT_FALSE(s.failed());
  EXPECT_EQ(s.summary(), "passed");
}

TEST(FailureSignatureExit, TimeoutRegardlessOfText) {
  TrialOutcome outcome = exited(0, "IndexError: Target 4 is out of bounds.\n");
  outcome.end = TrialEnd::TimedOut;
  EXPECT_EQ(classify(outcome).family, FailureFamily::Timeout);
  EXPECT_EQ(classify(outcome).summary(), "timeout");
}

TEST(FailureSignatureExit, NonzeroExitWithoutError) {
  const FailureSignature s = classify(exited(3, "step 12 done\n"));
  EXPECT_EQ(s.family, FailureFamily::NonzeroExit);
  EXPECT_EQ(s.message, "exit status 3");
}

TEST(FailureSignatureExit, SignalWithoutError) {
  const FailureSignature s = classify(signaled(kSigsegv, ""));
  EXPECT_EQ(s.family, FailureFamily::Signal);
  EXPECT_EQ(s.signal_name, "SIGSEGV");
  EXPECT_EQ(s.summary(), "signal SIGSEGV");
}

TEST(FailureSignatureExit, StartFailure) {
  TrialOutcome outcome;
  outcome.end = TrialEnd::FailedToStart;
  outcome.start_error = "execve /nope/python3: No such file or directory";
  const FailureSignature s = classify(outcome);
  EXPECT_EQ(s.family, FailureFamily::StartFailure);
  EXPECT_EQ(s.message, outcome.start_error);
}

// Python's own MemoryError (bare, as `bytearray(1 << 62)` prints it) and
// numpy's, as 2.13's Python printed them here: out of memory, not a runtime error.
TEST(FailureSignatureFamily, PythonMemoryErrorsAreOutOfMemory) {
  const FailureSignature bare = classify(
      exited(1, "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nMemoryError\n"));
  EXPECT_EQ(bare.family, FailureFamily::OutOfMemory) << bare.summary();
  const FailureSignature numpy =
      classify(exited(1,
                      "Traceback (most recent call last):\n  File \"<string>\", line 2, in <module>\n"
                      "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 1.00 TiB for an array with shape "
                      "(1099511627776,) and data type uint8\n"));
  EXPECT_EQ(numpy.family, FailureFamily::OutOfMemory) << numpy.summary();
}

// ------------------------------------------------------------ operators

TEST(FailureSignatureOperator, HarnessLineWins) {
  const std::string text =
      "minrepro-trial: operator: nll_loss\n" + readOutputFixture("cpp_script_cross_entropy_terminate.txt");
  const FailureSignature s = classify(signaled(kSigabrt, text));
  EXPECT_EQ(s.family, FailureFamily::IndexError);
  EXPECT_EQ(s.op, "nll_loss");
  // Also when the trial died without an error message.
  EXPECT_EQ(classify(signaled(kSigsegv, "minrepro-trial: operator: aten::index_select\n")).op, "index_select");
}

TEST(FailureSignatureOperator, HarnessErrorLines) {
  FailureSignature s = classify(signaled(kSigabrt,
                                         "minrepro-trial: operator: nll_loss\n"
                                         "minrepro-trial: c10::IndexError: Target 4 is out of bounds.\n"));
  EXPECT_EQ(s.summary(), "index-error in nll_loss: Target 4 is out of bounds. (killed by SIGABRT)");
  s = classify(exited(2, "minrepro-trial: error: cannot read batch.pt\n"));
  EXPECT_EQ(s.family, FailureFamily::RuntimeError);
  EXPECT_EQ(s.message, "cannot read batch.pt");
}

TEST(FailureSignatureOperator, FromRaisedFromLine) {
  const std::string text =
      "terminate called after throwing an instance of 'c10::IndexError'\n"
      "  what():  Target 7 is out of bounds.\n"
      "Exception raised from nll_loss2d_forward_out_cpu_template at ../aten/src/ATen/native/LossNLL2d.cpp:118 "
      "(most recent call first):\n";
  EXPECT_EQ(classify(signaled(kSigabrt, text)).op, "nll_loss2d");
}

TEST(FailureSignatureOperator, NotFromCheckFunctionsOrMeta) {
  const std::string text =
      "terminate called after throwing an instance of 'c10::Error'\n"
      "  what():  mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)\n"
      "Exception raised from meta at ./aten/src/ATen/native/LinearAlgebra.cpp:73 (most recent call first):\n";
  const FailureSignature s = classify(signaled(kSigabrt, text));
  EXPECT_EQ(s.family, FailureFamily::ValueError);
  EXPECT_EQ(s.op, "");
}

TEST(FailureSignatureOperator, BareLibTorchWhat) {
  // A program that catches c10::Error and prints what() before exiting 1.
  const std::string text =
      "Target 4 is out of bounds.\n"
      "Exception raised from nll_loss_out_frame at ./aten/src/ATen/native/LossNLL.cpp:226 (most recent call "
      "first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x9e (0x7f4da73f19ae in libc10.so)\n";
  const FailureSignature s = classify(exited(1, text));
  EXPECT_EQ(s.op, "nll_loss");
  EXPECT_EQ(s.message, "Target 4 is out of bounds.");
  EXPECT_EQ(s.family, FailureFamily::IndexError);
}

TEST(FailureSignatureOperator, FromMessages) {
  EXPECT_EQ(classifyText("NotImplementedError: Could not run 'aten::add.out' with arguments from the "
                         "'Meta' backend.")
                .op,
            "add");
  EXPECT_EQ(classifyText("RuntimeError: Expected all tensors to be on the same device, but found at least "
                         "two devices, cuda:0 and cpu! (when checking argument for argument index in method "
                         "wrapper_CUDA__index_select)")
                .op,
            "index_select");
  EXPECT_EQ(classifyText("RuntimeError: \"log_softmax_lastdim_kernel_impl\" not implemented for 'Half'").op,
            "log_softmax_lastdim");
}

TEST(FailureSignatureFamily, DeviceAssertTakesPrecedence) {
  // An OOM-looking cascade after the assert does not change the family.
  const std::string text =
      "RuntimeError: CUDA error: device-side assert triggered\n"
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
  EXPECT_EQ(classifyText(text).family, FailureFamily::DeviceAssert);
}

TEST(FailureSignatureFamily, BadAllocIsOutOfMemory) {
  const std::string text =
      "terminate called after throwing an instance of 'std::bad_alloc'\n"
      "  what():  std::bad_alloc\n";
  EXPECT_EQ(classify(signaled(kSigabrt, text)).family, FailureFamily::OutOfMemory);
}

TEST(FailureSignatureFamily, ConvInputWeightTypes) {
  EXPECT_EQ(classifyText("RuntimeError: Input type (torch.FloatTensor) and weight type "
                         "(torch.cuda.FloatTensor) should be the same")
                .family,
            FailureFamily::DeviceMismatch);
  EXPECT_EQ(classifyText("RuntimeError: Input type (torch.cuda.HalfTensor) and weight type "
                         "(torch.cuda.FloatTensor) should be the same")
                .family,
            FailureFamily::ValueError);
}

// ------------------------------------------------------------ normalizing

TEST(FailureSignatureNormalize, KeepsReadableMessages) {
  EXPECT_EQ(normalizeMessage("Target 4 is out of bounds."), "Target 4 is out of bounds.");
  EXPECT_EQ(normalizeMessage("  index out of range\tin   self \n"), "index out of range in self");
}

TEST(FailureSignatureNormalize, AddressesPidsAndLines) {
  EXPECT_EQ(normalizeMessage("bad pointer 0x7f4da73f19ae in libc10.so"), "bad pointer 0x? in libc10.so");
  EXPECT_EQ(normalizeMessage("DataLoader worker (pid 12345) is killed by signal: Segmentation fault."),
            "DataLoader worker (pid ?) is killed by signal: Segmentation fault.");
  EXPECT_EQ(normalizeMessage("worker died (pid=4242)"), "worker died (pid ?)");
  EXPECT_EQ(normalizeMessage("[enforce fail at alloc_cpu.cpp:75] err == 0."),
            "[enforce fail at alloc_cpu.cpp:?] err == 0.");
  EXPECT_EQ(normalizeMessage("failed at /pytorch/aten/src/ATen/native/cuda/Loss.cu:242"),
            "failed at /pytorch/aten/src/ATen/native/cuda/Loss.cu:?");
}

TEST(FailureSignatureNormalize, TempPaths) {
  EXPECT_EQ(normalizeMessage("No such file: '/tmp/tmpab12cd/batch.pt'"), "No such file: '<tmp>/batch.pt'");
  EXPECT_EQ(normalizeMessage("No such file: '/tmp/batch.pt'"), "No such file: '<tmp>/batch.pt'");
  EXPECT_EQ(normalizeMessage("cannot open /home/u/minrepro-work/trial-000123/batch.pt"), "cannot open <tmp>/batch.pt");
  EXPECT_EQ(normalizeMessage("cannot open minrepro-work/trial-000007/tmp/tmpx1/y.pt"), "cannot open <tmp>/y.pt");
  EXPECT_EQ(normalizeMessage("see /home/u/tmp/notes.txt"), "see /home/u/tmp/notes.txt");
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", "/scratch/job77", 1);
  EXPECT_EQ(normalizeMessage("wrote /scratch/job77/run3/x.pt"), "wrote <tmp>/x.pt");
  if (old)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
}

// A torch.compile (inductor, CPU) kernel's bounds check names its generated
// source: the cache directory, the shard (the hash's first two characters),
// the hash and the line all change from one run to the next, the check stays.
TEST(FailureSignatureNormalize, CompilerCachePaths) {
  const std::string first = normalizeMessage(
      "kernel, /tmp/torchinductor_root/p3/cp3dhhil6jlglr2n7ldko2fnoggyd27ip4fy6op6l4wuwubpg4eg.main.cpp:29, "
      "index out of bounds: 0 <= tmp7 < 4L");
  EXPECT_EQ(first, "kernel, <tmp>/<hash>.main.cpp:?, index out of bounds: 0 <= tmp7 < 4L");
  EXPECT_EQ(normalizeMessage("kernel, /home/u/minrepro-work/trials/trial-000012/tmp/torchinductor_u/fk/"
                             "cfkq2yaqbnmafbt5h3ykcstyd4anlvt4eqkmxcwcz6h5yqqx6nnm.main.cpp:31, index out of bounds: "
                             "0 <= tmp7 < 4L"),
            first);
  EXPECT_EQ(normalizeMessage("kernel, /tmp/minrepro-Ab12Cd/torchinductor_u/ep/"
                             "cepq2yaqbnmafbt5h3ykcstyd4anlvt4eqkmxcwcz6h5yqqx6nnm.main.cpp:29, index out of bounds: "
                             "0 <= tmp7 < 4L"),
            first);
  // The cache the trials of a run share, and a temporary directory named like minrepro's own.
  EXPECT_EQ(normalizeMessage("kernel, /tmp/minrepro-torch2-InKk4f/case/minrepro-work/compile-cache/inductor/x3/"
                             "cx36to3e34vpovsbq6meyojjggy527avzwtfmwqtp64qbboo6zag.main.cpp:29, index out of bounds: "
                             "0 <= tmp7 < 4L"),
            first);
  EXPECT_EQ(normalizeMessage("cannot open /tmp/minrepro-torch2-InKk4f/batch.pt"), "cannot open <tmp>/batch.pt");
  // A two-letter directory that holds no hash is a directory like any other.
  EXPECT_EQ(normalizeMessage("cannot open /data/ab/train.pt"), "cannot open /data/ab/train.pt");
}

// The same bounds check of a compiled kernel, raised from a serial kernel
// and thrown inside its OpenMP region (SIGABRT), in kernels of different
// hashes: the abort is the bug a maintainer must see, so by default the
// two are different failures (either way round); failure.ending: any makes
// them one.
TEST(FailureSignatureFixtures, ACompiledKernelsAbortIsNotItsRaisedCheckUnlessEndingAny) {
  const FailureSignature serial = classify(exited(1, readOutputFixture("torch213/py_compile_bounds_serial.txt")));
  const FailureSignature openmp =
      classify(signaled(SIGABRT, readOutputFixture("torch213/py_compile_bounds_openmp.txt")));
  const SignatureMatch abort_then_raise = matchSignature(openmp, serial, {});
  EXPECT_FALSE(abort_then_raise.matches) << serial.summary() << "\n" << openmp.summary();
  EXPECT_EQ(abort_then_raise.why_not,
            "raised or exited, expected killed by SIGABRT (failure.ending: any accepts either)");
  EXPECT_FALSE(matchSignature(serial, openmp, {}).matches);
  EXPECT_NE(openmp.summary().find("(killed by SIGABRT)"), std::string::npos) << openmp.summary();
  ExpectedFailure any;
  any.any_ending = true;
  const SignatureMatch m = matchSignature(serial, openmp, any);
  EXPECT_TRUE(m.matches) << m.why_not << "\n" << serial.summary() << "\n" << openmp.summary();
  EXPECT_TRUE(matchSignature(openmp, serial, any).matches);
}

TEST(FailureSignatureShape, MasksNumbers) {
  EXPECT_EQ(messageShape("Target 4 is out of bounds."), "Target # is out of bounds.");
  EXPECT_EQ(messageShape("Target 4 is out of bounds."), messageShape("Target 17 is out of bounds."));
  EXPECT_EQ(messageShape("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
            "mat# and mat# shapes cannot be multiplied (#x# and #x#)");
  EXPECT_EQ(messageShape("at 0x7f00ab pid 123 alloc_cpu.cpp:75"), "at #x? pid ? alloc_cpu.cpp:?");
  // A list of numbers is one list, however many it names (a message naming
  // the batch's samples names fewer as the batch shrinks).
  EXPECT_EQ(messageShape("non-finite loss nan at step 3; samples [4209, 1244, 77, 5]"),
            messageShape("non-finite loss nan at step 3; samples [1244]"));
  EXPECT_EQ(messageShape("Found invalid box [4.96, 2.51, -3.9, 2.8e-05]"), "Found invalid box [#, ...]");
}

// ------------------------------------------------------------ matching

TEST(FailureSignatureMatch, SameBugWithOtherNumbersMatches) {
  const auto original = signature(F::IndexError, "nll_loss", "Target 4 is out of bounds.");
  const auto candidate = signature(F::IndexError, "nll_loss", "Target 9 is out of bounds.");
  const SignatureMatch m = matchSignature(original, candidate, {});
  EXPECT_TRUE(m.matches) << m.why_not;
  EXPECT_EQ(m.why_not, "");
}

// The same words raised at another line of the user's code are another
// bug; the same line in another copy of the script (a trial's, an
// archive's) is not. A device-side assert is reported wherever the host
// next waits, so its line says nothing; relaxing the operator relaxes it.
TEST(FailureSignatureMatch, TheSameMessageRaisedElsewhereIsAnotherBug) {
  const auto raisedAt = [](const std::string& path, int line) {
    return classify(exited(1, "Traceback (most recent call last):\n  File \"" + path + "\", line " +
                                  std::to_string(line) + ", in <module>\n    h = x.index_select(0, src)\n  File \"" +
                                  "/venv/lib/python3.12/site-packages/torch/functional.py\", line 9, in f\n    "
                                  "return g()\nRuntimeError: index 66039 is out of bounds for dimension 0 with size "
                                  "1077\n"));
  };
  const auto original = raisedAt("/src/gnn/train_gnn.py", 63);
  EXPECT_EQ(original.place, "train_gnn.py:63 in <module>");
  EXPECT_TRUE(matchSignature(original, raisedAt("/tmp/trial-7/train_gnn.py", 63), {}).matches);
  const SignatureMatch m = matchSignature(original, raisedAt("/src/gnn/train_gnn.py", 79), {});
  EXPECT_FALSE(m.matches);
  EXPECT_EQ(m.why_not, "raised at train_gnn.py:79 in <module>, expected train_gnn.py:63 in <module>");
  ExpectedFailure elsewhere;
  elsewhere.require_original_op = false;
  EXPECT_TRUE(matchSignature(original, raisedAt("/src/gnn/train_gnn.py", 79), elsewhere).matches);
  auto assert_original = original, assert_candidate = raisedAt("/src/gnn/train_gnn.py", 79);
  assert_original.family = assert_candidate.family = F::DeviceAssert;
  EXPECT_TRUE(matchSignature(assert_original, assert_candidate, {}).matches);
  // An installed package of the user's that raises deeper down: its line counts too.
  const auto inPackage = [](int line) {
    return classify(exited(1,
                           "Traceback (most recent call last):\n  File \"/src/step.py\", line 9, in <module>\n"
                           "    mylib.check(b)\n  File \"/venv/lib/python3.11/site-packages/mylib.py\", line " +
                               std::to_string(line) +
                               ", in check\n    raise ValueError(v)\n"
                               "ValueError: bad value 7 in batch\n"));
  };
  EXPECT_EQ(inPackage(4).place, "step.py:9 in <module> < mylib.py:4 in check");
  EXPECT_FALSE(matchSignature(inPackage(4), inPackage(6), {}).matches);
  EXPECT_TRUE(matchSignature(inPackage(4), inPackage(4), {}).matches);
  auto unplaced = raisedAt("/src/gnn/train_gnn.py", 79);
  unplaced.place.clear();
  EXPECT_TRUE(matchSignature(original, unplaced, {}).matches);
}

// A handled error's traceback (printed by traceback.print_exc(), the step
// going on) before the one the process died of: the first error is the
// signature, unless the case's failure section pins the other.
TEST(FailureSignatureMatch, AFailureSectionPicksItsErrorAfterAHandledOnesTraceback) {
  const TrialOutcome outcome =
      exited(1,
             "Traceback (most recent call last):\n  File \"/src/step.py\", line 8, in <module>\n    check(x)\n"
             "ValueError: sample has NaN features; skipping it\n"
             "Traceback (most recent call last):\n  File \"/src/step.py\", line 12, in <module>\n    loss(y)\n"
             "IndexError: Target 7 is out of bounds.\n");
  EXPECT_EQ(classify(outcome).family, F::ValueError);
  ExpectedFailure index;
  index.family = F::IndexError;
  const FailureSignature pinned = classifyAs(outcome, index);
  EXPECT_EQ(pinned.family, F::IndexError);
  EXPECT_EQ(pinned.message, "Target 7 is out of bounds.");
  EXPECT_EQ(pinned.place, "step.py:12 in <module>");
  ExpectedFailure by_message;
  by_message.message_regex = "Target \\d+";
  EXPECT_EQ(classifyAs(outcome, by_message).family, F::IndexError);
  EXPECT_EQ(classifyAs(outcome, ExpectedFailure{}).family, F::ValueError);  // nothing pinned: the first
}

TEST(FailureSignatureMatch, OutOfMemoryWithOtherSizesMatches) {
  const auto original = classify(exited(1, readOutputFixture("doc_cuda_oom_expandable.txt")));
  auto candidate = original;
  candidate.message = normalizeMessage(
      "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
      "8.12 MiB is free. Process 977 has 79.14 GiB memory in use.");
  EXPECT_TRUE(matchSignature(original, candidate, {}).matches);
}

TEST(FailureSignatureMatch, DifferentFamilyOrOperatorDoesNot) {
  const auto original = signature(F::IndexError, "nll_loss", "Target 4 is out of bounds.");
  SignatureMatch m = matchSignature(original, signature(F::OutOfMemory, "nll_loss", "Target 4 is out of bounds."), {});
  EXPECT_FALSE(m.matches);
  EXPECT_EQ(m.why_not, "family out-of-memory, expected index-error");
  m = matchSignature(original, signature(F::IndexError, "embedding", "Target 4 is out of bounds."), {});
  EXPECT_FALSE(m.matches);
  EXPECT_EQ(m.why_not, "operator embedding, expected nll_loss");
  m = matchSignature(original, signature(F::IndexError, "nll_loss", "index out of range in self"), {});
  EXPECT_FALSE(m.matches);
  EXPECT_NE(m.why_not.find("different message"), std::string::npos);
}

TEST(FailureSignatureMatch, UnknownOriginalOperatorIsNotCompared) {
  const auto original = signature(F::ValueError, "", "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  const auto candidate = signature(F::ValueError, "addmm", "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)");
  EXPECT_TRUE(matchSignature(original, candidate, {}).matches);
}

TEST(FailureSignatureMatch, UserExpectations) {
  const auto original = signature(F::IndexError, "nll_loss", "Target 4 is out of bounds.");
  const auto other_message = signature(F::IndexError, "nll_loss", "Target -1 is out of bounds (negative).");
  ExpectedFailure expected;
  expected.message_regex = "out of bounds";
  EXPECT_TRUE(matchSignature(original, other_message, expected).matches);
  expected.message_regex = "^Target [0-9]+ is";
  SignatureMatch m = matchSignature(original, other_message, expected);
  EXPECT_FALSE(m.matches);
  EXPECT_EQ(m.why_not, "message does not match /^Target [0-9]+ is/");
  expected.message_regex = "([";
  m = matchSignature(original, original, expected);
  EXPECT_FALSE(m.matches);
  EXPECT_NE(m.why_not.find("invalid"), std::string::npos);
  ExpectedFailure family_only;
  family_only.family = F::ValueError;
  EXPECT_FALSE(matchSignature(original, original, family_only).matches);
  ExpectedFailure op_only;
  op_only.op = "cross_entropy";
  EXPECT_EQ(matchSignature(original, original, op_only).why_not, "operator nll_loss, expected cross_entropy");
}

TEST(FailureSignatureMatch, PassOrStartFailureNeverMatches) {
  const FailureSignature passed;
  SignatureMatch m = matchSignature(passed, passed, {});
  EXPECT_FALSE(m.matches);
  EXPECT_EQ(m.why_not, "the candidate passed");
  const auto start = signature(F::StartFailure, "", "no such file");
  EXPECT_FALSE(matchSignature(start, start, {}).matches);
}

TEST(FailureSignatureMatch, SignalsMustAgree) {
  auto segv = signature(F::Signal, "", "");
  segv.signal_name = "SIGSEGV";
  auto abrt = segv;
  abrt.signal_name = "SIGABRT";
  EXPECT_TRUE(matchSignature(segv, segv, {}).matches);
  EXPECT_EQ(matchSignature(segv, abrt, {}).why_not, "killed by SIGABRT, expected killed by SIGSEGV");
}

// ------------------------------------------------------------ names

TEST(FailureSignatureNames, RoundTrip) {
  for (int i = 0; i <= static_cast<int>(F::StartFailure); ++i) {
    const auto family = static_cast<FailureFamily>(i);
    EXPECT_EQ(parseFamily(familyName(family)), family) << familyName(family);
  }
  EXPECT_EQ(familyName(F::DeviceAssert), "device-assert");
  EXPECT_EQ(parseFamily("Index_Error"), F::IndexError);
  EXPECT_EQ(parseFamily("segfault"), std::nullopt);
}

TEST(FailureSignatureNames, Summary) {
  EXPECT_EQ(signature(F::IndexError, "nll_loss", "Target 4 is out of bounds.").summary(),
            "index-error in nll_loss: Target 4 is out of bounds.");
  EXPECT_EQ(signature(F::ValueError, "", "shape '[4, 2]' is invalid for input of size 6").summary(),
            "value-error: shape '[4, 2]' is invalid for input of size 6");
  auto abrt = signature(F::Signal, "nll_loss", "");
  abrt.signal_name = "SIGABRT";
  EXPECT_EQ(abrt.summary(), "signal SIGABRT in nll_loss");
}

}  // namespace
}  // namespace minrepro

namespace minrepro {
namespace {

// Tracebacks recorded from CPython 3.11, 3.12 and 3.13
// (tests/fixtures/tracebacks/, made by its make_tracebacks.sh): caret and
// tilde lines, exception groups, chained exceptions. The first error is the
// first exception raised (the cause of a chain, a group's first leaf); none
// of the marks around it is ever the message.
std::string readFixture(const std::string& relative) {
  std::ifstream in(std::string(MINREPRO_TEST_FIXTURES) + "/tracebacks/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool onlyMarks(const std::string& message) { return message.find_first_not_of("^~+-|=_ ") == std::string::npos; }

TEST(PythonTracebacks, TheFirstErrorOfEveryRecordedTracebackIsItsMessage) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"assert_error", "runtime-error: shapes differ: Tensor(shape=(2, 3)) vs Tensor(shape=(3, 2))"},
      {"caret_binop", "value-error: unsupported operand type(s) for +: 'int' and 'NoneType'"},
      {"caret_call", "runtime-error: inner failed for x=3"},
      {"caret_index", "index-error: list index out of range"},
      {"chained_cause", "runtime-error: division by zero"},
      {"chained_context", "runtime-error: 'missing'"},
      {"exception_group", "value-error: first bad"},
      {"exception_group_chained", "value-error: bad value"},
      {"exception_group_reraise", "value-error: bad value"},
      {"long_message", "value-error: line one: bad n=-1"},
      {"multiline_caret", "runtime-error: division by zero"},
      {"notes", "value-error: invalid literal for int() with base 10: 'abc'"},
      {"syntax_error", "runtime-error: '(' was never closed"}};
  for (const std::string version : {"py311", "py312", "py313"})
    for (const auto& [name, summary] : expected) {
      const FailureSignature s = classifyText(readFixture(version + "/" + name + ".txt"));
      EXPECT_EQ(s.summary(), summary) << version << "/" << name;
      EXPECT_FALSE(onlyMarks(s.message)) << version << "/" << name;
    }
}

// Carets never become a message: not under a rank's prefix (torchrun's
// "[rank0]:"), nor after an exception line whose message is empty.
TEST(PythonTracebacks, CaretsAreNeverTheMessage) {
  std::string prefixed;
  std::istringstream lines(readFixture("py311/caret_binop.txt"));
  for (std::string line; std::getline(lines, line);) prefixed += "[rank0]:" + line + "\n";
  EXPECT_EQ(classifyText(prefixed).message, "unsupported operand type(s) for +: 'int' and 'NoneType'");
  EXPECT_EQ(classifyText("RuntimeError:\n    ^^^^^^^^^^^^^^^^^^^^^^^^\n    ~~~~^^^^\nreal cause here\n").message,
            "real cause here");
}

}  // namespace
}  // namespace minrepro

namespace minrepro {
namespace {

std::string readNonFinite(const std::string& name) {
  std::ifstream in(std::string(MINREPRO_TEST_FIXTURES) + "/non_finite/" + name + ".txt");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Recorded failures (tests/fixtures/non_finite/README.md): the family says
// non-finite exactly where a NaN or an inf ended the run.
TEST(NonFiniteFamily, RecordedFailuresOfPyTorchNumpyAndThePythonStandardLibrary) {
  for (const std::string name : {"s1_anomaly_log0",
                                 "s2_anomaly_sqrt_neg",
                                 "s3_div_zero_std",
                                 "s4_clip",
                                 "s4b_clip_inf",
                                 "s5_multinomial",
                                 "s5b_multinomial_inf",
                                 "s6_normal_nan",
                                 "s8_np_errstate",
                                 "s8c_np_overflow",
                                 "s9_math",
                                 "s9c_math_exp",
                                 "s9d_int_nan",
                                 "s15_nan_to_num_loss",
                                 "t1b_multinomial_repl_inf",
                                 "t3_svd",
                                 "t6_lstsq",
                                 "t7_histc",
                                 "u1_half_overflow",
                                 "u2_json"})
    EXPECT_EQ(familyName(classifyText(readNonFinite(name)).family), "non-finite") << name;
  for (const std::string name : {"s5d_multinomial_zero", "t1_multinomial_repl", "s7b_bce_out_of_range", "t2_eigh",
                                 "t4_cholesky", "t5_bernoulli", "t9_np_linalg"})
    EXPECT_NE(familyName(classifyText(readNonFinite(name)).family), "non-finite") << name;
}

// The raises of the trainers and loss scalers people use, as their sources
// word them, and what must not be taken for a NaN.
TEST(NonFiniteFamily, TrainersAndLossScalersButNotWordsThatContainNan) {
  for (const std::string text : {
           "FloatingPointError: Loss became infinite or NaN at iteration=41873!",
           "FloatingPointError: gradients are Nan/Inf",
           "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
           "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
           "ValueError: Detected nan and/or inf values in `layer.weight`.",
           "ValueError: Input X contains NaN.",
           "RuntimeError: loss is not finite: nan",
           "AssertionError: Loss is nan, stopping training",
           "ValueError: Train loss contains a NaN.",
           "ValueError: DebugUnderflowOverflow: inf/nan detected, aborting as there is no point running further.",
           // A step's own assert that quotes what it found (a new user's forecaster).
           "AssertionError: non-finite loss nan",
           "AssertionError: expected finite logits, got -inf at 3",
       })
    EXPECT_EQ(familyName(classifyText(text + "\n").family), "non-finite") << text;
  for (const std::string text : {
           "RuntimeError: step took 12000 nanoseconds, more than allowed",
           "ValueError: loss is 0.3512, expected below 0.1",
           "RuntimeError: nan_to_num got an unexpected keyword argument",
           "RuntimeError: infinite loop detected in the scheduler",
           "ValueError: info is missing for sample 3",
           "AssertionError: expected 8 tokens, got 7",
           "AssertionError: nanoseconds out of range",
       })
    EXPECT_NE(familyName(classifyText(text + "\n").family), "non-finite") << text;
}

}  // namespace
}  // namespace minrepro
