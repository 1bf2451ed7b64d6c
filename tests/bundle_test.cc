// What the archive carries of the files a trial reads (engine/archive/bundle.h), the
// real file tracer on real processes, and the self-check's and the fork
// comparison's small rules (engine/archive/self_check.h, core/flaky.h).
#include "engine/archive/bundle.h"

#include <gtest/gtest.h>

#include <cmath>

#include "commands/verify.h"
#include "core/flaky.h"
#include "engine/archive/self_check.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::writeFile;

struct BundleFixture : ::testing::Test {
  TempDir root{"minrepro-bundle"};
  CaseConfig config;
  fs::path base, outside;
  void SetUp() override {
    base = fs::canonical(root.path()) / "case";
    outside = fs::canonical(root.path()) / "code";
    fs::create_directories(base / "weights");
    fs::create_directories(outside);
    config.base_dir = base;
    config.case_file = base / "case.yaml";
    config.batch = base / "batch.pt";
    config.work_dir = base / "minrepro-work";
    config.output = base / "repro.tar.gz";
    for (const char* f : {"case.yaml", "batch.pt", "trial.py", "weights/a.pt", "weights/b.pt", "notes.txt"})
      writeFile(base / f, "x");
    fs::create_directories(config.work_dir / "trials" / "trial-000001");
    writeFile(config.work_dir / "trials" / "trial-000001" / "batch.pt", "x");
    writeFile(outside / "step.py", "x");
    writeFile(outside / "vocab.json", "x");
    config.command = CommandTrial{{"/usr/bin/python3", (outside / "step.py").string(), "{batch}"}, {}, {}};
  }
  static std::vector<std::string> names(const BundlePlan& plan) {
    std::vector<std::string> out;
    for (const auto& f : plan.files) out.push_back(f.archive_name);
    return out;
  }
};

TEST_F(BundleFixture, TracedFilesOfTheUserAreBundledAndTheRestIsNot) {
  const std::vector<fs::path> traced{base / "trial.py",
                                     base / "weights" / "a.pt",
                                     base / "weights" / "a.pt",  // read twice, bundled once
                                     config.batch,               // the archive has its own batch
                                     config.work_dir / "trials" / "trial-000001" / "batch.pt",
                                     "/usr/lib/python3/dist-packages/torch/__init__.py",
                                     "/etc/hostname",
                                     base / "missing.pt",  // gone since: nothing to bundle
                                     outside / "step.py",
                                     outside / "vocab.json"};
  const BundlePlan plan = planBundle(config, traced);
  // From outside: named from their common directory, code/, without the
  // machine's path above it.
  const std::string step = "external/code/step.py";
  EXPECT_EQ(names(plan), (std::vector<std::string>{"trial.py", "weights/a.pt", step, "external/code/vocab.json"}));
  EXPECT_EQ(plan.argv_rewrites.at((outside / "step.py").string()), "{case_dir}/" + step);
  ASSERT_EQ(plan.from_outside.size(), 2u);
  EXPECT_NE(plan.from_outside[0].find("named by the command"), std::string::npos);
  EXPECT_NE(plan.from_outside[1].find("absolute path does not see the bundled copy"), std::string::npos);
  const CaseConfig archived = withBundledPaths(config, plan);
  EXPECT_EQ(archived.command->argv[1], "{case_dir}/" + step);
  EXPECT_EQ(archived.command->argv[0], "/usr/bin/python3");
}

// Files from two projects of one home directory: their common directory is
// the home, whose name (the user's) is left out. Before, they became
// external/alice/proj/... A PYTHONPATH directory among them is named alike.
TEST_F(BundleFixture, FilesFromAcrossTheHomeDirectoryDoNotCarryTheUsersName) {
  const fs::path home = fs::canonical(root.path()) / "alice";
  for (const char* f : {"proj/step.py", "shared/mylib/__init__.py"}) {
    fs::create_directories((home / f).parent_path());
    writeFile(home / f, "x");
  }
  config.command = CommandTrial{{"/usr/bin/python3", (home / "proj" / "step.py").string(), "{batch}"}, {}, {}};
  const char* old_home = std::getenv("HOME");
  const std::string saved = old_home ? old_home : "";
  ::setenv("HOME", home.c_str(), 1);
  const BundlePlan plan = planBundle(config, {home / "shared" / "mylib" / "__init__.py"}, {home / "shared"});
  if (old_home)
    ::setenv("HOME", saved.c_str(), 1);
  else
    ::unsetenv("HOME");
  EXPECT_EQ(names(plan), (std::vector<std::string>{"external/shared/mylib/__init__.py", "external/proj/step.py"}));
  EXPECT_EQ(plan.python_path, (std::vector<std::string>{"external/shared"}));
  EXPECT_EQ(withBundledPaths(config, plan).command->env.at("PYTHONPATH"), "{case_dir}/external/shared");
}

// The command names {case_dir}/run.py, a symbolic link to a script outside
// the case directory: the script is bundled under external/ and the
// argument rewritten to it. Before, the archive's command named
// {case_dir}/run.py, which it did not carry (every run: "can't open file").
TEST_F(BundleFixture, AScriptThatIsALinkOutOfTheCaseIsRunFromItsBundledCopy) {
  fs::create_symlink(outside / "step.py", base / "run.py");
  config.command = CommandTrial{{"/usr/bin/python3", "{case_dir}/run.py", "{batch}"}, {}, {}};
  const BundlePlan plan = planBundle(config, {outside / "step.py", outside / "vocab.json"});
  EXPECT_EQ(names(plan), (std::vector<std::string>{"external/code/step.py", "external/code/vocab.json"}));
  EXPECT_EQ(withBundledPaths(config, plan).command->argv[1], "{case_dir}/external/code/step.py");
}

TEST_F(BundleFixture, TrialFilesAddWhatTheTraceCannotSeeAndExcludeFilesWins) {
  config.files = {"weights/*.pt", "notes.txt"};
  config.exclude_files = {"weights/b.pt"};
  const BundlePlan plan = planBundle(config, {base / "weights" / "b.pt"});
  // The script the command names is bundled even when nothing was traced.
  EXPECT_EQ(names(plan), (std::vector<std::string>{"notes.txt", "weights/a.pt", "external/code/step.py"}));
  EXPECT_EQ(plan.left_out, (std::vector<std::string>{"weights/b.pt (trial.exclude_files)"}));
}

// The real libminrepro_filetrace.so on real processes: Python's open() and
// a child's read are listed, a write is not, and nothing is written without
// the variable.
TEST_F(BundleFixture, FileTracerListsWhatATrialAndItsChildrenRead) {
  const std::string library = fileTraceLibrary();
  ASSERT_FALSE(library.empty()) << "libminrepro_filetrace.so is built beside minrepro";
  const fs::path trace = root.path() / "trace.txt";
  const std::string script = "open('" + (base / "notes.txt").string() + "').read(); open('" +
                             (base / "written.txt").string() +
                             "', 'w').write('y'); import subprocess; "
                             "subprocess.run(['cat', '" +
                             (base / "trial.py").string() + "'], check=True)";
  std::string output;
  ASSERT_EQ(testing::runCommand("LD_PRELOAD=" + library + " " + kFileTraceVariable + "=" + trace.string() +
                                    " /usr/bin/python3 -c \"" + script + "\"",
                                &output),
            0)
      << output;
  const auto read = readTrace(trace);
  auto has = [&](const fs::path& p) { return std::find(read.begin(), read.end(), p) != read.end(); };
  EXPECT_TRUE(has(base / "notes.txt"));
  EXPECT_TRUE(has(base / "trial.py")) << "read by the child (cat)";
  EXPECT_FALSE(has(base / "written.txt"));
  fs::remove(trace);
  ASSERT_EQ(testing::runCommand("LD_PRELOAD=" + library + " /usr/bin/python3 -c \"" + script + "\"", &output), 0);
  EXPECT_FALSE(fs::exists(trace));
}

// trial.files and trial.exclude_files: globs inside the case directory,
// read, written back into the archive's case.yaml, and refused (with the
// key's place and what to write) when they point outside it.
TEST(BundleConfig, GlobsAreReadWrittenBackAndKeptInsideTheCase) {
  TempDir dir;
  writeFile(dir.path() / "batch.pt", "");
  const auto load = [&](const std::string& extra) {
    writeFile(dir.path() / "case.yaml",
              "batch: batch.pt\nsamples: {tensors: {input: 0}}\n"
              "trial:\n  command: [python3, s.py, \"{batch}\"]\n" +
                  extra);
    return loadCase(dir.path() / "case.yaml");
  };
  const CaseConfig c = load("  files: [\"weights/*.pt\", \"*.so\"]\n  exclude_files: [secret.txt]\n");
  EXPECT_EQ(c.files, (std::vector<std::string>{"weights/*.pt", "*.so"}));
  EXPECT_EQ(c.exclude_files, (std::vector<std::string>{"secret.txt"}));
  // The archive's case.yaml loads back with the same globs.
  writeFile(dir.path() / "case.yaml", renderCase(c, dir.path(), "batch.pt", ""));
  const CaseConfig again = loadCase(dir.path() / "case.yaml");
  EXPECT_EQ(again.files, c.files);
  EXPECT_EQ(again.exclude_files, c.exclude_files);
  for (const char* bad : {"  files: [/etc/passwd]\n", "  files: [\"../other/*.pt\"]\n", "  exclude_files: [\"\"]\n"}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const BadInputError& e) {
      EXPECT_NE(std::string(e.what()).find("a glob relative to the case directory, inside it"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("case.yaml:5"), std::string::npos) << e.what();
    }
  }
}

TEST(SelfCheck, MissingFileIsNamedFromTheRunsOutput) {
  EXPECT_EQ(missingFileIn("FileNotFoundError: [Errno 2] No such file or directory: '/r/labels.json'\n"),
            "/r/labels.json");
  EXPECT_EQ(missingFileIn("ValueError: The provided filename /r/model.pt does not exist\n"), "/r/model.pt");
  EXPECT_EQ(missingFileIn("IndexError: Target 4 is out of bounds.\n"), "");
  // A traceback quotes the raising line before the message.
  EXPECT_EQ(missingFileIn("    raise ValueError(\"The provided filename {} does not exist\".format(f))\n"
                          "ValueError: The provided filename /r/model.pt does not exist\n"),
            "/r/model.pt");
}

TEST(SelfCheck, RunsAndRuleFollowTheFailureRate) {
  FailureRate always;
  always.add(3, 0, 64);
  EXPECT_EQ(planSelfCheck(always, {}, 0, 1).runs, 3);
  EXPECT_TRUE(planSelfCheck(always, {}, 0, 1).require_every_run);
  // Forked trials never passed, but a plain run of the original did: flaky.
  EXPECT_FALSE(planSelfCheck(always, {}, 1, 1).require_every_run);
  FailureRate third;
  third.add(10, 20, 1);
  const SelfCheckPlan flaky = planSelfCheck(third, {}, 0, 1);
  EXPECT_FALSE(flaky.require_every_run);
  EXPECT_GE(flaky.runs, 15);  // (2/3)^n <= 0.001 needs n >= 17 at the estimate
  EXPECT_LE(flaky.runs, 30);
  EXPECT_TRUE(flaky.conclusive);
  FailureRate rare;
  rare.add(3, 60, 1);
  EXPECT_EQ(planSelfCheck(rare, {}, 0, 1).runs, 30);
  EXPECT_FALSE(planSelfCheck(rare, {}, 0, 1).conclusive) << "30 runs can miss a 5% failure";

  SelfCheck check;
  check.ran = true;
  check.runs = 3;
  check.reproduced = 2;
  EXPECT_FALSE(check.passed());
  EXPECT_TRUE(check.failed());
  check.require_every_run = false;
  EXPECT_TRUE(check.passed());
  check.reproduced = 0;
  check.conclusive = false;
  EXPECT_FALSE(check.passed());
  EXPECT_FALSE(check.failed()) << "none of 30 runs of a rare failure is no verdict";
  check.conclusive = true;
  check.error = "no torch";
  EXPECT_FALSE(check.failed()) << "a check that could not run says nothing about the archive";
}

TEST(ForkComparison, FisherExactTestSeparatesDifferentRatesOnly) {
  EXPECT_NEAR(fisherExactTwoSided(3, 3, 3, 3), 1.0, 1e-9);
  EXPECT_LT(fisherExactTwoSided(30, 30, 0, 30), 0.01);
  EXPECT_GT(fisherExactTwoSided(3, 30, 1, 30), 0.5);
  // The textbook tea-tasting table (3 1 / 1 3): p = 0.486.
  EXPECT_NEAR(fisherExactTwoSided(3, 4, 1, 4), 0.4857, 1e-3);
}

TEST(Manifest, FatalSignalIsRecordedAndRead) {
  Manifest m;
  m.signature.family = FailureFamily::Signal;
  m.signature.signal_name = "SIGSEGV";
  const Manifest back = parseManifest(renderManifest(m), "signature.txt");
  EXPECT_EQ(back.signature.signal_name, "SIGSEGV");
  EXPECT_EQ(back.signature.family, FailureFamily::Signal);
}

}  // namespace
}  // namespace minrepro
