// Small helpers shared by the tests.
#pragma once

#include <filesystem>
#include <string>

namespace minrepro::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "minrepro-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string readFile(const std::filesystem::path& file);
void writeFile(const std::filesystem::path& file, const std::string& text);

// Runs a command through /bin/sh, returning its exit status; output goes to *output.
int runCommand(const std::string& command, std::string* output = nullptr);

// The Python with PyTorch: $MINREPRO_PYTHON, else the one this build's
// trials run with.
std::string python();

// The program a test runs, given its path in this build: that path, or, when
// $MINREPRO_TEST_PROGRAMS names another build directory of these sources,
// the same program there. scripts/run-tests.sh checks the programs built
// against the second torch so, with this one test binary and that torch's
// Python, instead of compiling every test again against that torch (about
// four minutes of CI's). The pointer stays valid for the whole run.
const char* programUnderTest(const char* path_in_this_build);
#define MINREPRO_BINARY ::minrepro::testing::programUnderTest(MINREPRO_BUILT_BINARY)
#define MINREPRO_TRIAL_BINARY ::minrepro::testing::programUnderTest(MINREPRO_BUILT_TRIAL_BINARY)
#define MINREPRO_SLURM_JOB_BINARY ::minrepro::testing::programUnderTest(MINREPRO_BUILT_SLURM_JOB_BINARY)
#define MINREPRO_TRAIN_LOOP_BINARY ::minrepro::testing::programUnderTest(MINREPRO_BUILT_TRAIN_LOOP_BINARY)
// Whether the programs are another build's (built against another torch).
bool programsOfAnotherBuild();

// What the tests of one ctest run share ($MINREPRO_TEST_SHARED, made fresh by
// the fixture test shared_test_data_setup, tests/CMakeLists.txt): the cases
// each generator below makes, made once, and runs of the bundled examples
// made on first use (tests/e2e_fixture.h). Empty when a test runs outside
// ctest; the helpers then make their own.
std::filesystem::path sharedTestData();

// The cases a generator script makes (`generator` is its path in the source
// tree: configs/examples/make_examples.py, tests/fixtures/fidelity/make_cases.py,
// tests/fixtures/op_cases/make_cases.py) in `dest`: a copy of the ones ctest
// made for the run, under the name of the generator's directory, else made
// here. Returns "" or, when they could not be made, why.
std::string makeCases(const std::string& generator, const std::filesystem::path& dest);
inline std::string makeBundledExamples(const std::filesystem::path& dest) {
  return makeCases("configs/examples/make_examples.py", dest);
}

// The class4 example's batch cut to 8 samples and the bad one (a short
// shrink), saved as `batch` with `python()`. Returns "" or what went wrong.
std::string saveSmallClass4Batch(const std::filesystem::path& examples, const std::filesystem::path& batch);

}  // namespace minrepro::testing
