// Whole-binary tier: a full file system is named as one (#43.6). Each case
// runs the real binary inside bubblewrap with a small tmpfs (bwrap --size):
// a work directory without room is refused before the first trial; a file
// system that fills while the trials run (the step itself fills it, as a
// dataset cache or a checkpoint would) ends the run with exit 4, the path,
// what is free and the command that goes on; an archive that cannot be
// written is the same, leaves no half-written file, and the command it
// gives writes the archive once there is room. Without this the first ended
// "the original fails, but not as case.yaml's failure section expects" and
// the last "Write error" with exit 2, after the whole search.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::runCommand;
using testing::writeFile;

// Fails on the sample whose x is 7; on its first run (the marker
// $FILL_MARK, outside the case's directory, says it ran: a look at a file
// beside the case's files fails the self-check) it fills the file system of $FILL_DIR (all but
// 4 KB) and, when that is where the trial's
// batch lies, fails writing beside it as a real step would.
constexpr const char* kStep = R"PY(import os, sys
import torch

fill = os.environ.get("FILL_DIR")
mark = os.environ.get("FILL_MARK", "")
if fill and not os.path.exists(mark):
    open(mark, "w").close()
    st = os.statvfs(fill)
    with open(os.path.join(fill, "filler"), "wb") as f:
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - 4096, 0))
    if os.stat(fill).st_dev == os.stat(os.path.dirname(os.path.abspath(sys.argv[1]))).st_dev:
        with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "cache.bin"), "wb") as f:
            f.write(b"\0" * 1_000_000)
batch = torch.load(sys.argv[1], weights_only=True)
if bool((batch["x"] == 7).any()):
    raise IndexError("index 7 is out of bounds for dimension 0 with size 7")
)PY";

class DiskFull : public ::testing::Test {
 protected:
  void SetUp() override {
    if (runCommand("command -v bwrap >/dev/null && bwrap --dev-bind / / --size 65536 --tmpfs /mnt true", nullptr) != 0)
      GTEST_SKIP() << "bubblewrap cannot make a tmpfs here";
    std::string out;
    ASSERT_EQ(runCommand(testing::python() + " -c \"import torch; torch.save({'x': torch.arange(12), 'sample_id': " +
                             "torch.arange(12) + 300}, '" + (dir_.path() / "batch.pt").string() + "')\"",
                         &out),
              0)
        << out;
    writeFile(dir_.path() / "step.py", kStep);
  }
  // case.yaml with FILL_DIR in the trial's environment ("" for none); with
  // or without a failure section (without: the original's first failure is
  // the reference, whatever it is).
  void writeCase(const std::string& fill_dir, bool failure_section = true) {
    writeFile(dir_.path() / "case.yaml",
              "batch: batch.pt\nsamples: {tensors: {x: 0}, ids: sample_id}\nflaky: {enabled: false}\n"
              "trial:\n  command: [" +
                  testing::python() + ", \"{case_dir}/step.py\", \"{batch}\"]\n" +
                  (fill_dir.empty() ? ""
                                    : "  env: {FILL_DIR: '" + fill_dir + "', FILL_MARK: '" +
                                          (marks_.path() / "filled").string() + "'}\n") +
                  (failure_section ? "failure: {family: index-error}\n" : ""));
  }
  // `script` run by sh inside bwrap with a tmpfs of `bytes` at `mount`.
  int inSandbox(const fs::path& mount, std::size_t bytes, const std::string& script, std::string* out) {
    fs::create_directories(mount);
    return runCommand("bwrap --dev-bind / / --size " + std::to_string(bytes) + " --tmpfs " + mount.string() +
                          " -- sh -c '" + script + "' 2>&1",
                      out);
  }
  std::string shrink(const fs::path& work, const fs::path& output) const {
    return std::string(MINREPRO_BINARY) + " shrink --config " + (dir_.path() / "case.yaml").string() + " --work-dir " +
           work.string() + " --output " + output.string();
  }
  testing::TempDir dir_{"minrepro-disk-full"};
  testing::TempDir marks_{"minrepro-disk-full-marks"};
};

TEST_F(DiskFull, AWorkDirectoryWithoutRoomIsNamedBeforeTheFirstTrial) {
  writeCase("");
  const fs::path mount = dir_.path() / "small", work = mount / "w";
  std::string out;
  EXPECT_EQ(inSandbox(mount, 40 << 10,
                      shrink(work, dir_.path() / "repro.tar.gz") + "; echo status=$?; ls -A " + work.string(), &out),
            0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("error: no space left on the file system of " + work.string() + " ("), std::string::npos) << out;
  EXPECT_NE(out.find("KB free) for the trials' batches, outputs and logs"), std::string::npos) << out;
  EXPECT_NE(out.find("give another --work-dir"), std::string::npos) << out;
  EXPECT_EQ(out.find("trial 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("failure section"), std::string::npos) << out;
}

TEST_F(DiskFull, AFileSystemThatFillsWhileTheTrialsRunEndsTheRunWithTheCommandThatGoesOn) {
  const fs::path mount = dir_.path() / "small", work = mount / "w";
  writeCase(mount.string(), /*failure_section=*/false);  // the full disk's failure must not become the reference
  std::string out;
  EXPECT_EQ(inSandbox(mount, 24 << 20,
                      shrink(work, dir_.path() / "repro.tar.gz") + "; echo status=$?; find " + work.string() +
                          " -name \"*.tmp\" -size 0; echo trial directories left: $(ls -A " + work.string() +
                          "/trials 2>/dev/null | wc -l)",
                      &out),
            0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("error: no space left on the file system of " + work.string() + " ("), std::string::npos) << out;
  EXPECT_NE(out.find("KB free) when trial 1 failed ("), std::string::npos) << out;
  // The round's trial directories go with it: the disk it said was full
  // kept their outputs (probe 23: 20 MB, the file system still full).
  EXPECT_NE(out.find("trial directories left: 0"), std::string::npos) << out;
  EXPECT_NE(out.find("; then to go on from here (the trials so far are replayed, not run again): "), std::string::npos)
      << out;
  EXPECT_NE(out.find(" shrink --config " + (dir_.path() / "case.yaml").string()), std::string::npos) << out;
  EXPECT_NE(out.find("--resume"), std::string::npos) << out;
  EXPECT_EQ(out.find("failure section"), std::string::npos) << out;
  EXPECT_EQ(out.find("nothing to reduce"), std::string::npos) << out;
  EXPECT_EQ(out.find(".tmp\n"), std::string::npos) << "an empty temporary file was left: " << out;
}

// A zero-config start whose work directory's file system is full: its
// case.yaml cannot be written, which is a full disk (exit 4), not a path
// this user may not write (exit 2: probe 23, the --resume line after a
// full disk sent the user to fix rights).
TEST_F(DiskFull, AZeroConfigCaseThatCannotBeWrittenOnAFullDiskIsAFullDisk) {
  const fs::path mount = dir_.path() / "small", work = mount / "w";
  std::string out;
  EXPECT_EQ(inSandbox(mount, 64 << 10,
                      "mkdir -p " + work.string() + " && head -c 10000000 /dev/zero > " + mount.string() +
                          "/filler 2>/dev/null; cd " + dir_.path().string() + " && " + MINREPRO_BINARY +
                          " shrink --batch batch.pt --work-dir " + work.string() + " -- " + testing::python() +
                          " step.py {batch}; echo status=$?",
                      &out),
            0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("no space left on the file system of " + work.string()), std::string::npos) << out;
  EXPECT_EQ(out.find("may write"), std::string::npos) << out;
}

TEST_F(DiskFull, AnArchiveThatCannotBeWrittenLeavesNothingAndTheCommandItGivesWritesIt) {
  const fs::path mount = dir_.path() / "out", output = mount / "repro.tar.gz", work = dir_.path() / "w";
  writeCase(mount.string());
  std::string out;
  // Filled by the first trial; freed after the run, then the command it gave.
  const std::string script = shrink(work, output) + "; echo status=$?; ls -A " + mount.string() + "; rm " +
                             (mount / "filler").string() + "; " + shrink(work, output) +
                             " --resume; echo resumed=$?; ls -A " + mount.string();
  EXPECT_EQ(inSandbox(mount, 5 << 20, script, &out), 0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("error: no space left on the file system of " + mount.string() + " ("), std::string::npos) << out;
  EXPECT_NE(out.find("writing repro.tar.gz: free some space there, or write the archive elsewhere"), std::string::npos)
      << out;
  EXPECT_NE(out.find("; then to go on from here (the trials so far are replayed, not run again): "), std::string::npos)
      << out;
  EXPECT_NE(out.find(" shrink --config " + (dir_.path() / "case.yaml").string()), std::string::npos) << out;
  EXPECT_EQ(out.find(".partial"), std::string::npos) << "a half-written archive was left: " << out;
  EXPECT_EQ(out.find("Write error"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed=0"), std::string::npos) << out;
  EXPECT_NE(out.find("ids [307]"), std::string::npos) << out;
  EXPECT_NE(out.rfind("repro.tar.gz"), out.find("repro.tar.gz")) << out;
}

// verify extracts the archive under TMPDIR: when that is full, the full
// place is named (exit 4) and the archive is not blamed (it said "cannot
// write 'repro.py' (disk full?)", exit 2, "Only archives made by minrepro
// shrink can be verified"); nothing half-extracted is left there.
TEST_F(DiskFull, AFullTemporaryDirectoryIsNamedByVerifyNotBlamedOnTheArchive) {
  writeCase("");
  const fs::path work = dir_.path() / "w", output = dir_.path() / "repro.tar.gz", mount = dir_.path() / "tmp";
  std::string out;
  ASSERT_EQ(runCommand(shrink(work, output) + " 2>&1", &out), 0) << out;
  const std::string script = "head -c 10000000 /dev/zero > " + mount.string() +
                             "/filler 2>/dev/null; TMPDIR=" + mount.string() + " " + MINREPRO_BINARY + " verify " +
                             output.string() + " --sandbox off; echo status=$?; ls -A " + mount.string();
  EXPECT_EQ(inSandbox(mount, 64 << 10, script, &out), 0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("no space left on the file system of " + mount.string() + " ("), std::string::npos) << out;
  EXPECT_NE(out.find("set TMPDIR to a directory with room"), std::string::npos) << out;
  EXPECT_EQ(out.find("Only archives made by minrepro"), std::string::npos) << out;
  EXPECT_NE(out.find("status=4\nfiller\n"), std::string::npos) << "a half-extracted archive was left: " << out;
}

// The temporary directory fills while a run of repro.py goes on (the run
// itself fills it, as a cache would): its traceback is lost, so its ending
// is no verdict on the archive. verify names the full directory (exit 4);
// it said "reproduced in 0 of 2 runs", exit 1 (probe 30).
TEST_F(DiskFull, ATemporaryDirectoryThatFillsDuringARunGivesNoVerdict) {
  const fs::path made = dir_.path() / "made", archive = dir_.path() / "filling.tar.gz", mount = dir_.path() / "tmp";
  fs::create_directories(made);
  writeFile(made / "repro.py",
            "import os, sys\nst = os.statvfs('.')\nwith open('filler', 'wb') as f:\n"
            "    f.write(b'\\0' * max(st.f_bavail * st.f_frsize - 4096, 0))\n"
            "sys.stderr.write('x' * 300000 + '\\n')\nraise IndexError('Target 4 is out of bounds.')\n");
  writeFile(made / "signature.txt", "family: index-error\nmessage: Target 4 is out of bounds.\n");
  std::string out;
  ASSERT_EQ(runCommand("tar czf " + archive.string() + " -C " + made.string() + " repro.py signature.txt", &out), 0)
      << out;
  const std::string script = "TMPDIR=" + mount.string() + " " + MINREPRO_BINARY + " verify " + archive.string() +
                             " --runs 1 --sandbox off; echo status=$?";
  EXPECT_EQ(inSandbox(mount, 2 << 20, script, &out), 0);
  EXPECT_NE(out.find("status=4"), std::string::npos) << out;
  EXPECT_NE(out.find("no space left on the file system of " + mount.string() + " ("), std::string::npos) << out;
  EXPECT_NE(out.find("no verdict is given"), std::string::npos) << out;
  EXPECT_EQ(out.find("reproduced in 0 of 1"), std::string::npos) << out;
}

// What a run killed while writing left (a half-written archive, best/'s
// temporary batch, an empty REPORT.html.tmp) the next run in the same place
// removes; an archive another living process is writing it leaves alone.
TEST_F(DiskFull, WhatAKilledRunLeftHalfWrittenTheNextRunRemoves) {
  writeCase("");
  const fs::path work = dir_.path() / "w", output = dir_.path() / "repro.tar.gz";
  // A pid that has ended and was reaped here: an orphan's pid may stay taken
  // by its zombie where init does not reap.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string gone = std::to_string(child);
  std::string out;
  fs::create_directories(work / "best");
  const fs::path stale_archive = output.string() + "." + gone + ".123456.partial";
  const fs::path live_archive = output.string() + "." + std::to_string(::getpid()) + ".654321.partial";
  for (const fs::path& file :
       {stale_archive, live_archive, work / "best" / "batch.pt.partial", work / "REPORT.html.tmp", work / "lock"})
    writeFile(file, "");
  ASSERT_EQ(runCommand(shrink(work, output) + " 2>&1", &out), 0) << out;
  EXPECT_FALSE(fs::exists(stale_archive));
  EXPECT_FALSE(fs::exists(work / "best" / "batch.pt.partial"));
  EXPECT_FALSE(fs::exists(work / "REPORT.html.tmp"));
  EXPECT_TRUE(fs::exists(live_archive)) << "the archive a living process writes was removed";
  EXPECT_TRUE(fs::exists(output));
}

}  // namespace
}  // namespace minrepro
