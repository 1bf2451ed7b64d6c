// The whole-binary tier's helpers and fixture: the real minrepro run on a
// case, and the bundled examples made once by configs/examples/make_examples.py.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"

namespace minrepro::testing {

namespace fs = std::filesystem;

// The real minrepro: `shrink OPTIONS --config CASE --output ARCHIVE --work-dir WORK`;
// returns its exit status, its output in *output. (Here, not in test_util:
// the benches link test_util without the binaries' paths.) A test that checks
// nothing of the op step gives kNoOpStep: the step is about half of a small
// case's shrink.
inline const std::string kNoOpStep = "--no-op-repro";
inline int shrinkCase(const fs::path& case_file, const fs::path& archive, const fs::path& work_dir, std::string* output,
                      const std::string& options = "") {
  return runCommand(std::string(MINREPRO_BINARY) + " shrink " + options + " --config " + case_file.string() +
                        " --output " + archive.string() + " --work-dir " + work_dir.string(),
                    output);
}

// Extracts an archive with tar into `dir` (created); returns whether tar succeeded.
inline bool extractInto(const fs::path& archive, const fs::path& dir) {
  fs::create_directories(dir);
  return runCommand("tar xzf " + archive.string() + " -C " + dir.string()) == 0;
}

// Evaluates a Python expression on a batch file, loaded as `b` the way an
// archive's tensors must load: torch.load(..., weights_only=True). `S(t)` is
// the tensor's storage on every version (untyped_storage() since 2.0, where
// storage() warns that TypedStorage is deprecated).
inline std::string pyEvalOnBatch(const fs::path& batch, const std::string& expr) {
  std::string output;
  runCommand(python() + " -c \"import torch; b = torch.load('" + batch.string() + "', weights_only=True); " +
                 "S = lambda t: t.untyped_storage() if hasattr(t, 'untyped_storage') else t.storage(); print(" + expr +
                 ")\"",
             &output);
  return output;
}

// The version of the tests' torch (MINREPRO_PYTHON's), e.g. "2.13.0+cpu".
inline std::string torchVersion() {
  std::string output;
  runCommand(python() + " -c \"import torch; print(torch.__version__)\"", &output);
  return output.substr(0, output.find('\n'));
}

// The capture tests' common end (tests/capture/train_loop.py and .cc: 32
// samples, sample 9137 mislabelled at step 4): the captured case shrinks with
// the real minrepro to that one sample. Returns the archive's REPORT.md.
inline std::string expectCapturedCaseShrinksToTheMislabelledSample(const fs::path& case_file, const fs::path& work) {
  std::string output;
  const fs::path archive = work / "repro.tar.gz";
  EXPECT_EQ(shrinkCase(case_file, archive, work / "work", &output, kNoOpStep), 0) << output;
  EXPECT_NE(output.find("reduced 32 -> 1 samples (ids [9137])"), std::string::npos) << output;
  const fs::path dir = work / "extracted";
  EXPECT_TRUE(extractInto(archive, dir));
  const std::string report = readFile(dir / "REPORT.md");
  for (const char* line :
       {"Kept sample ids: [9137]", "- step: 4\n", "- last_completed_step: 3\n", "index-error in nll_loss"})
    EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
  return report;
}

// `minrepro shrink` of a bundled example with its own case.yaml, and what
// it printed. Most end-to-end tests of the archive only read the run of an
// example, so it is made once: under ctest once per ctest run, in the shared
// directory, the first test making it while the others wait on its lock
// (about 25 s saved for each test after the first); outside ctest once per
// test process. Readers copy or extract; nothing writes into it.
struct ShrunkExample {
  int status = -1;     // minrepro's exit status
  std::string output;  // its stdout and stderr
  fs::path archive;    // --output
  fs::path examples;   // the directory of the examples it was run on
};

inline ShrunkExample shrunkExample(const std::string& name) {
  fs::path root = sharedTestData();
  if (root.empty()) {
    static TempDir own("minrepro-shrunk");  // removed at exit
    root = own.path();
    if (!fs::exists(root / "examples")) {
      EXPECT_EQ(makeBundledExamples(root / "examples"), "");
    }
  }
  const fs::path dir = root / "shrunk" / name;
  fs::create_directories(root / "shrunk");
  const int lock = ::open((root / "shrunk" / (name + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  EXPECT_GE(lock, 0) << "the lock of " << dir;
  if (lock >= 0) ::flock(lock, LOCK_EX);
  ShrunkExample run{-1, "", dir / "repro.tar.gz", root / "examples"};
  if (!fs::exists(dir / "status")) {  // written last: a finished run
    fs::remove_all(dir);
    fs::create_directories(dir);
    run.status = shrinkCase(root / "examples" / name / "case.yaml", run.archive, dir / "work", &run.output);
    writeFile(dir / "output", run.output);
    writeFile(dir / "status", std::to_string(run.status));
  } else {
    run.output = readFile(dir / "output");
    run.status = std::stoi(readFile(dir / "status"));
  }
  if (lock >= 0) ::close(lock);
  return run;
}

class ExampleCases : public ::testing::Test {
 protected:
  // The bundled examples, made once per test binary run.
  static void SetUpTestSuite() {
    examples_ = new TempDir("minrepro-examples");
    ASSERT_EQ(makeBundledExamples(examples_->path()), "");
  }
  static void TearDownTestSuite() {
    delete examples_;
    examples_ = nullptr;
  }
  static fs::path example(const std::string& name) { return examples_->path() / name; }

  int shrink(const fs::path& case_file, const fs::path& archive, std::string* output, const std::string& options = "") {
    return testing::shrinkCase(case_file, archive, work_.path() / "work", output, options);
  }
  // Extracts with tar into an empty directory.
  fs::path extract(const fs::path& archive) {
    const fs::path out = work_.path() / "extracted";
    EXPECT_TRUE(testing::extractInto(archive, out));
    return out;
  }
  // Evaluates a Python expression on the extracted batch.
  std::string pyBatch(const fs::path& dir, const std::string& expr) { return pyEvalOnBatch(dir / "batch.pt", expr); }

  static inline TempDir* examples_ = nullptr;
  TempDir work_{"minrepro-e2e"};
};

}  // namespace minrepro::testing
