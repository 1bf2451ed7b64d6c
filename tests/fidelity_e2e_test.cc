// Whole-binary tier: the archive reproduces on its own. Five real failure
// classes (tests/fixtures/fidelity/make_cases.py, each the user's own step
// script as the trial): a script that loads files beside it, a real SIGSEGV,
// strided views into one shared storage read as if contiguous, a trial whose
// culprit fails alone only in a fresh process (a preloaded module's import
// draws from torch's generator), and a torch.multiprocessing job whose
// wrapper hides two different errors. Each must shrink to its one culprit
// sample, and its archive, extracted into an empty directory elsewhere, must
// fail the same way with plain `python3 repro.py` and pass `minrepro verify`.
#include <gtest/gtest.h>

#include <csignal>
#include <regex>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::readFile;
using testing::runCommand;
using testing::TempDir;

class Fidelity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cases_ = new TempDir("minrepro-fidelity");
    ASSERT_EQ(testing::makeCases("tests/fixtures/fidelity/make_cases.py", cases_->path()), "");
  }
  static void TearDownTestSuite() {
    delete cases_;
    cases_ = nullptr;
  }
  static fs::path caseFile(const std::string& name) { return cases_->path() / name / "case.yaml"; }

  // shrink, then the archive extracted into an empty directory that is
  // neither the case's nor the work directory. Without the op step unless
  // `options` is "": these tests check the archive.
  fs::path shrinkAndExtract(const fs::path& case_file, std::string* output, int expected_status = 0,
                            const std::string& options = testing::kNoOpStep) {
    const fs::path archive = work_.path() / "repro.tar.gz";
    EXPECT_EQ(testing::shrinkCase(case_file, archive, work_.path() / "work", output, options), expected_status)
        << *output;
    const fs::path dir = elsewhere_.path() / "repro";
    EXPECT_TRUE(testing::extractInto(archive, dir));
    return dir;
  }
  // shrink of the case in `case_dir` without the op step (the self-check's
  // verdict is the test's subject); its status, its output in *output.
  int shrinkWithoutOpStep(const fs::path& case_dir, std::string* output) {
    return runCommand(std::string(MINREPRO_BINARY) + " shrink --config " + (case_dir / "case.yaml").string() +
                          " --no-op-repro --output " + (work_.path() / "repro.tar.gz").string() + " --work-dir " +
                          (work_.path() / "work").string(),
                      output);
  }
  // Plain `python3 repro.py` from another directory; its status as the shell
  // reports it (no core file of a fatal signal left behind).
  int runRepro(const fs::path& dir, std::string* output) {
    return runCommand("cd / && ulimit -c 0 && " + python() + " " + (dir / "repro.py").string(), output);
  }
  int verify(std::string* output) {
    return runCommand(
        std::string(MINREPRO_BINARY) + " verify " + (work_.path() / "repro.tar.gz").string() + " --runs 2", output);
  }

  static inline TempDir* cases_ = nullptr;
  TempDir work_{"minrepro-fidelity-work"};
  TempDir elsewhere_{"minrepro-fidelity-elsewhere"};
};

TEST_F(Fidelity, FilesTheScriptLoadsFromBesideItselfTravelWithTheArchive) {
  std::string output;
  const fs::path dir = shrinkAndExtract(caseFile("sibling_files"), &output);
  EXPECT_NE(output.find("reduced 32 -> 1 samples (ids [1091])"), std::string::npos) << output;
  EXPECT_NE(output.find("self-check: the archive reproduced on its own in 3 of 3 runs"), std::string::npos) << output;
  for (const char* f : {"trial.py", "model.pt", "labels.json"}) EXPECT_TRUE(fs::exists(dir / f)) << f;
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
  EXPECT_EQ(verify(&repro), 0) << repro;
  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_NE(report.find("bundled (a traced plain run of the minimal case, and trial.files): `trial.py` "),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("`model.pt`"), std::string::npos) << report;
}

// The same case with its script, model and labels in a directory of their
// own, named by an absolute path: they are bundled under external/, the
// command is rewritten, and the archive still reproduces once the
// originals are gone.
TEST_F(Fidelity, ScriptOutsideTheCaseDirectoryIsBundledAndItsPathRewritten) {
  TempDir outside("minrepro-fidelity-code");
  const fs::path code = outside.path() / "code";
  fs::create_directories(code);
  const fs::path src = cases_->path() / "sibling_files";
  for (const char* f : {"trial.py", "model.pt", "labels.json"}) fs::copy_file(src / f, code / f);
  const fs::path case_dir = work_.path() / "case";
  fs::create_directories(case_dir);
  fs::copy_file(src / "batch.pt", case_dir / "batch.pt");
  std::string yaml = readFile(src / "case.yaml");
  const std::string from = "\"{case_dir}/trial.py\"";
  yaml.replace(yaml.find(from), from.size(), "\"" + (code / "trial.py").string() + "\"");
  testing::writeFile(case_dir / "case.yaml", yaml);

  std::string output;
  const fs::path dir = shrinkAndExtract(case_dir / "case.yaml", &output);
  // Under external/, named from their common directory (code/): the
  // machine's path above it is not in the archive.
  const fs::path bundled = dir / "external" / "code";
  for (const char* f : {"trial.py", "model.pt", "labels.json"}) EXPECT_TRUE(fs::exists(bundled / f)) << f << output;
  EXPECT_NE(readFile(dir / "case.yaml").find("{case_dir}/external/code/trial.py"), std::string::npos)
      << readFile(dir / "case.yaml");
  EXPECT_EQ(readFile(dir / "repro.py").find(outside.path().string()), std::string::npos) << readFile(dir / "repro.py");
  fs::remove_all(code);
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
}

// trial.py imports its loss from a package found through PYTHONPATH, in a
// directory outside the case. The archive carries the package and sets
// PYTHONPATH to its copy; the self-check runs without the shell's
// PYTHONPATH, as a maintainer would. (Before, the package was bundled where
// nothing looked for it, and the self-check passed only because it
// inherited the reporter's PYTHONPATH: repro.py failed elsewhere with
// "No module named 'mrlosses'".)
TEST_F(Fidelity, APackageFoundThroughPythonPathTravelsAndIsFoundAgain) {
  TempDir outside("minrepro-fidelity-lib");
  const fs::path lib = outside.path() / "shared-code";
  fs::create_directories(lib / "mrlosses");
  testing::writeFile(lib / "mrlosses" / "__init__.py", "from torch.nn.functional import cross_entropy as loss\n");
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  std::string trial = readFile(case_dir / "trial.py");
  trial.replace(trial.find("import json\n"), 12, "import json\nimport mrlosses\nassert mrlosses.loss\n");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  const fs::path archive = work_.path() / "repro.tar.gz";
  ASSERT_EQ(runCommand("PYTHONPATH=" + lib.string() + " HF_TOKEN=hf_probe0000token1111 " + MINREPRO_BINARY +
                           " shrink --no-op-repro --config " + (case_dir / "case.yaml").string() + " --output " +
                           archive.string() + " --work-dir " + (work_.path() / "work").string(),
                       &output),
            0)
      << output;
  EXPECT_NE(output.find("self-check: the archive reproduced on its own in 3 of 3 runs"), std::string::npos) << output;
  const fs::path dir = elsewhere_.path() / "repro";
  ASSERT_TRUE(testing::extractInto(archive, dir));
  EXPECT_TRUE(fs::exists(dir / "external" / "shared-code" / "mrlosses" / "__init__.py")) << output;
  EXPECT_NE(readFile(dir / "case.yaml").find("PYTHONPATH: \"{case_dir}/external/shared-code\""), std::string::npos)
      << readFile(dir / "case.yaml");
  fs::remove_all(lib);
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
}

// trial.py imports a package from outside the case by a root it adds to
// sys.path itself, as an editable install's finder or .pth does (a new
// user's train.py importing minrepro_capture, installed with pip -e). The
// archive carries the package under the name Python found it by and puts
// that root's copy on PYTHONPATH, which comes first: the self-check's runs
// read no original, and repro.py runs with the originals gone. (Before, the
// copy lay where nothing looked, and the self-check failed, exit 6, naming
// the package's files.)
TEST_F(Fidelity, AnInstalledPackagesSourceTravelsAndIsImportedFromTheCopy) {
  TempDir outside("minrepro-fidelity-lib");
  const fs::path lib = outside.path() / "src";
  fs::create_directories(lib / "mrpkg" / "losses");
  testing::writeFile(lib / "mrpkg" / "__init__.py", "");
  testing::writeFile(lib / "mrpkg" / "losses" / "__init__.py",
                     "from torch.nn.functional import cross_entropy as loss\n");
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  std::string trial = readFile(case_dir / "trial.py");
  trial.replace(trial.find("import json\n"), 12,
                "import json\nimport sys\nsys.path.append(\"" + lib.string() +
                    "\")\nimport mrpkg.losses\nassert mrpkg.losses.loss\n");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  const fs::path archive = work_.path() / "repro.tar.gz";
  ASSERT_EQ(
      runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " + (case_dir / "case.yaml").string() +
                     " --output " + archive.string() + " --work-dir " + (work_.path() / "work").string(),
                 &output),
      0)
      << output;
  EXPECT_NE(output.find("self-check: the archive reproduced on its own in 3 of 3 runs"), std::string::npos) << output;
  const fs::path dir = elsewhere_.path() / "repro";
  ASSERT_TRUE(testing::extractInto(archive, dir));
  EXPECT_TRUE(fs::exists(dir / "external" / "src" / "mrpkg" / "losses" / "__init__.py")) << output;
  EXPECT_NE(readFile(dir / "case.yaml").find("PYTHONPATH: \"{case_dir}/external/src\""), std::string::npos)
      << readFile(dir / "case.yaml");
  fs::remove_all(lib);
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
}

// A step that needs a variable of the reporter's shell whose name says it
// holds a secret: the archive does not carry it, so the self-check's runs do
// not get it either, and shrink says which (exit 6). Before, the runs
// inherited it and the archive passed its self-check.
TEST_F(Fidelity, AShellSecretTheArchiveDoesNotCarryIsNotGivenToTheSelfCheck) {
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  std::string trial = readFile(case_dir / "trial.py");
  trial.replace(trial.find("import json\n"), 12, "import json\nimport os\nos.environ[\"MR_PROBE_TOKEN\"]\n");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  ASSERT_EQ(runCommand("MR_PROBE_TOKEN=abc123def456ghi789 " + std::string(MINREPRO_BINARY) +
                           " shrink --no-op-repro --config " + (case_dir / "case.yaml").string() + " --output " +
                           (work_.path() / "repro.tar.gz").string() + " --work-dir " + (work_.path() / "work").string(),
                       &output),
            6)
      << output;
  EXPECT_NE(output.find("the runs did not get what the archive does not carry: MR_PROBE_TOKEN"), std::string::npos)
      << output;
}

// A step that needs a variable of the reporter's shell (no secret in its
// name): the archive does not carry it, so the self-check's runs, which keep
// only what any machine's environment has, do not get it (exit 6, naming
// it). Before, they inherited the whole shell and passed; a maintainer's
// clean run of repro.py printed "ok".
TEST_F(Fidelity, AVariableOfTheShellTheArchiveDoesNotCarryIsNotGivenToTheSelfCheck) {
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  std::string trial = readFile(case_dir / "trial.py");
  trial.replace(trial.find("import json\n"), 12, "import json\nimport os\nos.environ[\"MR_PROBE_FLAG\"]\n");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  ASSERT_EQ(runCommand("MR_PROBE_FLAG=4 " + std::string(MINREPRO_BINARY) + " shrink --config " +
                           (case_dir / "case.yaml").string() + " --no-op-repro --output " +
                           (work_.path() / "repro.tar.gz").string() + " --work-dir " + (work_.path() / "work").string(),
                       &output),
            6)
      << output;
  EXPECT_NE(output.find("the runs did not get what the archive does not carry: MR_PROBE_FLAG"), std::string::npos)
      << output;
  // What the runs lacked explains it: no second search in plain processes, no blame on the batch's bytes.
  EXPECT_EQ(output.find("searching again from the original"), std::string::npos) << output;
  EXPECT_EQ(output.find("did not fail again in fresh processes"), std::string::npos) << output;
}

// The step opens its labels by an absolute path outside the case: the
// archive carries a copy the step never looks at, and on this machine the
// original is still there. The self-check watches what its runs read and
// fails (exit 6) naming the file. Before, it passed 3 of 3 and a
// maintainer got FileNotFoundError.
TEST_F(Fidelity, AFileReadByItsAbsolutePathFailsTheSelfCheck) {
  TempDir outside("minrepro-fidelity-abs");
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  const fs::path labels = fs::canonical(outside.path()) / "labels.json";
  fs::rename(case_dir / "labels.json", labels);
  std::string trial = readFile(case_dir / "trial.py");
  const std::string from = "os.path.join(HERE, \"labels.json\")";
  ASSERT_NE(trial.find(from), std::string::npos) << trial;
  trial.replace(trial.find(from), from.size(), "\"" + labels.string() + "\"");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  ASSERT_EQ(shrinkWithoutOpStep(case_dir, &output), 6) << output;
  EXPECT_NE(output.find("the runs read 1 file(s) of the case at their place on this machine"), std::string::npos)
      << output;
  EXPECT_NE(output.find("labels.json (open them relative to the script"), std::string::npos) << output;
  EXPECT_EQ(output.find("searching again from the original"), std::string::npos) << output;
  // verify, here where the file still is, reproduces it, and does not vouch
  // for it: the archive records that it did not reproduce on its own
  // (a new user's verify said "reproduced in 1 of 1 runs", exit 0).
  const fs::path archive = work_.path() / "repro.tar.gz";
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " verify " + archive.string() + " --runs 1", &output), 3)
      << output;
  EXPECT_NE(output.find("reproduced in 1 of 1 runs"), std::string::npos) << output;
  EXPECT_NE(output.find("inconclusive: when it was made, this archive did not reproduce on its own (3 of 3 runs of "
                        "repro.py in an empty directory failed as recorded; the runs read 1 file(s) of the case at "
                        "their place on the machine that made it)"),
            std::string::npos)
      << output;
}

// The step only asks whether a flag file of the case exists and lists a
// directory of it, by absolute paths, and passes (exit 0) without them: a
// maintainer's run of the archive, which carries neither, passes. The
// self-check sees the looks (the tracer's watch) and fails (exit 6) naming
// both. Before, it read nothing of the case's, passed 3 of 3, and said the
// archive reproduces.
TEST_F(Fidelity, AFileOnlyStatedAndADirectoryOnlyListedFailTheSelfCheck) {
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  const fs::path here = fs::canonical(case_dir);
  testing::writeFile(here / "enabled", "");
  fs::create_directories(here / "plugins");
  testing::writeFile(here / "plugins" / "strict.txt", "");
  std::string trial = readFile(case_dir / "trial.py");
  const std::string after = "HERE = os.path.dirname(os.path.abspath(__file__))\n";
  ASSERT_NE(trial.find(after), std::string::npos) << trial;
  trial.insert(trial.find(after) + after.size(), "if not (os.path.exists(\"" + (here / "enabled").string() +
                                                     "\") and os.listdir(\"" + (here / "plugins").string() +
                                                     "\")):\n    sys.exit(0)\n");
  testing::writeFile(case_dir / "trial.py", trial);
  std::string output;
  ASSERT_EQ(shrinkWithoutOpStep(case_dir, &output), 6) << output;
  EXPECT_NE(output.find("the runs looked at 2 path(s) beside the case's files on this machine that the archive does "
                        "not carry"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find((here / "enabled").string()), std::string::npos) << output;
  EXPECT_NE(output.find((here / "plugins").string()), std::string::npos) << output;
  EXPECT_EQ(output.find("searching again from the original"), std::string::npos) << output;
}

// trial.exclude_files keeps model.pt out: the archive cannot reproduce, and
// shrink says so (exit 6, the missing file by name) instead of "done".
TEST_F(Fidelity, ArchiveThatDoesNotReproduceAloneIsReportedWithItsOwnStatus) {
  const fs::path case_dir = work_.path() / "case";
  fs::copy(cases_->path() / "sibling_files", case_dir);
  std::string yaml = readFile(case_dir / "case.yaml");
  const std::string timeout = "  timeout:";
  yaml.insert(yaml.find(timeout), "  exclude_files: [\"model.pt\"]\n");
  testing::writeFile(case_dir / "case.yaml", yaml);
  std::string output;
  const fs::path dir = shrinkAndExtract(case_dir / "case.yaml", &output, 6);
  EXPECT_FALSE(fs::exists(dir / "model.pt"));
  EXPECT_NE(output.find("self-check: the archive did NOT reproduce on its own in 0 of 3 runs"), std::string::npos)
      << output;
  EXPECT_NE(output.find("model.pt (add it with trial.files)"), std::string::npos) << output;
  EXPECT_NE(readFile(dir / "REPORT.md").find("did NOT reproduce on its own"), std::string::npos);
  EXPECT_NE(readFile(dir / "REPORT.md").find("model.pt (trial.exclude_files)"), std::string::npos);
}

TEST_F(Fidelity, FatalSignalIsReproducedAsTheSameSignal) {
  std::string output;
  const fs::path dir = shrinkAndExtract(caseFile("segfault"), &output);
  EXPECT_NE(output.find("reduced 24 -> 1 samples (ids [2063])"), std::string::npos) << output;
  std::string repro;
  // repro.py dies of SIGSEGV itself (the shell reports 128 + 11), not exit 245.
  EXPECT_EQ(runRepro(dir, &repro), 128 + SIGSEGV) << repro;
  EXPECT_NE(readFile(dir / "signature.txt").find("signal: SIGSEGV\n"), std::string::npos);
  EXPECT_EQ(verify(&repro), 0) << repro;
}

// Views into one storage stay views into one storage: the trial's
// contiguous read of `w` sees `b`'s values in the archive as in the
// original, and the original's check ran on the user's own file.
TEST_F(Fidelity, StridedViewsIntoASharedStorageAreWrittenAsTheyWere) {
  std::string output;
  const fs::path dir = shrinkAndExtract(caseFile("shared_view"), &output);
  EXPECT_NE(output.find("reduced 16 -> 1 samples (ids [3035])"), std::string::npos) << output;
  EXPECT_EQ(testing::pyEvalOnBatch(dir / "batch.pt",
                                   "[(b[k].stride(), b[k].storage_offset()) for k in 'wbc'], "
                                   "S(b['w']).data_ptr() == S(b['b']).data_ptr() == "
                                   "S(b['c']).data_ptr(), b['sample_id'].tolist()"),
            "[((3,), 0), ((3,), 1), ((3,), 2)] True [3035]\n");
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: index out of range in self"), std::string::npos) << repro;
  EXPECT_EQ(verify(&repro), 0) << repro;
  EXPECT_NE(
      readFile(dir / "REPORT.md").find("| `w` | float32 | [8] | [3] | strided | offset 0, shared with `b`, `c` |"),
      std::string::npos)
      << readFile(dir / "REPORT.md");
}

// Forked trials keep a second sample (the culprit alone passes in a fork
// server's children); the 1-minimality check in plain processes drops it.
TEST_F(Fidelity, ResultOfForkedTrialsIsCheckedForOneMinimalityInPlainProcesses) {
  std::string output;
  const fs::path dir = shrinkAndExtract(caseFile("fork_state"), &output);
  EXPECT_NE(output.find("trial processes: forked children of a fork server"), std::string::npos) << output;
  EXPECT_NE(output.find("1 sample(s) and 0 branch(es) turned out not to be needed"), std::string::npos) << output;
  EXPECT_NE(output.find("reduced 32 -> 1 samples (ids [4147])"), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(dir / "augment.py"));
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("IndexError: Target 6 is out of bounds."), std::string::npos) << repro;
  EXPECT_EQ(verify(&repro), 0) << repro;
  EXPECT_NE(readFile(dir / "REPORT.md").find("- 1-minimality checked in plain processes: "), std::string::npos);
}

// A torch.multiprocessing.spawn job: every error reaches the launcher as the
// same ProcessRaisedException. The half the search tries first fails with a
// different inner error (a ValueError from a NaN sample): read by the
// wrapper's words it would have been accepted and the search would have
// slid to the NaN; read by the inner error it is kept apart.
TEST_F(Fidelity, MultiProcessJobIsReducedByItsInnerError) {
  std::string output;
  // With the op step: its recorder rides in every process of the job.
  const fs::path dir = shrinkAndExtract(caseFile("spawn_job"), &output, 0, "");
  EXPECT_NE(output.find("original reproduces: index-error in cross_entropy: Target 4 is out of bounds."),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("reduced 8 -> 1 samples (ids [5007])"), std::string::npos) << output;
  const std::string log = readFile(work_.path() / "work" / "minrepro.log");
  EXPECT_NE(log.find("found a different failure (kept apart, not accepted): value-error: non-finite features"),
            std::string::npos)
      << log;
  const std::string signature = readFile(dir / "signature.txt");
  EXPECT_NE(signature.find("family: index-error\noperator: cross_entropy\n"), std::string::npos) << signature;
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("ProcessRaisedException"), std::string::npos) << repro;
  EXPECT_NE(repro.find("IndexError: Target 4 is out of bounds."), std::string::npos) << repro;
  EXPECT_EQ(verify(&repro), 0) << repro;
}

// The same words raised at another line are another bug: step.py fails
// first at line 5 for the culprit's index, and at line 6 for every sample
// (its offset pushes any index out of the table), with the same message.
// A search that took "index out of range in self" anywhere for the bug
// would drop the culprit and keep whichever sample came first.
TEST_F(Fidelity, TheSameMessageRaisedAtAnotherLineIsNotTheBug) {
  TempDir case_dir("minrepro-fidelity-place");
  std::string output;
  ASSERT_EQ(runCommand(python() +
                           " -c \"import torch; idx = torch.arange(16) % 4; idx[5] = 9; torch.save({'idx': "
                           "idx, 'offset': torch.full((16,), 4), 'sample_id': torch.arange(16) + 300}, '" +
                           (case_dir.path() / "batch.pt").string() + "')\"",
                       &output),
            0)
      << output;
  testing::writeFile(case_dir.path() / "step.py",
                     "import sys, torch\n"
                     "b = torch.load(sys.argv[1], weights_only=True)\n"
                     "table = torch.zeros(4)\n"
                     "# the culprit's index, then everyone's offset\n"
                     "table.index_select(0, b['idx'])\n"
                     "table.index_select(0, b['idx'] + b['offset'])\n");
  testing::writeFile(case_dir.path() / "case.yaml",
                     "batch: batch.pt\nsamples: {tensors: {idx: 0, offset: 0}, ids: sample_id}\n"
                     "trial:\n  command: [" +
                         python() + ", \"{case_dir}/step.py\", \"{batch}\"]\n");
  const fs::path dir = shrinkAndExtract(case_dir.path() / "case.yaml", &output);
  EXPECT_NE(output.find("reduced 16 -> 1 samples (ids [305])"), std::string::npos) << output;
  const std::string log = readFile(work_.path() / "work" / "minrepro.log");
  EXPECT_NE(log.find("(raised at step.py:6 in <module>, expected step.py:5 in <module>)"), std::string::npos) << log;
  std::string repro;
  EXPECT_EQ(runRepro(dir, &repro), 1) << repro;
  EXPECT_NE(repro.find("line 5"), std::string::npos) << repro;
}

}  // namespace
}  // namespace minrepro
