// minrepro verify: real archives made by minrepro shrink from the bundled
// examples, fixes applied to them, and hostile archives; plus small
// hand-made archives for the run-level rules (fresh processes, diagnostic
// variables removed, reproduction rate).
#include "commands/verify.h"
#include "core/process/sandbox.h"
#include "engine/archive/seal.h"
#include "engine/archive/self_check.h"
#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <set>

#include "engine/archive/minimal_batch_contrast.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::runCommand;

std::string minrepro() { return MINREPRO_BINARY; }

int verifyStatus(const fs::path& archive, const std::string& flags, std::string* output) {
  return runCommand(minrepro() + " verify " + archive.string() + " " + flags + " 2>&1", output);
}

// ------------------------------------------------------------ real archives

class VerifyExamples : public ::testing::Test {
 protected:
  // The example's archive, made by the real minrepro shrink (once per ctest
  // run: tests/e2e_fixture.h).
  static fs::path archive(const std::string& example) {
    const testing::ShrunkExample run = testing::shrunkExample(example);
    EXPECT_EQ(run.status, 0) << run.output;
    return run.archive;
  }

  // A copy of `source` whose batch.pt (and, with `neighbours_too`, every
  // neighbours/*.pt) was changed by the Python statement `edit` (on the
  // dict `b`), packed again the way a user would with tar.
  fs::path withBatchEdit(const fs::path& source, const std::string& name, const std::string& edit,
                         bool neighbours_too = false) {
    const fs::path dir = work_.path() / name;
    fs::create_directories(dir);
    std::string output;
    EXPECT_EQ(runCommand("tar xzf " + source.string() + " -C " + dir.string(), &output), 0) << output;
    testing::writeFile(work_.path() / (name + "-edit.py"),
                       "import glob, torch\nfor f in ['batch.pt'] + (sorted(glob.glob('neighbours/*.pt')) if " +
                           std::string(neighbours_too ? "True" : "False") +
                           " else []):\n"
                           "    b = torch.load(f)\n    " +
                           edit + "\n    torch.save(b, f)\n");
    EXPECT_EQ(runCommand("cd " + dir.string() + " && " + python() + " " + (work_.path() / (name + "-edit.py")).string(),
                         &output),
              0)
        << output;
    const fs::path out = work_.path() / (name + ".tar.gz");
    EXPECT_EQ(runCommand("tar czf " + out.string() + " -C " + dir.string() + " .", &output), 0) << output;
    return out;
  }

  testing::TempDir work_{"minrepro-verify"};
};

TEST_F(VerifyExamples, Class4ReproducesInEveryFreshRun) {
  std::string out;
  ASSERT_EQ(verifyStatus(archive("class4"), "", &out), 0) << out;
  EXPECT_NE(out.find("recorded failure: index-error in nll_loss: Target 4 is out of bounds."), std::string::npos)
      << out;
  EXPECT_NE(out.find("run 3/3: reproduced: index-error"), std::string::npos) << out;
  EXPECT_NE(out.find("reproduced in 3 of 3 runs (100%)"), std::string::npos) << out;
}

TEST_F(VerifyExamples, PairAndCommandArchivesReproduceToo) {
  for (const char* example : {"pair", "command"}) {
    std::string out;
    EXPECT_EQ(verifyStatus(archive(example), "--runs 2", &out), 0) << example << "\n" << out;
    EXPECT_NE(out.find("reproduced in 2 of 2 runs (100%)"), std::string::npos) << out;
  }
}

TEST_F(VerifyExamples, ArchiveRecordsTheSignatureAndTheExpectedCount) {
  const auto entries = readTarGz(archive("class4"));
  const ArchiveEntry* sig = nullptr;
  for (const auto& e : entries)
    if (e.name == "signature.txt") sig = &e;
  ASSERT_NE(sig, nullptr);
  const Manifest m = parseManifest(sig->contents, "signature.txt");
  EXPECT_EQ(m.signature.family, FailureFamily::IndexError);
  EXPECT_EQ(m.signature.message, "Target 4 is out of bounds.");
  EXPECT_FALSE(m.compare_operator);  // LibTorch's nll_loss vs Python's cross_entropy
  EXPECT_EQ(m.processed, 1);
}

TEST_F(VerifyExamples, FixedMappingPassesAndNoLongerReproduces) {
  // The fix (the mapping of class 4) applied to every batch of the archive.
  const fs::path fixed = withBatchEdit(archive("class4"), "fixed", "b['target'][b['target'] == 4] = 3", true);
  std::string out;
  EXPECT_EQ(verifyStatus(fixed, "--expect pass", &out), 0) << out;
  EXPECT_NE(out.find("passed: processed 1 of 1 expected samples"), std::string::npos) << out;
  EXPECT_NE(out.find("passed in 3 of 3 runs (100%)"), std::string::npos) << out;
  EXPECT_NE(out.find("neighbour plus_one (ids [10313, 10314]): passed: processed 2 of 2 expected samples"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("neighbour last_batch (ids [10511]): passed: processed"), std::string::npos) << out;
  EXPECT_NE(out.find("neighbour not made: shortest, longest: the case declares no length tensor"), std::string::npos)
      << out;
  EXPECT_NE(out.find("neighbours passed: 2 of 2"), std::string::npos) << out;
  EXPECT_EQ(verifyStatus(fixed, "--runs 1", &out), 1) << out;
  EXPECT_NE(out.find("reproduced in 0 of 1 runs (0%)"), std::string::npos) << out;
}

TEST_F(VerifyExamples, FixOfTheMinimalBatchAloneFailsOnTheNeighbour) {
  // Only batch.pt fixed: plus_one still holds the target 4.
  const fs::path partial = withBatchEdit(archive("class4"), "partial", "b['target'][b['target'] == 4] = 3");
  std::string out;
  EXPECT_EQ(verifyStatus(partial, "--expect pass --runs 1", &out), 1) << out;
  EXPECT_NE(out.find("run 1/1: passed: processed 1 of 1 expected samples"), std::string::npos) << out;
  EXPECT_NE(out.find("neighbour plus_one (ids [10313, 10314]): still fails: index-error"), std::string::npos) << out;
  EXPECT_NE(out.find("neighbour last_batch (ids [10511]): passed: processed 0 of 0 expected samples (every target is "
                     "ignore_index"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("neighbours passed: 1 of 2"), std::string::npos) << out;
}

TEST_F(VerifyExamples, ArchiveCarriesTheNeighbourBatchesWithTheirIdsAndCounts) {
  const fs::path source = archive("class4");
  const auto entries = readTarGz(source);
  const ArchiveEntry* sig = nullptr;
  std::set<std::string> names;
  for (const auto& e : entries) {
    names.insert(e.name);
    if (e.name == "signature.txt") sig = &e;
  }
  ASSERT_NE(sig, nullptr);
  EXPECT_TRUE(names.count("neighbours/plus_one.pt"));
  EXPECT_TRUE(names.count("neighbours/last_batch.pt"));
  const Manifest m = parseManifest(sig->contents, "signature.txt");
  ASSERT_EQ(m.neighbours.size(), 2u) << sig->contents;
  EXPECT_EQ(m.neighbours[0].name, "plus_one");
  EXPECT_EQ(m.neighbours[0].ids, (std::vector<std::int64_t>{10313, 10314}));
  EXPECT_EQ(m.neighbours[1].name, "last_batch");
  EXPECT_EQ(m.neighbours[1].ids, (std::vector<std::int64_t>{10511}));
  EXPECT_EQ(m.neighbours_skipped, (std::vector<std::string>{"shortest, longest: the case declares no length tensor"}));
  // The files hold those samples, and the recorded counts are theirs.
  const fs::path dir = work_.path() / "listed";
  fs::create_directories(dir);
  std::string out;
  ASSERT_EQ(runCommand("tar xzf " + source.string() + " -C " + dir.string(), &out), 0) << out;
  for (const auto& n : m.neighbours) {
    ASSERT_EQ(runCommand("cd " + dir.string() + " && " + python() + " -c \"import torch; b = torch.load('" + n.file +
                             "'); print(b['sample_id'].tolist(), int((b['target'] != -100).sum()))\"",
                         &out),
              0)
        << out;
    std::string ids;
    for (std::size_t i = 0; i < n.ids.size(); ++i) ids += (i ? ", " : "") + std::to_string(n.ids[i]);
    ASSERT_TRUE(n.processed.has_value());
    EXPECT_EQ(out, "[" + ids + "] " + std::to_string(*n.processed) + "\n") << n.name;
  }
  // repro.py takes a neighbour's path: plus_one holds the bad sample too.
  EXPECT_EQ(runCommand("cd /tmp && " + python() + " " + (dir / "repro.py").string() + " " +
                           (dir / "neighbours" / "last_batch.pt").string() + " 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("minrepro-result: processed=" + std::to_string(*m.neighbours[1].processed)), std::string::npos)
      << out;
}

// repro.cpp with LibTorch alone (no minrepro, no Python): built with the
// archive's CMakeLists.txt, it fails with the c10 error (about 30 s to build).
TEST_F(VerifyExamples, ReproCppBuildsWithLibTorchAloneAndFailsTheSameWay) {
  const fs::path dir = work_.path() / "cpp";
  fs::create_directories(dir);
  std::string out;
  ASSERT_EQ(runCommand("tar xzf " + archive("class4").string() + " -C " + dir.string(), &out), 0) << out;
  ASSERT_TRUE(fs::exists(dir / "repro.cpp"));
  ASSERT_EQ(runCommand("cd " + dir.string() + " && cmake -S . -B b > /dev/null && cmake --build b 2>&1", &out), 0)
      << out;
  // From another directory: the files are found beside repro.cpp. It ends as
  // the trial did, by SIGABRT after the c10 error (the shell reports 128 + 6).
  EXPECT_EQ(runCommand("cd / && ulimit -c 0 && " + (dir / "b" / "repro").string() + " 2>&1", &out), 128 + SIGABRT)
      << out;
  EXPECT_NE(out.find("c10::IndexError: Target 4 is out of bounds."), std::string::npos) << out;
  EXPECT_NE(out.find("target: Long shape [1]"), std::string::npos) << out;
  // A batch without the bad sample runs through and prints the result line.
  EXPECT_EQ(runCommand("cd " + dir.string() + " && b/repro neighbours/last_batch.pt 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("minrepro-result: processed="), std::string::npos) << out;
}

TEST_F(VerifyExamples, ReportSaysWhatSetsTheMinimalBatchApart) {
  std::string report;
  for (const auto& e : readTarGz(archive("class4")))
    if (e.name == "REPORT.md") report = e.contents;
  EXPECT_NE(report.find("### What sets the minimal batch apart\n\n"
                        "The kept samples as the original batch held them, against the samples that were cut (the "
                        "values above are the minimal batch's, after the values pass made what the failure does not "
                        "need trivial).\n\n"
                        "- `target`: kept values [4]; values seen in the other 511 samples: -100, 0..3 "
                        "(4 only in the kept samples)\n"
                        "- Last batch: no: the kept samples are at positions [313] of 0..511 in the original, not its "
                        "last 1\n"
                        "- Sample ids: [10313]\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("- `neighbours/plus_one.pt`: sample ids [10313, 10314], a correct run processes "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("- not made: shortest, longest: the case declares no length tensor"), std::string::npos)
      << report;
}

TEST_F(VerifyExamples, FixThatDropsTheSampleDoesNotPass) {
  const fs::path dropped = withBatchEdit(archive("class4"), "dropped", "b['target'][b['target'] == 4] = -100");
  std::string out;
  EXPECT_EQ(verifyStatus(dropped, "--expect pass --runs 1", &out), 1) << out;
  EXPECT_NE(out.find("wrong result: processed 0 of 1 expected samples"), std::string::npos) << out;
}

TEST_F(VerifyExamples, UnfixedArchiveDoesNotPass) {
  std::string out;
  EXPECT_EQ(verifyStatus(archive("class4"), "--expect pass --runs 1", &out), 1) << out;
  EXPECT_NE(out.find("still fails: index-error"), std::string::npos) << out;
}

// A trial command's archive records no sample count: after a fix its runs
// are judged by their exit status (#28; a fix in the user's own code runs
// with --code, tests/own_loop_e2e_test.cc). Unfixed, it still fails.
TEST_F(VerifyExamples, CommandArchiveIsJudgedByItsExitStatusAfterAFix) {
  std::string out;
  EXPECT_EQ(verifyStatus(archive("command"), "--expect pass --runs 1", &out), 1) << out;
  EXPECT_NE(out.find("run 1/1: still fails: index-error"), std::string::npos) << out;
  EXPECT_NE(out.find("records no sample count to check"), std::string::npos) << out;  // the neighbour that passes
}

// ------------------------------------------------------------ hand-made archives

const std::string kSignature =
    "family: index-error\noperator: nll_loss\ncompare-operator: no\nmessage: Target 4 is out of bounds.\nprocessed: "
    "1\n";

// repro.py that fails as recorded unless told otherwise by `condition`
// (Python, true to pass instead).
fs::path makeArchive(const fs::path& dir, const std::string& condition) {
  const std::string repro =
      "import os, sys\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
      "if " +
      condition +
      ":\n    print('minrepro-result: processed=1 loss=0.5')\n    sys.exit(0)\n"
      "raise IndexError('Target 4 is out of bounds.')\n";
  const fs::path out = dir / "repro.tar.gz";
  writeTarGz(out, {{"repro.py", repro, true}, {"signature.txt", kSignature}});
  return out;
}

TEST(Verify, DiagnosticVariablesAreRemovedFromEveryRun) {
  testing::TempDir dir;
  std::string condition;
  for (const auto& name : diagnosticVariables())
    condition += (condition.empty() ? "" : " or ") + ("'" + name + "' in os.environ");
  const fs::path archive = makeArchive(dir.path(), condition);
  std::string out;
  EXPECT_EQ(
      runCommand("CUDA_LAUNCH_BLOCKING=1 AMD_SERIALIZE_KERNEL=3 HIP_LAUNCH_BLOCKING=1 TORCH_SHOW_CPP_STACKTRACES=1 "
                 "PYTORCH_NO_CUDA_MEMORY_CACHING=1 " +
                     minrepro() + " verify --runs 2 " + archive.string() + " 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("reproduced in 2 of 2 runs (100%)"), std::string::npos) << out;
}

TEST(Verify, ReportsTheRateOfAFlakyReproducer) {
  testing::TempDir dir;
  // Counts its runs in a file beside it: passes on the 2nd of 3.
  const fs::path archive = makeArchive(
      dir.path(), "open(os.path.join(HERE, 'n'), 'a').write('x') and len(open(os.path.join(HERE, 'n')).read()) == 2");
  std::string out;
  EXPECT_EQ(verifyStatus(archive, "--runs 3", &out), 1) << out;
  EXPECT_NE(out.find("run 2/3: did not reproduce: the run passed (exit status 0)"), std::string::npos) << out;
  EXPECT_NE(out.find("reproduced in 2 of 3 runs (66%)"), std::string::npos) << out;
}

TEST(Verify, ExitZeroWithoutTheResultLineIsNotAPass) {
  testing::TempDir dir;
  const fs::path out_archive = dir.path() / "repro.tar.gz";
  writeTarGz(out_archive, {{"repro.py", "print('loss 0.5')\n", true}, {"signature.txt", kSignature}});
  std::string out;
  EXPECT_EQ(verifyStatus(out_archive, "--expect pass --runs 1", &out), 1) << out;
  EXPECT_NE(out.find("printed no 'minrepro-result: processed=N' line"), std::string::npos) << out;
}

TEST(Verify, ArchivesThatAreNotReproducersAreBadInput) {
  testing::TempDir dir;
  std::string out;
  EXPECT_EQ(verifyStatus(dir.path() / "missing.tar.gz", "", &out), 2) << out;
  EXPECT_NE(out.find("no such archive"), std::string::npos) << out;
  fs::create_directory(dir.path() / "extracted");  // a new user's report: "no such archive" for a directory
  EXPECT_EQ(verifyStatus(dir.path() / "extracted", "", &out), 2) << out;
  EXPECT_NE(out.find("extracted: a directory, not an archive; give the repro.tar.gz"), std::string::npos) << out;
  writeTarGz(dir.path() / "old.tar.gz", {{"repro.py", "raise SystemExit(1)\n", true}});
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "", &out), 2) << out;
  EXPECT_NE(out.find("no signature.txt"), std::string::npos) << out;
  writeTarGz(dir.path() / "bad.tar.gz", {{"repro.py", "", true}, {"signature.txt", "family: nonsense\n"}});
  EXPECT_EQ(verifyStatus(dir.path() / "bad.tar.gz", "", &out), 2) << out;
  EXPECT_NE(out.find("signature.txt:1: unknown family 'nonsense'"), std::string::npos) << out;
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "--runs 0", &out), 2) << out;
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "--expect maybe", &out), 2) << out;
}

// A signature.txt past 1 MiB is refused before it is read (probe 27: a
// 900 MB message, 925 KB gzipped, took verify to 4.7 GB).
TEST(Verify, AnOversizedSignatureIsRefusedUnread) {
  testing::TempDir dir;
  testing::writeFile(dir.path() / "signature.txt", "family: index-error\nmessage: " + std::string(2 << 20, 'A') + "\n");
  try {
    readManifestFile(dir.path() / "signature.txt", "x:signature.txt");
    ADD_FAILURE() << "read";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes, where minrepro writes a few KB: refused"), std::string::npos)
        << e.what();
  }
  testing::writeFile(dir.path() / "signature.txt", "family: index-error\nmessage: Target 4 is out of bounds.\n");
  EXPECT_EQ(readManifestFile(dir.path() / "signature.txt", "x").signature.message, "Target 4 is out of bounds.");
}

TEST(Verify, ManifestRoundTrips) {
  Manifest m;
  m.signature.family = FailureFamily::DeviceAssert;
  m.signature.op = "nll_loss";
  m.signature.message = "k: Assertion `t >= 0 && t < n_classes` failed.";
  m.compare_operator = true;
  m.processed = 7;
  m.op_repro = "op/repro_op.py";
  const Manifest back = parseManifest(renderManifest(m), "x");
  EXPECT_EQ(back.op_repro, "op/repro_op.py");
  // The op-level reproducer is a path inside the archive, never outside it.
  for (const char* outside : {"op-repro: /etc/passwd\n", "op-repro: ../x.py\n", "op-repro:\n"})
    EXPECT_THROW(parseManifest(std::string("family: index-error\n") + outside, "x"), BadInputError) << outside;
  EXPECT_EQ(back.signature.family, m.signature.family);
  EXPECT_EQ(back.signature.op, m.signature.op);
  EXPECT_EQ(back.signature.message, m.signature.message);
  // A recorded message of a megabyte (a changed archive: verify normalized
  // it for 72 s, deaf to Ctrl-C; probe 24) is read as its first 16 KiB.
  EXPECT_EQ(parseManifest("family: index-error\nmessage: " + std::string(1 << 20, 'a') + "\n", "x").signature.message,
            std::string(16 * 1024, 'a'));
  EXPECT_TRUE(back.compare_operator);
  EXPECT_EQ(back.processed, 7);
  EXPECT_THROW(parseManifest("family: index-error\nprocessed: -1\n", "x"), BadInputError);
  EXPECT_THROW(parseManifest("operator: x\n", "x"), BadInputError);
  m.trial_timeout_s = 0.5;
  EXPECT_EQ(parseManifest(renderManifest(m), "x").trial_timeout_s, 0.5);
  for (const char* bad : {"0", "-1", "nan", "1e9", "4s"})
    EXPECT_THROW(parseManifest(std::string("family: timeout\ntrial-timeout: ") + bad + "\n", "x"), BadInputError)
        << bad;
}

TEST(Neighbours, PlanTakesTheNextSampleAndTheLastSlice) {
  const NeighbourPlan plan = planNeighbours(512, {313});
  ASSERT_EQ(plan.cases.size(), 2u);
  EXPECT_EQ(plan.cases[0].name, "plus_one");
  EXPECT_EQ(plan.cases[0].file, "neighbours/plus_one.pt");
  EXPECT_EQ(plan.cases[0].samples, (std::vector<std::int64_t>{313, 314}));
  EXPECT_EQ(plan.cases[1].name, "last_batch");
  EXPECT_EQ(plan.cases[1].samples, (std::vector<std::int64_t>{511}));
  EXPECT_EQ(plan.skipped, (std::vector<std::string>{"shortest, longest: the case declares no length tensor"}));
  // At the end of the batch the next sample wraps to the first one not kept.
  const NeighbourPlan end = planNeighbours(5, {0, 3, 4});
  EXPECT_EQ(end.cases[0].samples, (std::vector<std::int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(end.cases[1].samples, (std::vector<std::int64_t>{2, 3, 4}));
  // Nothing left to add.
  const NeighbourPlan all = planNeighbours(2, {0, 1});
  ASSERT_EQ(all.cases.size(), 1u);
  EXPECT_EQ(all.cases[0].name, "last_batch");
  EXPECT_EQ(all.skipped.front(), "plus_one: the minimal batch holds every sample of the original");
  // With lengths: the shortest and the longest entries, alone.
  const std::vector<std::int64_t> lengths{5, 2, 9, 2};
  const NeighbourPlan withLengths = planNeighbours(4, {2}, &lengths);
  ASSERT_EQ(withLengths.cases.size(), 4u);
  EXPECT_EQ(withLengths.cases[1].samples, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(withLengths.cases[2].samples, (std::vector<std::int64_t>{2}));
  EXPECT_TRUE(withLengths.skipped.empty());
}

TEST(Neighbours, ManifestRoundTripsNeighbours) {
  Manifest m;
  m.signature.family = FailureFamily::IndexError;
  m.processed = 1;
  m.neighbours.push_back({"plus_one", "neighbours/plus_one.pt", {}, {10313, 10314}, 2});
  m.neighbours.push_back({"last_batch", "neighbours/last_batch.pt", {}, {-7}, std::nullopt});
  m.neighbours_skipped = {"shortest, longest: the case declares no length tensor"};
  const Manifest back = parseManifest(renderManifest(m), "x");
  ASSERT_EQ(back.neighbours.size(), 2u);
  EXPECT_EQ(back.neighbours[0].file, "neighbours/plus_one.pt");
  EXPECT_EQ(back.neighbours[0].ids, (std::vector<std::int64_t>{10313, 10314}));
  EXPECT_EQ(back.neighbours[0].processed, 2);
  EXPECT_EQ(back.neighbours[1].ids, (std::vector<std::int64_t>{-7}));
  EXPECT_FALSE(back.neighbours[1].processed.has_value());
  EXPECT_EQ(back.neighbours_skipped, m.neighbours_skipped);
  EXPECT_THROW(parseManifest("family: index-error\nneighbour: plus_one\n", "x"), BadInputError);
  EXPECT_THROW(parseManifest("family: index-error\nneighbour: a b ids=1,x\n", "x"), BadInputError);
}

// A TMPDIR that is a file or missing is named, exit 4 (it was an internal
// error, exit 1, which CI reads as "did not reproduce"; probe 31).
TEST(Verify, AnUnusableTmpdirIsNamedWithExit4) {
  testing::TempDir dir;
  writeTarGz(dir.path() / "r.tar.gz", {{"repro.py", "raise SystemExit(1)\n", true}, {"signature.txt", kSignature}});
  testing::writeFile(dir.path() / "afile", "x");
  for (const auto& [tmpdir, said] : std::vector<std::pair<fs::path, std::string>>{
           {dir.path() / "afile", "is not a directory"}, {dir.path() / "missing", "does not exist"}}) {
    std::string out;
    EXPECT_EQ(runCommand("TMPDIR=" + tmpdir.string() + " " + minrepro() + " verify " +
                             (dir.path() / "r.tar.gz").string() + " 2>&1",
                         &out),
              4)
        << out;
    EXPECT_NE(out.find("TMPDIR=" + tmpdir.string() + " " + said), std::string::npos) << out;
  }
}

TEST(Verify, NeighbourNamedButMissingFromTheArchiveIsBadInput) {
  testing::TempDir dir;
  writeTarGz(dir.path() / "r.tar.gz",
             {{"repro.py", "raise SystemExit(1)\n", true},
              {"signature.txt", kSignature + "neighbour: plus_one neighbours/p.pt processed=2 ids=1,2\n"}});
  std::string out;
  EXPECT_EQ(verifyStatus(dir.path() / "r.tar.gz", "--expect pass", &out), 2) << out;
  EXPECT_NE(out.find("names the neighbour batch 'neighbours/p.pt', which the archive lacks"), std::string::npos) << out;
}

TEST(Apart, ValueSetsAndTheLastBatch) {
  EXPECT_EQ(formatValueSet({-100, 0, 1, 2, 3}), "-100, 0..3");
  EXPECT_EQ(formatValueSet({1, 2, 5}), "1, 2, 5");
  EXPECT_EQ(formatValueSet({}), "none");
  EXPECT_EQ(formatValueSet({0, 2, 4, 6}, 2), "0, 2, ... (4 distinct values in [0, 6])");
  // Six samples; the last two kept: a last incomplete batch.
  const auto lines = describeApart(6, {4, 5}, {14, 15}, {{"len", {3, 3, 7, 3, 9, 0}}, {"short", {1, 2}}});
  ASSERT_EQ(lines.size(), 3u);  // "short" has not one value per sample: left out
  EXPECT_EQ(lines[0],
            "`len`: kept values [9, 0]; values seen in the other 4 samples: 3, 7 (0, 9 only in the kept samples)");
  EXPECT_EQ(lines[1],
            "Last batch: yes: the kept samples are the original's last 2 (what a last incomplete batch of "
            "this size would hold)");
  EXPECT_EQ(lines[2], "Sample ids: [14, 15]");
  const auto shared = describeApart(3, {0}, {7}, {{"t", {1, 1, 2}}});
  EXPECT_EQ(shared[0], "`t`: kept values [1]; values seen in the other 2 samples: 1, 2");
  EXPECT_EQ(shared[1], "Last batch: no: the kept samples are at positions [0] of 0..2 in the original, not its last 1");
  // A length inside the range that many other samples spread over is
  // chance, not what sets the kept sample apart (a new user's mask length
  // 22 among 21 and 23); one past that range, and any value among few, are.
  std::vector<std::int64_t> lengths{6, 8, 11, 13, 15, 18, 21, 23, 22, 29};
  EXPECT_EQ(describeApart(10, {8}, {8}, {{"len", lengths}})[0],
            "`len`: kept values [22]; values seen in the other 9 samples: 6, 8, 11, 13, 15, 18, 21, 23, 29");
  lengths[8] = 40;
  EXPECT_EQ(describeApart(10, {8}, {8}, {{"len", lengths}})[0],
            "`len`: kept values [40]; values seen in the other 9 samples: 6, 8, 11, 13, 15, 18, 21, 23, 29 (40 only in "
            "the kept samples)");
  // Nothing removed: every sample is "the last ones", which tells nothing.
  EXPECT_EQ(describeApart(3, {0, 1, 2}, {7, 8, 9}, {})[0],
            "Last batch: not told: every sample of the original was kept");
  // A field of per-sample records, k values per sample (a new user's
  // detection targets: the label 5 of image 2 was in no line of the report).
  SampleValues labels{"[1][*].labels", {3, 0, 1, 3, 0, 5, 2, 4}, 1, {0, 0, 1, 2, 2, 2, 3, 3}};
  EXPECT_EQ(describeApart(4, {2}, {2}, {labels})[0],
            "`[1][*].labels` (in each sample's entry): the kept samples hold 5, outside the range 0..4 that the other "
            "3 samples span");
}

// A run that prints a token or a URL's password in its message: verify's
// line quoting it (and regress's row, the same detail) scrubs it, as
// shrink's own lines do; before, CI logs kept it raw (probe 25).
TEST(Verify, ARunsMessageIsQuotedWithItsSecretsScrubbed) {
  testing::TempDir dir;
  const std::string token = "ghp_R7cXk2LmQ9pV4sT8wY1zB6nD3fH5jK0aE2gX";
  writeTarGz(
      dir.path() / "r.tar.gz",
      {{"repro.py", "raise RuntimeError('cannot fetch https://alice:Pa55w0rdZ9xq@db.example.com with " + token + "')\n",
        true},
       {"signature.txt", kSignature}});
  std::string out;
  EXPECT_EQ(verifyStatus(dir.path() / "r.tar.gz", "--runs 1 --sandbox off", &out), 1) << out;
  EXPECT_NE(out.find("did not reproduce"), std::string::npos) << out;
  EXPECT_EQ(out.find(token), std::string::npos) << out;
  EXPECT_EQ(out.find("Pa55w0rdZ9xq"), std::string::npos) << out;
  EXPECT_NE(out.find("<secret:github-pat>"), std::string::npos) << out;
}

// --code with an archive made elsewhere copies in only source files of the
// archive's names: one naming ".git-credentials" and ".ssh/id_rsa" had
// `--code ~` copy the user's into the run, which printed them (probe 25).
TEST(VerifyHostile, CodeFromTheUsersDirectoryIsOnlySourceForAStrangersArchive) {
  testing::TempDir dir, home;
  testing::writeFile(home.path() / ".git-credentials", "https://bob:CodeDirSecretXYZ123@github.com\n");
  fs::create_directories(home.path() / ".ssh");
  testing::writeFile(home.path() / ".ssh" / "id_rsa", "FAKE_SSH_KEY_abc\n");
  testing::writeFile(home.path() / "step.py", "raise IndexError('Target 4 is out of bounds.')\n");
  // A source file's name that is a link out of DIR, to a file the sandbox hides (probe 26).
  fs::create_symlink(home.path() / ".git-credentials", home.path() / "linked.py");
  // A directory of DIR that is a link to one outside (probe 28: to ~/.ssh).
  testing::TempDir elsewhere;
  testing::writeFile(elsewhere.path() / "agent.sh", "echo SSH_SECRET_FROM_ELSEWHERE\n");
  fs::create_directory_symlink(elsewhere.path(), home.path() / "sshlink");
  // A source file's name that is a hard link to a file outside (probe 30).
  testing::writeFile(elsewhere.path() / "hardsecret.txt", "HARD_LINKED_SECRET\n");
  fs::create_hard_link(elsewhere.path() / "hardsecret.txt", home.path() / "hard.py");
  // A bundled source file whose name is a token: the line naming it scrubs it (probe 30).
  const std::string token_name = "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh.py";
  testing::writeFile(home.path() / token_name, "pass\n");
  writeTarGz(dir.path() / "r.tar.gz",
             {{"repro.py",
               "import runpy, pathlib\n"
               "here = pathlib.Path(__file__).parent\n"
               "seen = ''.join((here / p).read_text() for p in ('.git-credentials', '.ssh/id_rsa'))\n"
               "print('SEEN:' + seen.replace(chr(10), ' '))\n"
               "runpy.run_path(str(here / 'step.py'))\n",
               true},
              {"step.py", "pass\n"},
              {"linked.py", "pass\n"},
              {"hard.py", "print('HARD:' + open(__file__).read())\n"},
              {token_name, "pass\n"},
              {"sshlink/agent.sh", "true\n"},
              {".git-credentials", "placeholder\n"},
              {".ssh/id_rsa", "placeholder\n"},
              {"signature.txt", kSignature}});
  std::string out;
  EXPECT_EQ(verifyStatus(dir.path() / "r.tar.gz", "--runs 1 --sandbox off --code " + home.path().string(), &out), 0)
      << out;
  EXPECT_NE(out.find("replaces: step.py, <secret:"), std::string::npos) << out;
  EXPECT_EQ(out.find("hard.py"), std::string::npos) << out;
  EXPECT_EQ(out.find("AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"), std::string::npos) << out;
  EXPECT_EQ(out.find("CodeDirSecretXYZ123"), std::string::npos) << out;
  EXPECT_EQ(out.find("FAKE_SSH_KEY"), std::string::npos) << out;
}

// A script from outside the case directory is bundled as
// external/<its directory's name>/...: `--code DIR` from that directory
// itself puts DIR/step.py in its place (a new user's capture archive
// refused `--code .` from the training directory: "holds none of the
// archive's bundled files"), as DIR/external/cap/step.py still does.
TEST(Verify, CodeFromTheScriptsOwnDirectoryReplacesItsExternalCopy) {
  testing::TempDir dir, user;
  const fs::path cap = user.path() / "cap";
  fs::create_directories(cap);
  testing::writeFile(cap / "step.py", "raise IndexError('Target 4 is out of bounds.')\n");
  writeTarGz(dir.path() / "r.tar.gz",
             {{"repro.py",
               "import runpy, pathlib\n"
               "runpy.run_path(str(pathlib.Path(__file__).parent / 'external' / 'cap' / 'step.py'))\n",
               true},
              {"external/cap/step.py", "pass\n"},
              {"signature.txt", kSignature}});
  std::string out;
  EXPECT_EQ(verifyStatus(dir.path() / "r.tar.gz", "--runs 1 --sandbox off --code " + cap.string(), &out), 0) << out;
  EXPECT_NE(out.find("replaces: external/cap/step.py"), std::string::npos) << out;
  EXPECT_EQ(verifyStatus(dir.path() / "r.tar.gz", "--runs 1 --sandbox off --code " + user.path().string(), &out), 2)
      << out;
  EXPECT_NE(out.find("holds none of the archive's bundled files (external/cap/step.py)"), std::string::npos) << out;
}

// ------------------------------------------------------------ hostile archives

// Each archive is made by Python's tarfile, which writes what it is told.
const char* kHostileMaker = R"PY(
import io, sys, tarfile, gzip
out, outside = sys.argv[1], sys.argv[2]
def make(name, *members):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    with gzip.open(f"{out}/{name}.tar.gz", "wb") as f:
        f.write(raw.getvalue())
def entry(name, data=b"x", type=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = type, link
    info.size = len(data) if type == tarfile.REGTYPE else 0
    return info, (data if type == tarfile.REGTYPE else None)
ok = entry("repro.py", b"raise SystemExit(1)\n")
make("absolute", ok, entry(outside + "/pwned"))
make("dotdot", ok, entry("../pwned"))
make("deep-dotdot", ok, entry("sub/../../pwned"))
make("symlink", ok, entry("escape", type=tarfile.SYMTYPE, link=outside), entry("escape/pwned"))
make("hardlink", ok, entry("passwd", type=tarfile.LNKTYPE, link="/etc/passwd"))
dev = tarfile.TarInfo("null"); dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
make("device", ok, (dev, None))
make("fifo", ok, entry("pipe", type=tarfile.FIFOTYPE))
# Probe 25: a name whose newline forged a line of verify's output; a
# 300 KB name printed whole; directories past the entry cap extracted.
make("newline", ok, entry("evil\nfake line: reproduced", type=tarfile.FIFOTYPE))
make("longname", ok, entry("d" * 5000, type=tarfile.FIFOTYPE))
make("manydirs", ok, *[entry("d%05d" % i, type=tarfile.DIRTYPE) for i in range(10001)])
# A header that claims 2 TiB: refused before any data is read.
huge = tarfile.TarInfo("batch.pt"); huge.size = 1 << 41
with gzip.open(f"{out}/huge.tar.gz", "wb") as f:
    f.write(ok[0].tobuf(tarfile.GNU_FORMAT) + ok[1].ljust(512, b"\0") + huge.tobuf(tarfile.GNU_FORMAT) + b"\0" * 4096)
)PY";

struct Hostile {
  std::string name;
  std::string why;  // in the refusal
};

TEST(VerifyHostile, RefusedWithAClearMessageAndNothingWritten) {
  testing::TempDir dir;
  const fs::path made = dir.path() / "made", outside = dir.path() / "outside", tmp = dir.path() / "tmp",
                 cwd = dir.path() / "cwd";
  for (const auto& d : {made, outside, tmp, cwd}) fs::create_directories(d);
  testing::writeFile(made / "maker.py", kHostileMaker);
  std::string out;
  ASSERT_EQ(
      runCommand(python() + " " + (made / "maker.py").string() + " " + made.string() + " " + outside.string(), &out), 0)
      << out;
  const std::vector<Hostile> cases = {{"absolute", "has an absolute path"},
                                      {"dotdot", "climbs out of the archive with '..'"},
                                      {"deep-dotdot", "climbs out"},
                                      {"symlink", "'escape' is a link"},
                                      {"hardlink", "'passwd' is a link"},
                                      {"device", "'null' is a device, fifo or socket"},
                                      {"fifo", "'pipe' is a device"},
                                      {"huge", "'batch.pt' is too large"},
                                      {"newline", "'evil\\nfake line: reproduced' is a device"},
                                      {"longname", "dddd... (5000 bytes)' is a device"},
                                      {"manydirs", "it holds more than 10000 entries"}};
  for (const auto& c : cases) {
    const fs::path archive = made / (c.name + ".tar.gz");
    const int status = runCommand("cd " + cwd.string() + " && TMPDIR=" + tmp.string() + " " + minrepro() + " verify " +
                                      archive.string() + " 2>&1",
                                  &out);
    EXPECT_EQ(status, 2) << c.name << ": " << out;
    EXPECT_NE(out.find("refused: "), std::string::npos) << c.name << ": " << out;
    EXPECT_NE(out.find(c.why), std::string::npos) << c.name << ": " << out;
    EXPECT_NE(out.find("nothing was extracted"), std::string::npos) << c.name << ": " << out;
    EXPECT_TRUE(fs::is_empty(outside)) << c.name;
    EXPECT_TRUE(fs::is_empty(tmp)) << c.name << ": the temp dir was written to";
    EXPECT_TRUE(fs::is_empty(cwd)) << c.name;
    EXPECT_FALSE(fs::exists(dir.path() / "pwned")) << c.name;
  }
}

// An archive of a few MB that expands past the cap is refused (exit 2)
// before it fills the disk, and entries are streamed to disk, never held
// in memory (#14, item 5).
// An archive made elsewhere runs its code in a sandbox (#30.5): a
// booby-trapped repro.py cannot write outside the scratch directory, nor
// reach the network, and the first line of output says what runs and how.
// --sandbox off runs it as it is (the marker appears), and an archive made
// on this machine runs without one.
TEST(VerifyHostile, AnArchiveFromElsewhereRunsInASandbox) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  testing::TempDir dir;
  const fs::path marker = dir.path() / "marker";
  const std::string repro =
      "import socket\n"
      "for where in ['" +
      marker.string() +
      "', '/tmp/minrepro-sandbox-marker']:\n"
      "    try:\n        open(where, 'w').write('pwned')\n    except OSError:\n        pass\n"
      "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError as e:\n    print('net:', e)\n"
      "raise IndexError('Target 4 is out of bounds.')\n";
  const std::string signature = "family: index-error\nmessage: Target 4 is out of bounds.\n";
  const fs::path elsewhere = dir.path() / "elsewhere.tar.gz", here = dir.path() / "here.tar.gz";
  writeTarGz(elsewhere, {{"repro.py", repro, true}, {"signature.txt", signature}});
  std::vector<ArchiveEntry> sealed{{"repro.py", repro, true}, {"signature.txt", signature}};
  sealEntries(sealed);  // as shrink writes every archive: this user's seal
  writeTarGz(here, sealed);
  std::string out;
  EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 " + elsewhere.string() + " 2>&1", &out), 0) << out;
  EXPECT_EQ(
      out.find("verify " + elsewhere.string() +
               ": runs code from the archive (repro.py, op/repro_op.py, its "
               "bundled scripts) in a sandbox, as it was made elsewhere or changed since (bubblewrap: no network, "
               "read-only file system, no capability, only the extracted case and each run's directory writable)"),
      0u)
      << out;
  EXPECT_NE(out.find("reproduced in 1 of 1"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(marker)) << "the sandboxed repro.py wrote outside its scratch directory";
  EXPECT_FALSE(fs::exists("/tmp/minrepro-sandbox-marker"));
  EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 --sandbox off " + elsewhere.string() + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("NOT in a sandbox (--sandbox off): it can do anything this user can"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(marker)) << "--sandbox off runs the archive as it is";
  fs::remove(marker);
  fs::remove("/tmp/minrepro-sandbox-marker");
  EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 " + here.string() + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("without a sandbox: your minrepro made the archive and it is unchanged"), std::string::npos)
      << out;
  fs::remove(marker);
  fs::remove("/tmp/minrepro-sandbox-marker");
  // The same files repacked with a directory entry, which shrink never
  // writes: not as shrink wrote it, so sandboxed (probe 32 found it trusted).
  const fs::path repacked = dir.path() / "repacked.tar.gz";
  ASSERT_EQ(runCommand(testing::python() + " -c \"import tarfile; src = tarfile.open('" + here.string() +
                           "'); out = tarfile.open('" + repacked.string() +
                           "', 'w:gz'); d = tarfile.TarInfo('torch'); d.type = tarfile.DIRTYPE; d.mode = 0o755; "
                           "out.addfile(d); [out.addfile(m, src.extractfile(m)) for m in src.getmembers()]; "
                           "out.close()\" 2>&1",
                       &out),
            0)
      << out;
  EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 " + repacked.string() + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("in a sandbox, as it was made elsewhere or changed since"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(marker)) << out;
  EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 --sandbox on " + here.string() + " 2>&1", &out), 0) << out;
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_EQ(runCommand(minrepro() + " verify --sandbox maybe " + here.string() + " 2>&1", &out), 2) << out;
  EXPECT_NE(out.find("--sandbox must be auto, on or off, found 'maybe'"), std::string::npos) << out;
}

// Ctrl-C (or SIGTERM) during verify: the running repro.py is killed, the
// command ends through its exit map with 130 and says so, and the scratch
// copy of the archive is removed. Before, verify died of the signal itself
// and left the extracted archive in $TMPDIR (probe 20 F4).
// Runs `minrepro verify ARGS... ARCHIVE` with TMPDIR=tmp and its output in
// log, sends `signal` once a run has written a file named `started` (or
// `started-*`) in its directory, and returns how verify ended.
struct Interrupted {
  int status = 0;
  int runs_started = 0;
};
Interrupted interruptVerifyOnceStarted(const fs::path& archive, const fs::path& tmp, const fs::path& log,
                                       std::vector<std::string> args, int signal) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1), ::dup2(fd, 2);
    args.insert(args.begin(), {MINREPRO_BINARY, "verify"});
    args.push_back(archive.string());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(MINREPRO_BINARY, argv.data());
    ::_exit(127);
  }
  const auto started = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& scratch : fs::directory_iterator(tmp, ec))
      for (const auto& f : fs::recursive_directory_iterator(scratch.path(), ec))
        n += f.path().filename().string().rfind("started", 0) == 0;
    return n;
  };
  for (int i = 0; i < 3000 && started() == 0; ++i) ::usleep(20'000);
  Interrupted result;
  result.runs_started = started();
  ::kill(pid, signal);
  ::waitpid(pid, &result.status, 0);
  return result;
}

TEST(VerifyHostile, AnInterruptedVerifyEndsWith130AndLeavesNothingExtracted) {
  testing::TempDir dir;
  const fs::path tmp = dir.path() / "tmp", archive = dir.path() / "slow.tar.gz", log = dir.path() / "out.txt";
  fs::create_directories(tmp);
  writeTarGz(archive, {{"repro.py", "import time\nopen('started', 'w').close()\ntime.sleep(120)\n", true},
                       {"signature.txt", "family: index-error\nmessage: Target 4 is out of bounds.\n"}});
  const Interrupted run = interruptVerifyOnceStarted(archive, tmp, log, {"--runs", "1", "--sandbox", "off"}, SIGINT);
  ASSERT_EQ(run.runs_started, 1) << testing::readFile(log);
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 130) << run.status << ": " << testing::readFile(log);
  EXPECT_NE(testing::readFile(log).find("interrupted: the running repro.py was stopped"), std::string::npos)
      << testing::readFile(log);
  // Its own words, not shrink's "the best case so far is written next" (probe 23).
  EXPECT_NE(testing::readFile(log).find("signal received: ending the running run; no verdict is given"),
            std::string::npos)
      << testing::readFile(log);
  // The killed run has no outcome to judge (it printed "did not reproduce (cancelled)", probe 24).
  EXPECT_NE(testing::readFile(log).find("run 1/1: not judged: stopped by the interruption"), std::string::npos)
      << testing::readFile(log);
  EXPECT_EQ(testing::readFile(log).find("did not reproduce"), std::string::npos) << testing::readFile(log);
  EXPECT_TRUE(fs::is_empty(tmp)) << "the extracted archive was left in TMPDIR";
}

// After a fix, verify --expect pass runs each neighbour batch too. A signal
// during those runs starts no other and gives no neighbour a verdict: it
// started each of a forged list's thousand neighbours, printed "still
// fails ... (cancelled)" for each and grew to gigabytes (probe 30). More
// neighbours than minrepro writes are refused before any run.
TEST(VerifyHostile, AnInterruptedNeighbourRunStartsNoOtherAndJudgesNone) {
  testing::TempDir dir;
  const fs::path tmp = dir.path() / "tmp", archive = dir.path() / "n.tar.gz", log = dir.path() / "out.txt";
  fs::create_directories(tmp);
  std::string signature = "family: index-error\nmessage: Target 4 is out of bounds.\n";
  std::vector<ArchiveEntry> entries{
      {"repro.py",
       "import sys, time\nif len(sys.argv) > 1:\n    open('started-' + sys.argv[1].replace('/', '_'), 'w').close()\n"
       "    time.sleep(120)\npass\n",
       true}};
  for (int i = 0; i < 3; ++i) {
    signature += "neighbour: n" + std::to_string(i) + " neighbours/n" + std::to_string(i) + ".pt ids=1\n";
    entries.push_back({"neighbours/n" + std::to_string(i) + ".pt", "x"});
  }
  entries.push_back({"signature.txt", signature});
  writeTarGz(archive, entries);
  const Interrupted run =
      interruptVerifyOnceStarted(archive, tmp, log, {"--runs", "1", "--sandbox", "off", "--expect", "pass"}, SIGTERM);
  const std::string out = testing::readFile(log);
  ASSERT_EQ(run.runs_started, 1) << out;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 130) << run.status << ": " << out;
  EXPECT_NE(out.find("no verdict is given"), std::string::npos) << out;
  EXPECT_EQ(out.find("neighbour n"), std::string::npos) << out;
  EXPECT_EQ(out.find("still fails"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_empty(tmp)) << "the extracted archive was left in TMPDIR";

  for (int i = 3; i < 17; ++i) signature += "neighbour: n" + std::to_string(i) + " neighbours/n0.pt ids=1\n";
  entries.back() = {"signature.txt", signature};
  writeTarGz(archive, entries);
  std::string refused;
  EXPECT_EQ(verifyStatus(archive, "--expect pass --sandbox off", &refused), 2) << refused;
  EXPECT_NE(refused.find("more than 16 neighbour lines, where minrepro writes at most 4: refused"), std::string::npos)
      << refused;
}

// A stranger's archive reads no key of the session that started verify
// (RHEL and sssd keep Kerberos tickets in the kernel keyring; bubblewrap's
// namespaces hide the user keyring, not the session's): each sandboxed run
// gets an empty session keyring of its own (probe 30 read a planted key).
TEST(VerifyHostile, AStrangersRunReadsNoKeyOfTheSessionKeyring) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  testing::TempDir dir;
  const fs::path archive = dir.path() / "keys.tar.gz", log = dir.path() / "out.txt";
  writeTarGz(archive, {{"repro.py",
                        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                        "kid = libc.syscall(250, 10, -3, b'user', b'minrepro-test-key', 0)\n"
                        "raise IndexError('Target 4 is out of bounds. key ' + ('FOUND' if kid > 0 else 'absent'))\n",
                        true},
                       {"signature.txt", "family: index-error\nmessage: Target 4 is out of bounds.\n"}});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A session keyring of this child's own, holding the key: the test's
    // session is left as it is.
    if (::syscall(SYS_keyctl, 1, nullptr) < 0 ||
        ::syscall(SYS_add_key, "user", "minrepro-test-key", "SECRET", 6, -3 /* the session keyring */) < 0)
      ::_exit(125);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1), ::dup2(fd, 2);
    ::execl(MINREPRO_BINARY, MINREPRO_BINARY, "verify", "--runs", "1", archive.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 125) GTEST_SKIP() << "no kernel keyring here";
  const std::string out = testing::readFile(log);
  EXPECT_NE(out.find("in a sandbox"), std::string::npos) << out;
  EXPECT_NE(out.find("key absent"), std::string::npos) << out;
  EXPECT_EQ(out.find("key FOUND"), std::string::npos) << out;
}

// The trial's environment, which an archive's trial.env sets, is given to
// the program inside the sandbox (bwrap's --setenv), never to bwrap: with
// LD_PRELOAD in it, `compare` loaded an archive's own library into bwrap,
// before the sandbox existed, with this user's rights (probe 20 F1).
class RecordingExecutor : public Executor {
 public:
  TrialSpec seen;
  TrialOutcome run(const TrialSpec& spec) override {
    seen = spec;
    return {};
  }
};

TEST(VerifyHostile, TheArchivesEnvironmentIsSetInsideTheSandboxNeverOnBwrap) {
  testing::TempDir dir;
  TrialSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo \"$MR_SEEN\" \"${MR_GONE:-unset}\""};
  spec.env_set = {{"LD_PRELOAD", (dir.path() / "evil.so").string()}, {"MR_SEEN", "inside"}};
  spec.env_unset = {"MR_GONE"};
  spec.work_dir = dir.path();
  RecordingExecutor recorder;
  setenv("MR_SEEN", "outside", 1);  // a value of this shell's that the run's own replaces
  SandboxedExecutor(recorder, dir.path(), "bwrap").run(spec);
  unsetenv("MR_SEEN");
  EXPECT_TRUE(recorder.seen.env_set.empty()) << "bwrap itself would get them";
  // bwrap itself starts without what the run must not see (probe 26: PID 1's environ held it).
  for (const char* name : {"MR_GONE", "MR_SEEN"})
    EXPECT_NE(std::find(recorder.seen.env_unset.begin(), recorder.seen.env_unset.end(), name),
              recorder.seen.env_unset.end())
        << name;
  const auto& argv = recorder.seen.argv;
  const auto end = std::find(argv.begin(), argv.end(), "--");
  const std::vector<std::string> set_inside = {"--setenv", "LD_PRELOAD"};
  EXPECT_NE(std::search(argv.begin(), end, set_inside.begin(), set_inside.end()), end)
      << "LD_PRELOAD is set by bwrap for the program inside";
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  spec.env_set.erase("LD_PRELOAD");
  LocalExecutor local;
  setenv("MR_GONE", "outside", 1);
  const TrialOutcome out = SandboxedExecutor(local, dir.path(), *findBubblewrap()).run(spec);
  unsetenv("MR_GONE");
  EXPECT_EQ(out.stdout_text, "inside unset\n") << out.stderr_text;
}

// What a stranger's run can reach from the sandbox (probe 21): no
// capability even as root (root's bwrap kept them, and the run remounted /
// writable and wrote anywhere); no write to the scratch directory around
// the extracted archive and its own directory (it planted run-2 as a link
// to a user's directory, and minrepro wrote the next run's output there);
// nothing of the host's /run (a daemon's socket ran its command); none of
// the shell's own variables or tokens; no file past 256 MiB on the user's
// disk (probe 22: 300 MB files, unbounded); neither directory the archive
// key may lie in, whichever XDG_CONFIG_HOME names.
TEST(VerifyHostile, AStrangersRunHasNoCapabilityNoScratchNoHostSocketNoTokenAndNoKey) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  // HOME outside /tmp, which the sandbox would hide whole: what hides its files is the masks.
  testing::TempDir scratch, config, home("/var/tmp/minrepro-home");
  const std::string real_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  fs::create_directories(home.path() / ".aws");
  testing::writeFile(home.path() / ".aws" / "credentials", "aws_secret_access_key = x\n");
  testing::writeFile(home.path() / ".netrc", "machine h login u password p\n");
  fs::create_directories(home.path() / ".config" / "pip");  // probe 23: an index URL's password
  testing::writeFile(home.path() / ".config" / "pip" / "pip.conf", "[global]\nindex-url = https://u:p@i/simple\n");
  testing::writeFile(home.path() / ".bash_history", "export HF_TOKEN=hf_x\n");
  // Probe 27: a shell's start-up file, and a credential a variable points to.
  testing::writeFile(home.path() / ".bashrc", "export WANDB_API_KEY=x\n");
  testing::writeFile(home.path() / "gcp.json", "{\"private_key\": \"x\"}\n");
  fs::create_directories(home.path() / ".config" / "git");  // probe 24: git's second store
  testing::writeFile(home.path() / ".config" / "git" / "credentials", "https://u:p@github.com\n");
  // Probe 30: the Hugging Face token where XDG_CACHE_HOME puts it, and the aliases .bashrc sources.
  fs::create_directories(home.path() / "xdg-cache" / "huggingface");
  testing::writeFile(home.path() / "xdg-cache" / "huggingface" / "token", "hf_x\n");
  testing::writeFile(home.path() / ".bash_aliases", "export HF_TOKEN=hf_x\n");
  const fs::path extracted = scratch.path() / "case", run = scratch.path() / "run-1";
  fs::create_directories(extracted);
  fs::create_directories(run);
  fs::create_directories(config.path() / "minrepro");
  testing::writeFile(config.path() / "minrepro" / "archive.key", "k");
  ASSERT_TRUE(userArchiveKey());  // the key of HOME's directory, made if missing
  const std::string home_key_dir = (fs::path(std::getenv("HOME")) / ".config" / "minrepro").string();
  setenv("HOME", home.path().c_str(), 1);
  TrialSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "grep CapEff /proc/self/status; "
               "ln -s /var/tmp " +
                   (scratch.path() / "run-2").string() +
                   " 2>/dev/null; "
                   "touch " +
                   (extracted / "ok").string() +
                   " ok && echo wrote-own; "
                   "echo run: $(ls -A /run | wc -l); "
                   "echo vars: ${MR_PROBE_FLAG:-unset} ${MR_PROBE_API_TOKEN:-unset} ${MR_GIVEN:-unset}; "
                   // Nor in bwrap's own environment, PID 1's (probe 26).
                   "echo pid1: $(tr '\\0' '\\n' < /proc/1/environ | grep -c MR_PROBE); "
                   "head -c 300000000 /dev/zero > big 2>/dev/null; echo big: $(stat -c %s big); rm big; "
                   "echo credentials: $(cat /etc/shadow " +
                   (home.path() / ".aws/credentials").string() + " " + (home.path() / ".netrc").string() + " " +
                   (home.path() / ".config/pip/pip.conf").string() + " " + (home.path() / ".bash_history").string() +
                   " " + (home.path() / ".config/git/credentials").string() + " " + (home.path() / ".bashrc").string() +
                   " " + (home.path() / "gcp.json").string() + " " +
                   (home.path() / "xdg-cache/huggingface/token").string() + " " +
                   (home.path() / ".bash_aliases").string() + " /etc/shadow-" +
                   " 2>/dev/null | wc -c); "
                   // Each tmpfs has a size (probe 23: /tmp and /dev/shm were half the RAM each).
                   "echo sized: $(df -k --output=size /tmp /dev/shm /run | tail -n +2 | tr -s ' ' | tr '\\n' ' '); "
                   "echo keys: $(cat " +
                   (config.path() / "minrepro").string() + "/* " + home_key_dir + "/* 2>/dev/null | wc -c)"};
  spec.env_set = {{"MR_GIVEN", "given"}};
  spec.work_dir = run;
  setenv("MR_PROBE_FLAG", "4", 1);
  setenv("MR_PROBE_API_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz012345", 1);
  setenv("XDG_CONFIG_HOME", config.path().c_str(), 1);
  setenv("GOOGLE_APPLICATION_CREDENTIALS", (home.path() / "gcp.json").c_str(), 1);
  const char* cache_home = std::getenv("XDG_CACHE_HOME");
  const std::string saved_cache_home = cache_home ? cache_home : "";
  setenv("XDG_CACHE_HOME", (home.path() / "xdg-cache").c_str(), 1);
  LocalExecutor local;
  const TrialOutcome out =
      SandboxedExecutor(local, extracted, *findBubblewrap(), archiveKeyDirectories(), inheritedByArchiveRuns).run(spec);
  unsetenv("MR_PROBE_FLAG");
  unsetenv("MR_PROBE_API_TOKEN");
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
  if (cache_home)
    setenv("XDG_CACHE_HOME", saved_cache_home.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  setenv("HOME", real_home.c_str(), 1);
  EXPECT_EQ(out.stdout_text,
            "CapEff:\t0000000000000000\nwrote-own\nrun: 0\nvars: unset unset given\npid1: 0\nbig: 268435456\n"
            "credentials: 0\nsized: 1048576 1048576 1024\nkeys: 0\n")
      << out.stderr_text;
  // Under /tmp the link went to the sandbox's own tmpfs, elsewhere nowhere.
  EXPECT_FALSE(fs::exists(fs::symlink_status(scratch.path() / "run-2")));
  EXPECT_TRUE(fs::exists(extracted / "ok"));
  EXPECT_TRUE(fs::exists(run / "ok"));
}

// A run that swaps its stdout.txt for a FIFO and its stderr.txt for a link
// to a file of the user's (probe 22): the outcome is read without waiting
// for a writer that never comes (verify and regress hung for ever, deaf to
// Ctrl-C) and without reading through the link.
TEST(VerifyHostile, ARunsOutputSwappedForAFifoOrALinkIsNotWaitedOnNorFollowed) {
  testing::TempDir dir;
  testing::writeFile(dir.path() / "users-file", "precious HF_TOKEN=hf_x\n");
  TrialSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo out; echo err >&2; rm stdout.txt stderr.txt; mkfifo stdout.txt; ln -s " +
                   (dir.path() / "users-file").string() + " stderr.txt; exit 3"};
  spec.work_dir = dir.path() / "run-1";
  LocalExecutor local;
  const TrialOutcome out = local.run(spec);
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_EQ(out.stdout_text, "");
  EXPECT_EQ(out.stderr_text, "");
}

// What is bound from under /tmp comes from this user's own environment and
// programs, never from what a run's environment adds (probe 25: compare set
// an archive's trial.env "PYTHONPATH: /tmp/" and bound the whole host /tmp,
// a tmux socket with it); /tmp itself in any spelling, and a missing entry's
// parent, bind nothing; a program that is no Python environment's is bound
// alone, not the directory it lies in. The user's own existing entry is
// still bound (a PYTHONPATH under /tmp keeps working).
TEST(VerifyHostile, OnlyTheUsersOwnExistingPathsUnderTmpAreBound) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  testing::TempDir dir, scratch;
  ASSERT_EQ(dir.path().string().rfind("/tmp/", 0), 0u) << "the test needs its directory under /tmp";
  testing::writeFile(dir.path() / "hostsecret.txt", "HOSTSECRET\n");
  testing::writeFile(dir.path() / "tool", "#!/bin/sh\ncat \"$1\" 2>/dev/null | wc -c\n");
  fs::permissions(dir.path() / "tool", fs::perms::owner_all);
  const fs::path extracted = scratch.path() / "case", run = scratch.path() / "run-1";
  fs::create_directories(extracted);
  fs::create_directories(run);
  const std::string secret = (dir.path() / "hostsecret.txt").string();
  const auto bytesSeen = [&](const std::map<std::string, std::string>& env_set, const char* own_pythonpath,
                             const std::string& program = "/bin/sh", const std::string& read = "") {
    TrialSpec spec;
    const std::string file = read.empty() ? secret : read;
    spec.argv = program == "/bin/sh" ? std::vector<std::string>{"/bin/sh", "-c", "cat " + file + " 2>/dev/null | wc -c"}
                                     : std::vector<std::string>{program, file};
    spec.env_set = env_set;
    spec.work_dir = run;
    if (own_pythonpath) setenv("PYTHONPATH", own_pythonpath, 1);
    LocalExecutor local;
    const TrialOutcome out = SandboxedExecutor(local, extracted, *findBubblewrap()).run(spec);
    unsetenv("PYTHONPATH");
    return out.stdout_text;
  };
  EXPECT_EQ(bytesSeen({{"PYTHONPATH", dir.path().string()}}, nullptr), "0\n") << "the run's own entry was bound";
  EXPECT_EQ(bytesSeen({{"LD_PRELOAD", secret}}, nullptr), "0\n");
  for (const std::string& tmp : std::vector<std::string>{"/tmp/", "/tmp/.", "/tmp//", dir.path().string() + "/.."}) {
    SCOPED_TRACE(tmp);
    EXPECT_EQ(bytesSeen({}, tmp.c_str()), "0\n") << "/tmp itself was bound";
  }
  EXPECT_EQ(bytesSeen({}, (dir.path() / "missing").c_str()), "0\n") << "a missing entry's parent was bound";
  EXPECT_EQ(bytesSeen({}, nullptr, (dir.path() / "tool").string()), "0\n") << "the program's directory was bound";
  // Through links (probe 26): an entry whose link leads to /tmp itself, and
  // one that passes a link to / on its way to /tmp.
  fs::create_directory_symlink("/", dir.path() / "rootlnk");
  fs::create_directories(dir.path() / "sub");
  fs::create_directory_symlink("../..", dir.path() / "sub" / "up");
  EXPECT_EQ(bytesSeen({}, (dir.path() / "sub" / "up").string().append("/").c_str()), "0\n")
      << "a link to /tmp bound the host's /tmp";
  const fs::path through = dir.path() / "rootlnk" / "tmp";
  EXPECT_EQ(bytesSeen({}, through.c_str(), "/bin/sh", (through / dir.path().filename() / "hostsecret.txt").string()),
            "0\n")
      << "a path through a link to / bound the host's /tmp";
  EXPECT_EQ(bytesSeen({}, dir.path().c_str()), "11\n") << "the user's own PYTHONPATH entry is bound";
}

// A Python in a venv under /tmp (which the sandbox replaces with an empty
// tmpfs) still runs the archive in the sandbox (#43.2): its prefix, its
// real path, the directories its .pth files add (here a torch under /tmp)
// and minrepro's own directory are bound read-only; the
// directory of this user's archive key is not there at all.
TEST(VerifyHostile, AVenvUnderTmpRunsInTheSandbox) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  testing::TempDir dir;
  ASSERT_EQ(dir.path().string().rfind("/tmp/", 0), 0u) << "the test needs its directory under /tmp";
  const fs::path venv = dir.path() / "venv";
  std::string out;
  ASSERT_EQ(runCommand(testing::python() + " -m venv --without-pip " + venv.string() + " 2>&1", &out), 0) << out;
  ASSERT_EQ(
      runCommand(testing::python() + " -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))'",
                 &out),
      0)
      << out;
  const std::string torch_site = out.substr(0, out.find('\n'));
  ASSERT_EQ(runCommand(venv.string() + "/bin/python -c 'import site; print(site.getsitepackages()[0])'", &out), 0)
      << out;
  // The torch the .pth names lies under /tmp too (the path of a link to it):
  // the directories a .pth adds are bound like the prefix, whether it names
  // them as a line or its code adds them (an editable install's finder).
  // Before, the second form gave "No module named 'torch'" in the sandbox.
  const fs::path torch_link = dir.path() / "torch-site";
  fs::create_directory_symlink(torch_site, torch_link);
  const fs::path pth = fs::path(out.substr(0, out.find('\n'))) / "torch-of-the-tests.pth";
  // Nor can it read this user's archive key (an archive that did could seal forgeries).
  ASSERT_TRUE(userArchiveKey());
  const std::string repro = "import torch\ntry:\n    open('" + userArchiveKeyFile().string() +
                            "', 'rb').read()\n    seen = ' and the key'\nexcept OSError:\n    seen = ''\n"
                            "raise IndexError('Target 4 is out of bounds.' + seen)\n";
  const fs::path archive = dir.path() / "elsewhere.tar.gz";
  writeTarGz(archive, {{"repro.py", repro, true},
                       {"signature.txt", "family: index-error\nmessage: Target 4 is out of bounds.\n"}});
  for (const std::string& line : {torch_link.string(), "import sys; sys.path.append('" + torch_link.string() + "')"}) {
    SCOPED_TRACE(line);
    testing::writeFile(pth, line + "\n");
    EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 --sandbox on --python " + venv.string() + "/bin/python " +
                             archive.string() + " 2>&1",
                         &out),
              0)
        << out;
    EXPECT_NE(out.find("reproduced in 1 of 1"), std::string::npos) << out;
  }
}

// The sandbox decision trusts nothing an archive says: a published
// archive's signature.txt (seal and all) kept while repro.py is swapped for
// a payload, or a file added beside it, or a pre-seal archive's made-on
// line copied, runs in the sandbox; the payload writes nothing outside it.
TEST(VerifyHostile, ASealCopiedOntoOtherFilesDoesNotSkipTheSandbox) {
  if (!findBubblewrap()) {
    if (std::getenv("CI")) FAIL() << "bwrap missing: scripts/install-deps.sh installs bubblewrap";
    GTEST_SKIP() << "bwrap is not installed";
  }
  testing::TempDir dir;
  const std::string signature = "family: index-error\nmessage: Target 4 is out of bounds.\n";
  const std::string honest = "raise IndexError('Target 4 is out of bounds.')\n";
  std::vector<ArchiveEntry> published{{"repro.py", honest, true}, {"signature.txt", signature}};
  sealEntries(published);
  ASSERT_NE(published[1].contents.find("seal: hmac-sha256:"), std::string::npos) << published[1].contents;
  const fs::path marker = dir.path() / "payload-ran";
  const std::string payload =
      "try:\n    open('" + marker.string() + "', 'w').write('x')\nexcept OSError:\n    pass\n" + honest;
  const fs::path swapped = dir.path() / "swapped.tar.gz", added = dir.path() / "added.tar.gz",
                 old_line = dir.path() / "old.tar.gz";
  writeTarGz(swapped, {{"repro.py", payload, true}, published[1]});
  writeTarGz(added, {published[0], published[1], {"sitecustomize.py", payload}});
  writeTarGz(old_line, {{"repro.py", payload, true}, {"signature.txt", signature + "made-on: 5f1d2c9a0b7e4d33\n"}});
  for (const fs::path& forged : {swapped, added, old_line}) {
    std::string out;
    EXPECT_EQ(runCommand(minrepro() + " verify --runs 1 " + forged.string() + " 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("in a sandbox, as it was made elsewhere or changed since"), std::string::npos)
        << forged << ": " << out;
    EXPECT_FALSE(fs::exists(marker)) << forged << ": the payload ran outside the sandbox";
  }
  const fs::path set = dir.path() / "checks";
  fs::create_directories(set);
  fs::copy_file(swapped, set / "forged.tar.gz");
  std::string out;
  EXPECT_EQ(runCommand(minrepro() + " regress " + set.string() + " 2>&1", &out), 0) << out;
  EXPECT_FALSE(fs::exists(marker)) << "regress ran the payload outside the sandbox: " << out;
}

TEST(VerifyHostile, ExpansionPastTheCapIsRefusedAndEntriesAreStreamed) {
  testing::TempDir dir;
  const fs::path bomb = dir.path() / "bomb.tar.gz", big = dir.path() / "big.tar.gz", tmp = dir.path() / "tmp";
  fs::create_directories(tmp);
  std::string out;
  ASSERT_EQ(runCommand(python() +
                           " -c \"import io, tarfile\n"
                           "def add(t, name, size):\n"
                           "    info = tarfile.TarInfo(name); info.size = size\n"
                           "    t.addfile(info, io.BytesIO(bytes(size)))\n"
                           "with tarfile.open('" +
                           bomb.string() +
                           "', 'w:gz') as t:\n"
                           "    add(t, 'repro.py', 10)\n"
                           "    for i in range(6): add(t, 'part%d.pt' % i, 16 << 20)\n"
                           "with tarfile.open('" +
                           big.string() +
                           "', 'w:gz') as t:\n"
                           "    add(t, 'batch.pt', 400 << 20)\n\"",
                       &out),
            0)
      << out;
  ASSERT_LT(fs::file_size(bomb), std::uintmax_t{2} << 20);  // 96 MiB of zeros in a small file
  EXPECT_EQ(runCommand("TMPDIR=" + tmp.string() + " " + minrepro() + " verify --max-size 64 " + bomb.string() + " 2>&1",
                       &out),
            2)
      << out;
  EXPECT_NE(out.find("refused: its entries add up to more than 64 MiB"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_empty(tmp)) << "a refused archive left files behind";
  // 10,001 empty entries: no size cap sees them; the entry count does.
  const fs::path many = dir.path() / "many.tar.gz";
  ASSERT_EQ(runCommand(python() +
                           " -c \"import io, tarfile\n"
                           "with tarfile.open('" +
                           many.string() +
                           "', 'w:gz') as t:\n"
                           "    for i in range(10001): t.addfile(tarfile.TarInfo('f%d' % i), io.BytesIO())\n\"",
                       &out),
            0)
      << out;
  EXPECT_EQ(runCommand("TMPDIR=" + tmp.string() + " " + minrepro() + " verify " + many.string() + " 2>&1", &out), 2)
      << out;
  EXPECT_NE(out.find("refused: it holds more than 10000 entries"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_empty(tmp)) << "a refused archive left files behind";
  // 400 MiB in one entry: extracted (then refused: not a reproducer) with
  // minrepro's peak memory within 64 MiB of what it takes for no archive at
  // all (LibTorch's libraries alone are most of it).
  const auto peakKb = [&](const std::string& archive) {
    runCommand(
        "TMPDIR=" + tmp.string() + " /usr/bin/time -f 'peak-kb %M' " + minrepro() + " verify " + archive + " 2>&1",
        &out);
    const auto at = out.find("peak-kb ");
    return at == std::string::npos ? -1L : std::stol(out.substr(at + 8));
  };
  const long baseline = peakKb((dir.path() / "none.tar.gz").string());
  const long streamed = peakKb(big.string());
  EXPECT_NE(out.find("no repro.py in the archive"), std::string::npos) << out;
  ASSERT_GT(baseline, 0);
  EXPECT_LT(streamed, baseline + 64 * 1024) << "baseline " << baseline << " KiB; " << out;
  EXPECT_TRUE(fs::is_empty(tmp));
}

}  // namespace
}  // namespace minrepro
