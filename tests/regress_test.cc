// Regression sets: shrink --add-to stores a real minimal case, regress
// reruns the set and compares with each case's expectation.
#include "commands/regress.h"

#include "engine/archive/tar_gz.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <sstream>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::runCommand;

const std::string kSignature =
    "family: index-error\noperator: nll_loss\ncompare-operator: no\n"
    "message: Target 4 is out of bounds.\nprocessed: 1\n";
const std::string kFails = "raise IndexError('Target 4 is out of bounds.')\n";
const std::string kPasses = "print('minrepro-result: processed=1 loss=0.5')\n";

void addCase(const fs::path& dir, const std::string& name, const std::string& repro, const std::string& expect) {
  fs::create_directories(dir);
  writeTarGz(dir / (name + ".tar.gz"), {{"repro.py", repro, true}, {"signature.txt", kSignature}});
  if (!expect.empty()) testing::writeFile(dir / (name + ".expect"), expect + "\n");
}

int regress(const fs::path& dir, std::string* out) {
  return runCommand(std::string(MINREPRO_BINARY) + " regress " + dir.string() + " 2>&1", out);
}

TEST(Regress, TableOfExpectedAndGot) {
  testing::TempDir tmp;
  const fs::path set = tmp.path() / "set";
  addCase(set, "open-bug", kFails, "");  // no .expect: an open bug is expected to fail
  addCase(set, "fixed-bug", kPasses, "pass");
  std::string out;
  ASSERT_EQ(regress(set, &out), 0) << out;
  EXPECT_NE(out.find("fixed-bug  pass      pass\n"), std::string::npos) << out;
  EXPECT_NE(out.find("open-bug   fail      fail\n"), std::string::npos) << out;
  EXPECT_NE(out.find("2 case(s), 0 differ"), std::string::npos) << out;
  // Said first: the cases' code runs, and how.
  EXPECT_EQ(out.find("regress " + set.string() +
                     ": each case runs code from the archive (repro.py, op/repro_op.py, "
                     "its bundled scripts) "),
            0u)
      << out;
}

TEST(Regress, ACaseThatChangedIsFlaggedAndTheStatusIsOne) {
  testing::TempDir tmp;
  const fs::path set = tmp.path() / "set";
  addCase(set, "regressed", kFails, "pass");        // was fixed, fails again
  addCase(set, "silently-fixed", kPasses, "fail");  // passes now: mark it or find out why
  addCase(set, "ok", kFails, "fail");
  std::string out;
  ASSERT_EQ(regress(set, &out), 1) << out;
  EXPECT_NE(out.find("regressed       pass      0/1 as expected; still fails: index-error"), std::string::npos) << out;
  EXPECT_NE(out.find("silently-fixed  fail      0/1 as expected; did not reproduce: the run passed"), std::string::npos)
      << out;
  EXPECT_NE(out.find("<-- differs"), std::string::npos) << out;
  EXPECT_NE(out.find("3 case(s), 2 differ"), std::string::npos) << out;
}

// NAME.expect that is a FIFO (or a device): read only when it is a small
// regular file, so regress ends and says so instead of hanging.
TEST(Regress, AnExpectFileThatIsAFifoIsReportedNotReadForever) {
  testing::TempDir tmp;
  const fs::path set = tmp.path() / "set";
  addCase(set, "trap", kFails, "");
  ASSERT_EQ(::mkfifo((set / "trap.expect").c_str(), 0644), 0);
  std::string out;
  EXPECT_EQ(runCommand("timeout 60 " + std::string(MINREPRO_BINARY) + " regress " + set.string() + " 2>&1", &out), 1)
      << out;
  EXPECT_NE(out.find("error: trap.expect must say fail or pass"), std::string::npos) << out;
}

// A NAME.expect that links elsewhere is not followed (regress printed
// /etc/passwd's first word), and escape sequences in .expect and in an
// archive's signature.txt reach the terminal as text, not as commands
// (a window title, colours).
TEST(Regress, LinkedExpectFilesAreNotFollowedAndControlBytesArePrintedAsText) {
  testing::TempDir tmp;
  const fs::path set = tmp.path() / "set";
  addCase(set, "linked", kFails, "");
  fs::create_symlink("/etc/passwd", set / "linked.expect");
  addCase(set, "titled", kFails, "\x1b]0;pwned\x07");
  std::string out;
  // A case's name from a set cloned from elsewhere (probe 28: an OSC 52 and a U+202E reached the terminal).
  addCase(tmp.path() / "cloned", "named\x1b]52;c;cHduZWQ=\x07\xe2\x80\xaex", kFails, "fail");
  EXPECT_EQ(regress(tmp.path() / "cloned", &out), 0) << out;
  EXPECT_NE(out.find("named\\x1b]52;c;cHduZWQ=\\x07\\xe2\\x80\\xaex"), std::string::npos) << out;
  EXPECT_EQ(out.find("\xe2\x80\xae"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  // A newline in a name would start a row of its own (probe 41).
  addCase(tmp.path() / "forged", "d\nFORGED: ok", kFails, "fail");
  EXPECT_EQ(regress(tmp.path() / "forged", &out), 0) << out;
  EXPECT_NE(out.find("d\\x0aFORGED: ok  fail"), std::string::npos) << out;
  EXPECT_EQ(out.find("\nFORGED"), std::string::npos) << out;
  EXPECT_EQ(regress(set, &out), 1) << out;
  EXPECT_NE(out.find("linked  (a symbolic link)  error: linked.expect must say fail or pass"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("root"), std::string::npos) << out;
  EXPECT_NE(out.find("\\x1b]0;pwned\\x07"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  const fs::path archive = tmp.path() / "titled.tar.gz";
  writeTarGz(archive, {{"repro.py", kFails, true},
                       {"signature.txt", "family: index-error\nmessage: \x1b]0;pwned\x07Target 4\n"}});
  runCommand(std::string(MINREPRO_BINARY) + " verify --runs 1 " + archive.string() + " 2>&1", &out);
  EXPECT_NE(out.find("recorded failure: index-error: \\x1b]0;pwned\\x07Target 4"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  // The archive's own file name on verify's first line (probe 29: raw).
  const fs::path named = tmp.path() / "d\x1b]0;PWN\x07\xe2\x80\xae.tar.gz";
  fs::copy_file(archive, named);
  runCommand(std::string(MINREPRO_BINARY) + " verify --runs 1 '" + named.string() + "' 2>&1", &out);
  EXPECT_NE(out.find("d\\x1b]0;PWN\\x07\\xe2\\x80\\xae.tar.gz: runs code"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
}

TEST(Regress, EmptyOrMissingSetIsBadInput) {
  testing::TempDir tmp;
  std::string out;
  EXPECT_EQ(regress(tmp.path() / "none", &out), 2) << out;
  EXPECT_EQ(regress(tmp.path(), &out), 2) << out;
  EXPECT_NE(out.find("no NAME.tar.gz cases"), std::string::npos) << out;
}

TEST(Regress, AddRefusesBadNamesAndUnreadableArchives) {
  testing::TempDir tmp;
  addCase(tmp.path(), "a", kFails, "");
  EXPECT_THROW(addToRegressionSet(tmp.path() / "a.tar.gz", tmp.path() / "set", "../evil"), BadInputError);
  EXPECT_THROW(addToRegressionSet(tmp.path() / "missing.tar.gz", tmp.path() / "set", "x"), BadInputError);
  addToRegressionSet(tmp.path() / "a.tar.gz", tmp.path() / "set", "bug-1");
  EXPECT_TRUE(fs::exists(tmp.path() / "set" / "bug-1.tar.gz"));
  EXPECT_EQ(testing::readFile(tmp.path() / "set" / "bug-1.expect"), "fail\n");
}

// Two cases added under one name (two zero-config runs are both named after
// their work directory): the second bug takes the next free name instead of
// replacing the first (probe 21); the same bug shrunk again replaces its
// archive and keeps the "pass" the user wrote. Before, the second replaced
// the first and reset its expect file to "fail".
TEST(Regress, AnotherBugUnderATakenNameTakesTheNextAndAUsersPassStays) {
  testing::TempDir tmp;
  const fs::path set = tmp.path() / "set", config = tmp.path() / "minrepro-work" / "case.yaml";
  fs::create_directories(tmp.path() / "new");
  const std::string other =
      "family: device-assert\noperator: embedding\ncompare-operator: no\nmessage: index out of range\nprocessed: 1\n";
  writeTarGz(tmp.path() / "new" / "other.tar.gz", {{"repro.py", kFails, true}, {"signature.txt", other}});
  writeTarGz(tmp.path() / "new" / "again.tar.gz", {{"repro.py", kPasses, true}, {"signature.txt", kSignature}});
  addCase(set, "minrepro-work", kFails, "pass");
  std::ostringstream said;
  addShrunkCase(config, (tmp.path() / "new" / "other.tar.gz").string(), set, "", said);
  EXPECT_NE(said.str().find("added 'minrepro-work-2' to the regression set " + set.string() +
                            " ('minrepro-work' there records another failure)"),
            std::string::npos)
      << said.str();
  EXPECT_EQ(testing::readFile(set / "minrepro-work.expect"), "pass\n");
  EXPECT_EQ(testing::readFile(set / "minrepro-work-2.expect"), "fail\n");
  said.str("");
  addShrunkCase(config, (tmp.path() / "new" / "again.tar.gz").string(), set, "", said);
  EXPECT_NE(said.str().find("added 'minrepro-work' to the regression set"), std::string::npos) << said.str();
  EXPECT_NE(said.str().find("says pass, as you wrote: kept"), std::string::npos) << said.str();
  EXPECT_EQ(testing::readFile(set / "minrepro-work.expect"), "pass\n");
  EXPECT_EQ(readTarGz(set / "minrepro-work.tar.gz").front().contents, kPasses);
}

// A shrink --batch run without --output (probe 22): its case lies in the
// work directory with paths relative to the user's directory, where the
// archive went. Before, adding it failed after the whole shrink (exit 2,
// "found no file at .../minrepro-work/batch.pt") and the set stayed empty.
TEST(Regress, AZeroConfigRunsArchiveIsFoundWhereItsCaseSaysWithoutOutput) {
  testing::TempDir tmp;
  const fs::path user = tmp.path() / "user", set = tmp.path() / "set";
  fs::create_directories(user / "minrepro-work");
  testing::writeFile(user / "batch.pt", "");
  testing::writeFile(
      user / "minrepro-work" / "case.yaml",
      "batch: batch.pt\nsamples: {tensors: {x: 0}}\ntrial:\n  command: [python, step.py, \"{batch}\"]\n");
  writeTarGz(user / "repro.tar.gz", {{"repro.py", kFails, true}, {"signature.txt", kSignature}});
  std::ostringstream said;
  addShrunkCase(user / "minrepro-work" / "case.yaml", "", set, "", said, user);
  EXPECT_NE(said.str().find("added 'minrepro-work' to the regression set"), std::string::npos) << said.str();
  EXPECT_TRUE(fs::exists(set / "minrepro-work.tar.gz"));
}

// The whole loop on a real case: shrink it into the set, rerun the set.
TEST(Regress, ShrinkAddToThenRegress) {
  testing::TempDir tmp;
  const fs::path examples = tmp.path() / "examples", case_dir = tmp.path() / "class4", set = tmp.path() / "checks";
  fs::create_directories(case_dir);
  std::string out;
  ASSERT_EQ(testing::makeBundledExamples(examples), "");
  ASSERT_EQ(testing::saveSmallClass4Batch(examples, case_dir / "batch.pt"), "");
  fs::copy(examples / "class4" / "model.pt", case_dir / "model.pt");
  fs::copy(examples / "class4" / "case.yaml", case_dir / "case.yaml");
  ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink -q --config " + (case_dir / "case.yaml").string() +
                           " --add-to " + set.string() + " 2>&1",
                       &out),
            0)
      << out;
  EXPECT_NE(out.find("added 'class4' to the regression set"), std::string::npos) << out;
  ASSERT_EQ(regress(set, &out), 0) << out;
  EXPECT_NE(out.find("class4  fail      fail\n"), std::string::npos) << out;
  testing::writeFile(set / "class4.expect", "pass\n");  // claimed fixed, but the archive still fails
  EXPECT_EQ(regress(set, &out), 1) << out;
  EXPECT_NE(out.find("class4  pass      0/1 as expected; still fails"), std::string::npos) << out;
}

}  // namespace
}  // namespace minrepro
