// Whole-binary tier: bad paths and a model that is not TorchScript are bad
// input, found before the first trial (exit 2, one line that says what to
// do), not after a whole reduction (#14, item 3); and no command ends in
// std::terminate, whatever it throws (commands/run_command.h).
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <new>
#include <sstream>

#include "commands/run_command.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::runCommand;
using testing::writeFile;

class BadInput : public testing::ExampleCases {
 protected:
  // shrink class4 with extra options; its status, its output in *output.
  int shrinkWith(const std::string& options, std::string* output, const fs::path& case_file = {}) {
    return runCommand(std::string(MINREPRO_BINARY) + " shrink --config " +
                          (case_file.empty() ? example("class4") / "case.yaml" : case_file).string() + " " + options,
                      output);
  }
  // DIR/batch.pt (x = 0..7, sample_id = 100..107) and a case.yaml whose
  // trial runs DIR/step.py (written by the test) on it.
  void writeIndexCase(const fs::path& dir) {
    fs::create_directories(dir);
    std::string output;
    ASSERT_EQ(runCommand(testing::python() +
                             " -c \"import torch; torch.save({'x': torch.arange(8), 'sample_id': "
                             "torch.arange(8) + 100}, '" +
                             (dir / "batch.pt").string() + "')\"",
                         &output),
              0)
        << output;
    writeFile(dir / "case.yaml", "batch: batch.pt\nsamples: {tensors: {x: 0}, ids: sample_id}\ntrial:\n  command: [" +
                                     testing::python() + ", \"{case_dir}/step.py\", \"{batch}\"]\n");
  }
  // Nothing ran: no trial was journaled in the work directory.
  bool noTrialRan(const fs::path& work) const {
    return !fs::exists(work / "journal.txt") ||
           testing::readFile(work / "journal.txt").find("trial") == std::string::npos;
  }
};

TEST_F(BadInput, AnArchiveDirectoryThatDoesNotExistIsFoundBeforeTheFirstTrial) {
  const fs::path work = work_.path() / "w";
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + (work_.path() / "missing" / "r.tar.gz").string(),
                       &output),
            2)
      << output;
  EXPECT_NE(output.find("minrepro shrink: error: "), std::string::npos) << output;
  EXPECT_NE(output.find("missing, does not exist; create it, or give another path"), std::string::npos) << output;
  EXPECT_TRUE(noTrialRan(work));
}

// A failure.message pattern that backtracks without end ("(a+)+b" on a
// message of many a's: probe 23, from a stranger's archive through compare
// too) kept shrink busy for good, deaf to Ctrl-C. The search gives up after
// 5 s with exit 2, naming the pattern, and nothing is left running.
TEST_F(BadInput, AMessagePatternThatBacktracksWithoutEndIsRefusedNotWaitedOn) {
  const fs::path dir = work_.path() / "redos";
  fs::create_directories(dir);
  writeFile(dir / "step.py", "raise IndexError('Target 4 is out of bounds. ' + 'a' * 120 + '!')\n");
  ASSERT_EQ(
      runCommand(testing::python() + " -c \"import torch; torch.save({'x': torch.arange(4), 'y': torch.arange(4)}, '" +
                 (dir / "batch.pt").string() + "')\""),
      0);
  writeFile(dir / "case.yaml", "batch: batch.pt\nsamples: {tensors: {x: 0, y: 0}}\ntrial:\n  command: [" +
                                   testing::python() +
                                   ", '{case_dir}/step.py', '{batch}']\n"
                                   "failure: {message: '(a+)+b'}\n");
  std::string output;
  EXPECT_EQ(shrinkWith("--no-op-repro --work-dir " + (dir / "w").string() + " 2>&1", &output, dir / "case.yaml"), 2)
      << output;
  EXPECT_NE(output.find("failure.message /(a+)+b/ took more than 5 s to search a message of"), std::string::npos)
      << output;
  EXPECT_NE(output.find("write it without nested quantifiers"), std::string::npos) << output;
  // Ctrl-C a second into the search ends it as an interruption (130), not
  // with the refusal once the 5 s are out (probe 24).
  writeFile(dir / "step.py",
            "open('" + (dir / "ran").string() +
                "', 'w').close()\nraise IndexError('Target 4 is out of bounds. ' + 'a' * 120 + '!')\n");
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --config " + (dir / "case.yaml").string() +
                           " --no-op-repro --work-dir " + (dir / "w2").string() + " > " + (dir / "out").string() +
                           " 2>&1 & pid=$!; while [ ! -e " + (dir / "ran").string() +
                           " ]; do sleep 0.05; done; sleep 1; kill -INT $pid; wait $pid; echo status=$?",
                       &output),
            0);
  EXPECT_NE(output.find("status=130"), std::string::npos) << output << testing::readFile(dir / "out");
  EXPECT_EQ(testing::readFile(dir / "out").find("took more than 5 s"), std::string::npos)
      << testing::readFile(dir / "out");
}

TEST_F(BadInput, AnArchivePathThatIsADirectoryIsFoundBeforeTheFirstTrial) {
  const fs::path work = work_.path() / "w";
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + work_.path().string(), &output), 2) << output;
  EXPECT_NE(output.find("is a directory; give a file name, e.g. "), std::string::npos) << output;
  EXPECT_TRUE(noTrialRan(work));
}

// The archive never replaces what the user owns (#30.1): the batch, the
// case file, the model (even with --force), a device, a symbolic link, or a
// file minrepro did not write (unless --force). A file it wrote before, it
// replaces.
TEST_F(BadInput, AnOutputThatIsAnInputOrAFileOfTheUsersIsRefusedBeforeAnyTrial) {
  const fs::path case_dir = work_.path() / "class4";
  fs::copy(example("class4"), case_dir, fs::copy_options::recursive);
  writeFile(case_dir / "notes.txt", "my notes\n");
  fs::create_symlink(case_dir / "notes.txt", case_dir / "link.tar.gz");
  const fs::path work = work_.path() / "w";
  const auto shrinkTo = [&](const fs::path& output, const std::string& more, std::string* out) {
    return shrinkWith("--work-dir " + work.string() + " --output " + output.string() + " " + more, out,
                      case_dir / "case.yaml");
  };
  const std::string batch = testing::readFile(case_dir / "batch.pt");
  for (const std::string name : {"batch.pt", "case.yaml", "model.pt"}) {
    for (const std::string force : {"", "--force"}) {
      SCOPED_TRACE(name + " " + force);
      std::string output;
      EXPECT_EQ(shrinkTo(case_dir / name, force, &output), 2) << output;
      EXPECT_NE(output.find("writing there would destroy it, even with --force"), std::string::npos) << output;
      EXPECT_TRUE(noTrialRan(work));
    }
  }
  EXPECT_EQ(testing::readFile(case_dir / "batch.pt"), batch);
  std::string output;
  EXPECT_EQ(shrinkTo("/dev/null", "--force", &output), 2) << output;
  EXPECT_NE(output.find("is not a regular file"), std::string::npos) << output;
  EXPECT_EQ(shrinkTo(case_dir / "link.tar.gz", "--force", &output), 2) << output;
  EXPECT_NE(output.find("is a symbolic link"), std::string::npos) << output;
  EXPECT_EQ(shrinkTo(case_dir / "notes.txt", "", &output), 2) << output;
  EXPECT_NE(output.find("exists and is not an archive minrepro wrote; give another path, or --force"),
            std::string::npos)
      << output;
  EXPECT_EQ(testing::readFile(case_dir / "notes.txt"), "my notes\n");
  EXPECT_TRUE(noTrialRan(work));
  // --force replaces the user's file; a later run replaces its own archive.
  const std::string quick = "--no-self-check --no-op-repro";
  EXPECT_EQ(shrinkTo(case_dir / "notes.txt", quick + " --force", &output), 0) << output;
  EXPECT_TRUE(testing::extractInto(case_dir / "notes.txt", work_.path() / "forced"));
  fs::remove_all(work);
  EXPECT_EQ(shrinkTo(case_dir / "notes.txt", quick, &output), 0) << output;
}

// Mistakes in case.yaml are not the bug (#30.2): a harness key naming a
// tensor the batch lacks is bad input, and a memory limit under which the
// trial's program cannot even start stops the run (exit 4); neither is
// reduced.
TEST_F(BadInput, AMissingHarnessTensorOrAMemoryLimitTooLowToStartIsNotReduced) {
  const fs::path case_dir = work_.path() / "class4";
  fs::copy(example("class4"), case_dir, fs::copy_options::recursive);
  const std::string yaml = testing::readFile(case_dir / "case.yaml");
  const fs::path work = work_.path() / "w";
  std::string output;
  std::string bad = yaml;
  bad.replace(bad.find("target: target"), 14, "target: nosuch");
  writeFile(case_dir / "case.yaml", bad);
  EXPECT_EQ(shrinkWith("--work-dir " + work.string(), &output, case_dir / "case.yaml"), 2) << output;
  EXPECT_NE(output.find("trial.harness.target names 'nosuch', which"), std::string::npos) << output;
  EXPECT_TRUE(noTrialRan(work));
  bad = yaml;
  bad.replace(bad.find("  timeout: 60"), 13, "  timeout: 60\n  memory_limit_mb: 1");
  writeFile(case_dir / "case.yaml", bad);
  EXPECT_EQ(shrinkWith("--work-dir " + work.string(), &output, case_dir / "case.yaml"), 4) << output;
  EXPECT_NE(output.find("trial.memory_limit_mb 1 is too low for a trial to start"), std::string::npos) << output;
  EXPECT_NE(output.find("under it and with exit status 2 without it"), std::string::npos) << output;
  EXPECT_TRUE(noTrialRan(work));
  EXPECT_FALSE(fs::exists(case_dir / "repro.tar.gz"));
}

// A timeout shorter than a fresh Python takes to start: forked runs fail
// as expected and every plain one times out. That is said as it is, with a
// value to use, not as "the failure needs the fork server's state" (#30.9).
TEST_F(BadInput, ATimeoutShorterThanStartUpIsNamedWithAValueToUse) {
  const fs::path case_dir = work_.path() / "command";
  fs::copy(example("command"), case_dir, fs::copy_options::recursive);
  std::string yaml = testing::readFile(case_dir / "case.yaml");
  yaml.replace(yaml.find("timeout: 120"), 12, "timeout: 0.3");
  writeFile(case_dir / "case.yaml", yaml);
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + (work_.path() / "w").string(), &output, case_dir / "case.yaml"), 3) << output;
  EXPECT_NE(output.find("every plain process of the original ran past trial.timeout (0.3 s)"), std::string::npos)
      << output;
  EXPECT_NE(output.find("Set trial.timeout to what `python step.py` takes in your shell plus a margin, e.g. 60"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("needs the fork server's state"), std::string::npos) << output;
}

TEST_F(BadInput, AWorkDirectoryThatIsAFileIsBadInputNotAnInternalError) {
  const fs::path file = work_.path() / "a-file";
  writeFile(file, "not a directory\n");
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + file.string() + " --output " + (work_.path() / "r.tar.gz").string(), &output), 2)
      << output;
  EXPECT_NE(output.find("the work directory (work_dir or --work-dir) is a file"), std::string::npos) << output;
  EXPECT_EQ(output.find("internal error"), std::string::npos) << output;
  EXPECT_EQ(testing::readFile(file), "not a directory\n");  // nothing lost
  // A symbolic link loop: bad input naming work_dir, not an internal error.
  fs::create_symlink(work_.path() / "loop-b", work_.path() / "loop-a");
  fs::create_symlink(work_.path() / "loop-a", work_.path() / "loop-b");
  EXPECT_EQ(shrinkWith("--work-dir " + (work_.path() / "loop-a").string() + " --output " +
                           (work_.path() / "r.tar.gz").string(),
                       &output),
            2)
      << output;
  EXPECT_NE(output.find("the work directory (work_dir or --work-dir) cannot be made (Too many levels of symbolic "
                        "links); give a directory this user may write"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("internal error"), std::string::npos) << output;
}

// A work directory is minrepro's alone (#43.3): one that holds the batch, or
// the user's own files (`--work-dir .` in a project, with a case.yaml of
// theirs), is refused before anything is written there, by the zero-config
// start too; a new one, or one a run left (its lock), is taken.
TEST_F(BadInput, AWorkDirectoryHoldingTheBatchOrTheUsersFilesIsRefusedAndNothingIsTouched) {
  const fs::path case_dir = work_.path() / "command";
  fs::copy(example("command"), case_dir, fs::copy_options::recursive);
  const std::string batch = testing::readFile(case_dir / "batch.pt");
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + case_dir.string() + " --output " + (work_.path() / "r.tar.gz").string(), &output,
                       case_dir / "case.yaml"),
            2)
      << output;
  EXPECT_NE(output.find("the failing batch lies inside the work directory"), std::string::npos) << output;
  EXPECT_EQ(testing::readFile(case_dir / "batch.pt"), batch);
  const fs::path project = work_.path() / "project";
  fs::create_directories(project / "trials");
  writeFile(project / "case.yaml", "# mine\n");
  writeFile(project / "trials" / "mine.txt", "mine\n");
  EXPECT_EQ(shrinkWith("--work-dir " + project.string() + " --output " + (work_.path() / "r.tar.gz").string(), &output,
                       case_dir / "case.yaml"),
            2)
      << output;
  EXPECT_NE(output.find("holds files minrepro did not write ("), std::string::npos) << output;
  EXPECT_EQ(runCommand("cd " + case_dir.string() + " && " + MINREPRO_BINARY +
                           " shrink --no-op-repro --batch batch.pt --work-dir " + project.string() + " -- " +
                           testing::python() + " step.py {batch}",
                       &output),
            2)
      << output;
  EXPECT_NE(output.find("holds files minrepro did not write"), std::string::npos) << output;
  EXPECT_EQ(testing::readFile(project / "case.yaml"), "# mine\n");
  EXPECT_EQ(testing::readFile(project / "trials" / "mine.txt"), "mine\n");
}

// --add-to's NAME.expect and NAME.tar.gz are never followed when they are
// links, and a bad --name is found before the first trial.
TEST_F(BadInput, ARegressionTargetThatIsALinkOrABadNameIsRefusedBeforeAnyTrial) {
  const fs::path set = work_.path() / "checks", victim = work_.path() / "victim.expect";
  writeFile(victim, "pass\n");
  fs::create_directories(set);
  fs::create_symlink(victim, set / "lnk.expect");
  const fs::path work = work_.path() / "w";
  std::string output;
  for (const std::string& name : {std::string("lnk"), std::string("a/b"), std::string("..")}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + (work_.path() / "r.tar.gz").string() +
                             " --add-to " + set.string() + " --name " + name,
                         &output),
              2)
        << output;
    EXPECT_TRUE(noTrialRan(work)) << output;
  }
  EXPECT_EQ(testing::readFile(victim), "pass\n");
  // A file of the user's under a case's name, or a hard link to one: refused before any trial, untouched.
  fs::remove(set / "lnk.expect");
  const fs::path precious = work_.path() / "precious.txt";
  writeFile(precious, "precious\n");
  fs::create_hard_link(precious, set / "hard.expect");
  writeFile(set / "mine.tar.gz", "x");
  for (const std::string& name : {std::string("hard"), std::string("mine")}) {
    EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + (work_.path() / "r.tar.gz").string() +
                             " --add-to " + set.string() + " --name " + name,
                         &output),
              2)
        << output;
    EXPECT_NE(output.find("exists and is not a case minrepro wrote"), std::string::npos) << output;
  }
  EXPECT_EQ(testing::readFile(precious), "precious\n");
  EXPECT_EQ(testing::readFile(set / "mine.tar.gz"), "x");
}

// A file the trial reads that only the file trace sees (a config opened by
// its absolute path) is not the archive's place even with --force: it is
// bundled, left as it was, and the archive goes to the work directory.
TEST_F(BadInput, AnOutputTheTrialReadsIsLeftAndTheArchiveGoesToTheWorkDirectory) {
  const fs::path dir = work_.path() / "reads";
  writeIndexCase(dir);
  std::string output;
  writeFile(dir / "config.json", "{\"bad\": 5}\n");
  // Read beside the script (by an absolute path, the archive would not reproduce alone: exit 6).
  writeFile(
      dir / "step.py",
      "import json, os, sys, torch\nbad = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
      "'config.json')))['bad']\nb = torch.load(sys.argv[1], weights_only=True)\n"
      "if bool((b['x'] == bad).any()):\n    raise IndexError('index 5 is out of bounds')\n");
  const fs::path work = work_.path() / "w";
  EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + (dir / "config.json").string() +
                           " --force --no-op-repro",
                       &output, dir / "case.yaml"),
            0)
      << output;
  EXPECT_EQ(testing::readFile(dir / "config.json"), "{\"bad\": 5}\n");
  EXPECT_NE(output.find("config.json (--output) is a file the trial reads"), std::string::npos) << output;
  EXPECT_NE(output.find("archive: " + (work / "repro.tar.gz").string()), std::string::npos) << output;
  EXPECT_TRUE(testing::extractInto(work / "repro.tar.gz", work_.path() / "x"));
  EXPECT_TRUE(fs::exists(work_.path() / "x" / "config.json"));
}

// A file that appears at the output while the trials run (a step's own
// notes; probe 37: replaced at the end without --force, the check having
// run at the start only) is held to the same rule: left as it is, the
// archive goes to the work directory, and the log says why.
TEST_F(BadInput, AFileThatAppearsAtTheOutputDuringTheRunIsLeftAsItIs) {
  const fs::path dir = work_.path() / "appears";
  writeIndexCase(dir);
  std::string output;
  const fs::path notes = dir / "repro.tar.gz";
  // Beside the script: in the archive's own run, its own directory.
  writeFile(dir / "step.py",
            "import os, sys, torch\nnotes = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'repro.tar.gz')"
            "\nif not os.path.exists(notes):\n    open(notes, 'w').write('USER NOTES\\n')\n"
            "b = torch.load(sys.argv[1], weights_only=True)\n"
            "if bool((b['x'] == 5).any()):\n    raise IndexError('index 5 is out of bounds')\n");
  const fs::path work = work_.path() / "w-appears";
  EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " --output " + notes.string() + " --no-op-repro", &output,
                       dir / "case.yaml"),
            0)
      << output;
  EXPECT_EQ(testing::readFile(notes), "USER NOTES\n");
  EXPECT_NE(output.find("repro.tar.gz (--output) now holds a file that is not an archive minrepro wrote (it "
                        "appeared while the trials ran)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("archive: " + (work / "repro.tar.gz").string()), std::string::npos) << output;
}

// Counts and durations on the command line are checked as case.yaml checks
// its own (a count option read as size_t took "-1" for 2^64 - 1 and
// started trials), each in one line, not the options' whole help.
TEST_F(BadInput, NumericOptionsOutOfRangeAreOneLineBeforeAnyTrial) {
  const fs::path work = work_.path() / "w";
  for (const std::string bad : {"--jobs 0", "--jobs -1", "--jobs abc", "--max-trials -1", "--max-time -5",
                                "--max-time nan", "--trials-per-device 0"}) {
    SCOPED_TRACE(bad);
    std::string output;
    EXPECT_EQ(shrinkWith("--work-dir " + work.string() + " " + bad, &output), 2) << output;
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
    EXPECT_NE(output.find("minrepro shrink: error: "), std::string::npos) << output;
    EXPECT_TRUE(noTrialRan(work));
  }
  std::string output;
  EXPECT_EQ(shrinkWith("--jobs -1", &output), 2) << output;
  EXPECT_NE(output.find("--jobs must be a whole number from 1 to 1024, found '-1'"), std::string::npos) << output;
  // A count past its ceiling is refused before anything is reserved for it.
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " verify nothing.tar.gz --runs 30000000", &output), 2) << output;
  EXPECT_NE(output.find("--runs must be a whole number from 1 to 10000, found '30000000'"), std::string::npos)
      << output;
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " verify nothing.tar.gz --timeout 0", &output), 2) << output;
  EXPECT_NE(output.find("--timeout must be a number of seconds above 0, found '0'"), std::string::npos) << output;
}

TEST_F(BadInput, AModelThatIsNotTorchScriptIsBadInputNotTheBugToReduce) {
  const fs::path case_dir = work_.path() / "class4";
  fs::copy(example("class4"), case_dir, fs::copy_options::recursive);
  writeFile(case_dir / "model.pt", "a pickled nn.Module, not a TorchScript archive\n");
  const fs::path work = work_.path() / "w";
  std::string output;
  EXPECT_EQ(shrinkWith("--work-dir " + work.string(), &output, case_dir / "case.yaml"), 2) << output;
  EXPECT_NE(output.find("trial.harness.model is not a TorchScript model that LibTorch"), std::string::npos) << output;
  EXPECT_NE(output.find("torch.jit.script(model).save(path)"), std::string::npos) << output;
  EXPECT_TRUE(noTrialRan(work));
  EXPECT_FALSE(fs::exists(case_dir / "repro.tar.gz"));
}

// The one map from errors to statuses, for what any command may throw.
TEST(RunCommand, EveryErrorEndsWithItsStatusAndOneLine) {
  const auto status = [](auto thrower, std::string* line) {
    std::ostringstream err;
    const int s = ::minrepro::runCommand("verify", err, [&]() -> int {
      thrower();
      return 0;
    });
    *line = err.str();
    return s;
  };
  std::string line;
  EXPECT_EQ(status([] { throw BadInputError("x.tar.gz: no such archive"); }, &line), 2);
  EXPECT_EQ(line, "minrepro verify: error: x.tar.gz: no such archive\n");
  EXPECT_EQ(status([] { throw DoesNotReproduceError("never failed"); }, &line), 3);
  EXPECT_EQ(status([] { throw TrialStartError("no python"); }, &line), 4);
  EXPECT_EQ(status([] { throw RunStopped(RunStopped::Reason::TrialBudget, "spent"); }, &line), 5);
  EXPECT_EQ(status([] { throw RunStopped(RunStopped::Reason::Interrupted, "interrupted"); }, &line), 130);
  EXPECT_EQ(status(
                [] {
                  throw fs::filesystem_error("cannot create", fs::path("/x"),
                                             std::make_error_code(std::errc::io_error));
                },
                &line),
            1);
  EXPECT_NE(line.find("minrepro verify: internal error: "), std::string::npos) << line;
  EXPECT_EQ(status([] { throw std::bad_alloc(); }, &line), 1);
  EXPECT_NE(line.find("out of memory in minrepro itself"), std::string::npos) << line;
  EXPECT_EQ(status([] { throw 42; }, &line), 1);
  EXPECT_NE(line.find("please report"), std::string::npos) << line;
}

}  // namespace
}  // namespace minrepro
