// minrepro verify: real archives made by minrepro shrink from the bundled
// examples, fixes applied to them, and hostile archives; plus small
// hand-made archives for the run-level rules (fresh processes, diagnostic
// variables removed, reproduction rate).
#include "engine/verify.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::python;
using testing::runCommand;

std::string minrepro() { return MINREPRO_BINARY; }

std::string verify(const fs::path& archive, const std::string& flags, std::string* output) {
  runCommand(minrepro() + " verify " + archive.string() + " " + flags + " 2>&1", output);
  return *output;
}

int verifyStatus(const fs::path& archive, const std::string& flags, std::string* output) {
  return runCommand(minrepro() + " verify " + archive.string() + " " + flags + " 2>&1", output);
}

// ------------------------------------------------------------ real archives

class VerifyExamples : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("minrepro-verify-examples");
    std::string output;
    ASSERT_EQ(runCommand(python() + " " + std::string(MINREPRO_SOURCE_DIR) + "/configs/examples/make_examples.py " +
                             dir_->path().string(), &output), 0) << output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // The example's archive, made once per suite by the real minrepro shrink.
  static fs::path archive(const std::string& example) {
    const fs::path out = dir_->path() / (example + ".tar.gz");
    if (fs::exists(out)) return out;
    std::string output;
    EXPECT_EQ(runCommand(minrepro() + " shrink -q --config " + (dir_->path() / example / "case.yaml").string() +
                             " --output " + out.string() + " --work-dir " + (dir_->path() / ("work-" + example)).string(),
                         &output), 0) << output;
    return out;
  }

  // A copy of `source` whose batch.pt was changed by the Python statement
  // `edit` (on the dict `b`), packed again the way a user would with tar.
  fs::path withBatchEdit(const fs::path& source, const std::string& name, const std::string& edit) {
    const fs::path dir = work_.path() / name;
    fs::create_directories(dir);
    std::string output;
    EXPECT_EQ(runCommand("tar xzf " + source.string() + " -C " + dir.string(), &output), 0) << output;
    EXPECT_EQ(runCommand("cd " + dir.string() + " && " + python() + " -c \"import torch; b = torch.load('batch.pt'); " +
                             edit + "; torch.save(b, 'batch.pt')\"", &output), 0) << output;
    const fs::path out = work_.path() / (name + ".tar.gz");
    EXPECT_EQ(runCommand("tar czf " + out.string() + " -C " + dir.string() + " .", &output), 0) << output;
    return out;
  }

  static testing::TempDir* dir_;
  testing::TempDir work_{"minrepro-verify"};
};

testing::TempDir* VerifyExamples::dir_ = nullptr;

TEST_F(VerifyExamples, Class4ReproducesInEveryFreshRun) {
  std::string out;
  ASSERT_EQ(verifyStatus(archive("class4"), "", &out), 0) << out;
  EXPECT_NE(out.find("recorded failure: index-error in nll_loss: Target 4 is out of bounds."), std::string::npos) << out;
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
  const fs::path fixed = withBatchEdit(archive("class4"), "fixed", "b['target'][b['target'] == 4] = 3");
  std::string out;
  EXPECT_EQ(verifyStatus(fixed, "--expect pass", &out), 0) << out;
  EXPECT_NE(out.find("passed: processed 1 of 1 expected samples"), std::string::npos) << out;
  EXPECT_NE(out.find("passed in 3 of 3 runs (100%)"), std::string::npos) << out;
  EXPECT_EQ(verifyStatus(fixed, "--runs 1", &out), 1) << out;
  EXPECT_NE(out.find("reproduced in 0 of 1 runs (0%)"), std::string::npos) << out;
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

TEST_F(VerifyExamples, CommandArchiveCannotClaimAPassFromNoExceptionAlone) {
  std::string out;
  EXPECT_EQ(verifyStatus(archive("command"), "--expect pass", &out), 2) << out;
  EXPECT_NE(out.find("records no expected result"), std::string::npos) << out;
}

// ------------------------------------------------------------ hand-made archives

const std::string kSignature =
    "family: index-error\noperator: nll_loss\ncompare-operator: no\nmessage: Target 4 is out of bounds.\nprocessed: 1\n";

// repro.py that fails as recorded unless told otherwise by `condition`
// (Python, true to pass instead).
fs::path makeArchive(const fs::path& dir, const std::string& condition) {
  const std::string repro =
      "import os, sys\nHERE = os.path.dirname(os.path.abspath(__file__))\n"
      "if " + condition + ":\n    print('minrepro-result: processed=1 loss=0.5')\n    sys.exit(0)\n"
      "raise IndexError('Target 4 is out of bounds.')\n";
  const fs::path out = dir / "repro.tar.gz";
  writeTarGz(out, {{"repro.py", repro, true}, {"signature.txt", kSignature}});
  return out;
}

TEST(Verify, DiagnosticVariablesAreRemovedFromEveryRun) {
  testing::TempDir dir;
  std::string condition;
  for (const auto& name : diagnosticVariables()) condition += (condition.empty() ? "" : " or ") + ("'" + name + "' in os.environ");
  const fs::path archive = makeArchive(dir.path(), condition);
  std::string out;
  EXPECT_EQ(runCommand("CUDA_LAUNCH_BLOCKING=1 AMD_SERIALIZE_KERNEL=3 HIP_LAUNCH_BLOCKING=1 TORCH_SHOW_CPP_STACKTRACES=1 "
                       "PYTORCH_NO_CUDA_MEMORY_CACHING=1 " + minrepro() + " verify --runs 2 " + archive.string() + " 2>&1",
                       &out), 0) << out;
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
  writeTarGz(dir.path() / "old.tar.gz", {{"repro.py", "raise SystemExit(1)\n", true}});
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "", &out), 2) << out;
  EXPECT_NE(out.find("no signature.txt"), std::string::npos) << out;
  writeTarGz(dir.path() / "bad.tar.gz", {{"repro.py", "", true}, {"signature.txt", "family: nonsense\n"}});
  EXPECT_EQ(verifyStatus(dir.path() / "bad.tar.gz", "", &out), 2) << out;
  EXPECT_NE(out.find("signature.txt:1: unknown family 'nonsense'"), std::string::npos) << out;
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "--runs 0", &out), 2) << out;
  EXPECT_EQ(verifyStatus(dir.path() / "old.tar.gz", "--expect maybe", &out), 2) << out;
}

TEST(Verify, ManifestRoundTrips) {
  Manifest m;
  m.signature.family = FailureFamily::DeviceAssert;
  m.signature.op = "nll_loss";
  m.signature.message = "k: Assertion `t >= 0 && t < n_classes` failed.";
  m.compare_operator = true;
  m.processed = 7;
  const Manifest back = parseManifest(renderManifest(m), "x");
  EXPECT_EQ(back.signature.family, m.signature.family);
  EXPECT_EQ(back.signature.op, m.signature.op);
  EXPECT_EQ(back.signature.message, m.signature.message);
  EXPECT_TRUE(back.compare_operator);
  EXPECT_EQ(back.processed, 7);
  EXPECT_THROW(parseManifest("family: index-error\nprocessed: -1\n", "x"), VerifyError);
  EXPECT_THROW(parseManifest("operator: x\n", "x"), VerifyError);
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
  ASSERT_EQ(runCommand(python() + " " + (made / "maker.py").string() + " " + made.string() + " " + outside.string(),
                       &out), 0) << out;
  const std::vector<Hostile> cases = {
      {"absolute", "has an absolute path"}, {"dotdot", "climbs out of the archive with '..'"},
      {"deep-dotdot", "climbs out"},        {"symlink", "'escape' is a link"},
      {"hardlink", "'passwd' is a link"},   {"device", "'null' is a device, fifo or socket"},
      {"fifo", "'pipe' is a device"},       {"huge", "'batch.pt' is too large"}};
  for (const auto& c : cases) {
    const fs::path archive = made / (c.name + ".tar.gz");
    const int status = runCommand("cd " + cwd.string() + " && TMPDIR=" + tmp.string() + " " + minrepro() +
                                      " verify " + archive.string() + " 2>&1", &out);
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

}  // namespace
}  // namespace minrepro
