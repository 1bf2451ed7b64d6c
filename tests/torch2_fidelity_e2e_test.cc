// Whole-binary tier: PyTorch 2.x as people run it (#29), on real processes,
// and a forked search's result that fails only in the fork server.
// A DataLoader whose workers share tensors (a Unix socket under TMPDIR, in a
// work directory over 100 bytes deep), and a torch.compile step whose
// generated kernel's bounds check names a cache path that changes with the
// batch's shape (each candidate compiles a kernel of its own hash), with
// the compiler's caches shared between trials.
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

class Torch2Fidelity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::torchVersion().rfind("1.", 0) == 0) GTEST_SKIP() << "PyTorch 2.x only (torch.compile)";
  }
  // The case make_NAME_case.py writes, in its own directory.
  fs::path makeCase(const std::string& name) {
    const fs::path dir = work_.path() / name;
    std::string out;
    EXPECT_EQ(runCommand(testing::python() + " " + MINREPRO_SOURCE_DIR + "/tests/fixtures/torch2/make_" + name +
                             "_case.py " + dir.string(),
                         &out),
              0)
        << out;
    return dir;
  }
  // shrink with the case's own work directory.
  int shrink(const fs::path& dir, std::string* out) {
    return runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + (dir / "case.yaml").string() +
                          " --output " + (work_.path() / "repro.tar.gz").string(),
                      out);
  }
  testing::TempDir work_{"minrepro-torch2"};
};

TEST_F(Torch2Fidelity, ADataLoaderWhoseWorkersShareTensorsRunsAsInAShell) {
  const fs::path dir = makeCase("workers");
  std::string out;
  ASSERT_EQ(shrink(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "reduced 24 -> 1 samples (ids [9013])")) << out;
  EXPECT_FALSE(has(out, "timed out")) << out;
  EXPECT_FALSE(has(out, "AF_UNIX")) << out;
}

TEST_F(Torch2Fidelity, ACompiledKernelsBoundsCheckIsOneFailureWhateverItsCachePath) {
  const fs::path dir = makeCase("compile");
  std::string out;
  ASSERT_EQ(shrink(dir, &out), 0) << out;
  EXPECT_TRUE(has(out, "original reproduces: index-error: kernel, <tmp>/<hash>.main.cpp:?, index out of bounds"))
      << out;
  EXPECT_TRUE(has(out, "reduced 2 -> 1 samples (ids [701])")) << out;
  EXPECT_FALSE(has(out, "found a different failure")) << out;
  const fs::path extracted = work_.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work_.path() / "repro.tar.gz", extracted));
  EXPECT_TRUE(has(readFile(extracted / "REPORT.md"), "- torch.compile's caches: shared between trials"))
      << readFile(extracted / "REPORT.md");
  // The trials compiled into the run's shared cache, not each into its own.
  EXPECT_TRUE(fs::exists(dir / "minrepro-work" / "compile-cache" / "inductor"));
}

// A failure that a fork server's children show and plain processes do not
// (tests/fixtures/server_state: a module the server preloaded knows it was
// imported in another process). The forked search converges on that
// sample; its final confirmation, a plain process, passes. Instead of an
// archive that does not reproduce (exit 6), the search runs again from the
// original with plain processes only and ends at the sample that fails
// everywhere.
TEST(ForkedResult, ThatFailsOnlyForkedIsSearchedAgainInPlainProcesses) {
  testing::TempDir work("minrepro-forked-result");
  std::string out;
  ASSERT_EQ(runCommand(testing::python() + " " + MINREPRO_SOURCE_DIR + "/tests/fixtures/server_state/make_case.py " +
                           (work.path() / "case").string(),
                       &out),
            0)
      << out;
  ASSERT_EQ(
      runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " +
                     (work.path() / "case/case.yaml").string() + " --output " + (work.path() / "repro.tar.gz").string(),
                 &out),
      0)
      << out;
  // The self-check is the confirmation: its plain runs of the forked result passed.
  EXPECT_TRUE(has(out, "the minimal case of the forked trials did not fail again in the self-check's plain processes"))
      << out;
  EXPECT_TRUE(has(out, "minrepro: reduced 8 -> 1 samples (ids [102])")) << out;
  EXPECT_TRUE(has(out, "the archive reproduced on its own in 3 of 3 runs")) << out;
  const fs::path extracted = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", extracted));
  EXPECT_TRUE(has(readFile(extracted / "REPORT.md"),
                  "so the search ran again from the original with plain processes "
                  "only"))
      << readFile(extracted / "REPORT.md");
}

// Three views (stride 3) into one packed buffer, and a model that reads the
// whole buffer behind its input (as_strided from offset 0), under forked
// trials: every candidate, forked or from a file, keeps the buffer one
// storage cut by whole records, so samples and values shrink and the
// archive's batch holds the one record, its views still sharing it.
TEST(SharedStorage, ViewsOfOneBufferShrinkByWholeRecordsAndStayOneStorage) {
  testing::TempDir work("minrepro-shared-views");
  const fs::path dir = work.path() / "case";
  std::string out;
  ASSERT_EQ(runCommand(testing::python() + " " + MINREPRO_SOURCE_DIR +
                           "/tests/fixtures/torch2/make_shared_views_case.py " + dir.string(),
                       &out),
            0)
      << out;
  ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + (dir / "case.yaml").string() +
                           " --output " + (work.path() / "repro.tar.gz").string(),
                       &out),
            0)
      << out;
  EXPECT_TRUE(has(out, "trial processes: forked children of a fork server")) << out;
  EXPECT_TRUE(has(out, "reduced 16 -> 1 samples (ids [5011])")) << out;
  EXPECT_TRUE(has(out, "1 sample x 0 branches on x 1 non-trivial value")) << out;
  EXPECT_FALSE(has(out, "did not fail again")) << out;
  EXPECT_TRUE(has(out, "the archive reproduced on its own in 3 of 3 runs")) << out;
  const fs::path extracted = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", extracted));
  ASSERT_EQ(runCommand(testing::python() + " -c \"import torch; b = torch.load('" + (extracted / "batch.pt").string() +
                           "'); s = lambda t: getattr(t, 'untyped_storage', t.storage)(); "
                           "print([(k, b[k].tolist(), b[k].stride(), b[k].storage_offset(), s(b[k]).nbytes(), "
                           "s(b[k]).data_ptr() == s(b['a']).data_ptr()) for k in 'abc'])\"",
                       &out),
            0)
      << out;
  EXPECT_TRUE(has(out,
                  "[('a', [0.0], (3,), 0, 12, True), ('b', [0.0], (3,), 1, 12, True), "
                  "('c', [7.0], (3,), 2, 12, True)]"))
      << out;
}

}  // namespace
}  // namespace minrepro
