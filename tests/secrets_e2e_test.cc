// Whole-binary tier: secrets leave by no file (#43.5). A step whose error
// message carries an AWS secret access key and a URL whose password holds
// '$' and '!' (allowed unencoded), and a case whose context holds both:
// after a real shrink, no file minrepro writes into the archive
// (signature.txt, REPORT.md, REPORT.html, repro.py, case.yaml, op/...) and
// not the work directory's REPORT.html holds either secret; the
// placeholders say which rule took it. The message also holds an
// Authorization header, a password in a URL's query and a URL password with
// an unencoded '@'; trial.env holds an API key (a name that says so) and a
// URL with a password, whose values stay out of case.yaml and repro.py (the
// self-check gives the step its variable, the maintainer sets it), and
// whose value the message quotes (the self-check and verify compare it as
// the placeholder the record holds). The
// user's own step, bundled as it is, is named in a warning instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::runCommand;
using testing::writeFile;

constexpr const char* kAwsKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr const char* kUrlPassword = "pa$$w0rd!x";

constexpr const char* kWandbKey = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432";
constexpr const char* kBearer = "opaque7Qx2Lm9Rt4Vb8Nz1";

constexpr const char* kStep = R"PY(import os, sys
import torch

key = os.environ["WANDB_API_KEY"]  # the step needs it: the self-check must give it
db = os.environ["DB_PASSWORD"]
batch = torch.load(sys.argv[1], weights_only=True)
if bool((batch["x"] == 7).any()):
    raise RuntimeError("upload failed for s3 with aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "
                       "via https://alice:pa$$w0rd!x@data.example.com/shard-3 "
                       "(bot xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx); "
                       "headers {'Authorization': 'Bearer opaque7Qx2Lm9Rt4Vb8Nz1'}, "
                       "mirror https://bob:p@ssw0rd@mirror.example.com/x?user=bob&password=qu3ry-pw9 "
                       "key " + key + ", db " + db)
)PY";

// The batch every case here shrinks: x = 0..11, ids 300..311 (sample 7 is
// the culprit of each step).
bool makeBatch(const fs::path& dir, std::string* out) {
  return runCommand(testing::python() +
                        " -c \"import torch; torch.save({'x': torch.arange(12), 'sample_id': "
                        "torch.arange(12) + 300}, '" +
                        (dir / "batch.pt").string() + "')\"",
                    out) == 0;
}

// DIR/step.py: `preamble` (what the step needs first), then the batch read
// and the case's failure, an IndexError whenever sample 7 (id 307) is kept.
void writeStepFailingOnSeven(const fs::path& dir, const std::string& preamble) {
  writeFile(dir / "step.py", "import os, sys\nimport torch\n\n" + preamble +
                                 "batch = torch.load(sys.argv[1], weights_only=True)\n"
                                 "if bool((batch[\"x\"] == 7).any()):\n"
                                 "    raise IndexError(\"index 7 is out of bounds for dimension 0 with size 7\")\n");
}

// DIR/case.yaml running step.py on the batch, with `args` after {batch}
// and `trial_keys` (more keys of trial:, each line indented by two).
void writeStepCase(const fs::path& dir, const std::string& args, const std::string& trial_keys) {
  writeFile(dir / "case.yaml", "batch: batch.pt\nsamples: {tensors: {x: 0}, ids: sample_id}\ntrial:\n  command: [" +
                                   testing::python() + ", \"{case_dir}/step.py\", \"{batch}\"" + args + "]\n" +
                                   trial_keys);
}

// minrepro shrink on DIR/case.yaml, into DIR/w and DIR/repro.tar.gz.
int shrinkCase(const fs::path& dir, std::string* out) {
  return runCommand(std::string(MINREPRO_BINARY) + " shrink --config " + (dir / "case.yaml").string() + " --work-dir " +
                        (dir / "w").string() + " --output " + (dir / "repro.tar.gz").string() + " 2>&1",
                    out);
}

TEST(Secrets, NoFileOfTheArchiveCarriesAKeyOrAUrlPassword) {
  testing::TempDir work("minrepro-secrets");
  std::string out;
  ASSERT_TRUE(makeBatch(work.path(), &out)) << out;
  writeFile(work.path() / "step.py", kStep);
  writeFile(work.path() / "case.yaml",
            "batch: batch.pt\nsamples: {tensors: {x: 0}, ids: sample_id}\n"
            "trial:\n  command: [" +
                testing::python() +
                ", \"{case_dir}/step.py\", \"{batch}\"]\n"
                "  env: {WANDB_API_KEY: '" +
                kWandbKey +
                "', DATA_URL: 'https://carol:d4t4-pw7@data.example.com/', DB_PASSWORD: 'Tr0ub4dor&3x'}\n"
                "context:\n  store: 'https://bob:s3cr$t!x@store.example.com/bucket'\n"
                "  credentials: 'aws_secret_access_key=" +
                kAwsKey +
                "'\n  db_password: 'hunter2-x9'\n"
                // A token as a context key (probe 25: kept in case.yaml and REPORT.html).
                "  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: 'a key that is a token'\n");
  ASSERT_EQ(shrinkCase(work.path(), &out), 0) << out;
  EXPECT_NE(out.find("reduced 12 -> 1 samples (ids [307])"), std::string::npos) << out;
  const fs::path dir = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", dir));
  std::size_t files = 0;
  std::vector<fs::path> checked{work.path() / "w" / "REPORT.html"};
  // The step is the user's own code, bundled byte for byte (a changed
  // script would be another program): the run names what it carries.
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().filename() != "step.py") checked.push_back(entry.path());
  EXPECT_NE(out.find("warning: the archive carries"), std::string::npos) << out;
  EXPECT_NE(out.find("step.py"), std::string::npos) << out;
  for (const fs::path& file : checked) {
    const std::string text = readFile(file);
    ++files;
    for (const std::string& secret :
         {std::string(kAwsKey), std::string(kUrlPassword), std::string("s3cr$t!x"), std::string("hunter2-x9"),
          std::string("AbCdEfGhIjKlMnOpQrStUvWx"), std::string(kWandbKey), std::string(kBearer),
          std::string("p@ssw0rd"), std::string("ssw0rd@"), std::string("qu3ry-pw9"), std::string("d4t4-pw7"),
          std::string("Tr0ub4dor"), std::string("QpZkWmXnRtYbVcLdJfGh")})
      EXPECT_EQ(text.find(secret), std::string::npos) << file << " carries " << secret;
  }
  EXPECT_GE(files, 6u);
  // What the terminal showed (it ends up in CI logs) holds none of them
  // either; the work directory's log keeps the original.
  for (const std::string& secret : {std::string(kAwsKey), std::string(kUrlPassword), std::string(kWandbKey),
                                    std::string(kBearer), std::string("qu3ry-pw9"), std::string("Tr0ub4dor")})
    EXPECT_EQ(out.find(secret), std::string::npos) << "the terminal shows " << secret << "\n" << out;
  EXPECT_NE(readFile(work.path() / "w" / "minrepro.log").find(kAwsKey), std::string::npos);
  const std::string signature = readFile(dir / "signature.txt");
  EXPECT_NE(signature.find("aws_secret_access_key=<secret:aws-secret-access-key>"), std::string::npos) << signature;
  EXPECT_NE(signature.find("https://alice:<secret:basic-auth-url>@data.example.com"), std::string::npos) << signature;
  // trial.env's secrets: left out and said so; the self-check (which the
  // run passed: exit 0) gave the step its variable, and so does the maintainer.
  EXPECT_NE(out.find("note: trial.env.WANDB_API_KEY looks like a secret: the archive leaves its value out"),
            std::string::npos)
      << out;
  EXPECT_NE(readFile(dir / "case.yaml").find("<secret:env-DATA_URL>"), std::string::npos);
  // The op step's runs of repro.py got the variables too (a KeyError there
  // would be the step's own failure, not the case's).
  EXPECT_EQ(out.find("different message: \"'WANDB_API_KEY'\""), std::string::npos) << out;
  EXPECT_NE(readFile(dir / "repro.py").find("set WANDB_API_KEY before running this"), std::string::npos);
  // The archive still reproduces: the placeholder is compared as the message was.
  EXPECT_EQ(runCommand(std::string("WANDB_API_KEY=") + kWandbKey + " DB_PASSWORD='Tr0ub4dor&3x' " + MINREPRO_BINARY +
                           " verify --runs 1 " + (work.path() / "repro.tar.gz").string() + " 2>&1",
                       &out),
            0)
      << out;
}

// A switch's variable that names a secret (its branch stays on: the step
// needs it) is left out of the archive like trial.env's own, and the
// self-check and the op step give their runs its value.
// An error line names the path it was given: a token in it is scrubbed
// there too, as in every other line minrepro prints (probe 30).
TEST(Secrets, AnErrorLineScrubsATokenInAPath) {
  std::string out;
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) +
                           " shrink --batch /nonexistent/ghp_aB3dEfGhIjKlMnOpQrStUvWxYz0123456789/missing.pt -- "
                           "python3 x.py {batch} 2>&1",
                       &out),
            2)
      << out;
  EXPECT_NE(out.find("/nonexistent/<secret:github-pat>/missing.pt: no such batch file"), std::string::npos) << out;
  EXPECT_EQ(out.find("aB3dEfGh"), std::string::npos) << out;
}

TEST(Secrets, ASwitchsSecretVariableIsGivenToTheSelfCheck) {
  testing::TempDir work("minrepro-secrets-switch");
  std::string out;
  ASSERT_TRUE(makeBatch(work.path(), &out)) << out;
  writeStepFailingOnSeven(work.path(),
                          "token = os.environ[\"REGISTRY_TOKEN\"]  # a KeyError without the switch's variable\n");
  writeStepCase(work.path(), "",
                "  switches:\n    - {name: registry, env: {REGISTRY_TOKEN: 'Rg7tOk9xQ2'}, off_env: {UNUSED: '1'}}\n");
  ASSERT_EQ(shrinkCase(work.path(), &out), 0) << out;
  EXPECT_NE(out.find("self-check: the archive reproduced on its own"), std::string::npos) << out;
  EXPECT_NE(out.find("note: trial.env.REGISTRY_TOKEN looks like a secret"), std::string::npos) << out;
  const fs::path dir = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", dir));
  for (const char* file : {"case.yaml", "repro.py", "REPORT.md", "signature.txt"})
    EXPECT_EQ(readFile(dir / file).find("Rg7tOk9xQ2"), std::string::npos) << file;
  EXPECT_NE(readFile(dir / "case.yaml").find("<secret:env-REGISTRY_TOKEN>"), std::string::npos);
}

// Secrets on the trial's command line: a flag's value a rule finds, a
// --name=value, and a trial.env secret passed as an argument too. The
// archive's case.yaml and repro.py name variables instead ({env:NAME}),
// the self-check gives them, and verify reproduces with them set.
TEST(Secrets, TheCommandsArgumentsCarryNoSecret) {
  testing::TempDir work("minrepro-secrets-argv");
  std::string out;
  ASSERT_TRUE(makeBatch(work.path(), &out)) << out;
  writeStepFailingOnSeven(work.path(),
                          "args = sys.argv[2:]\nassert args == [\"--api-key\", \"ApiK3yArg9x\", "
                          "\"--hf-token=Hf7TokArg2q\", \"--hub\", \"HubT0kenVal5\"], args\n");
  writeStepCase(work.path(), ", --api-key, ApiK3yArg9x, --hf-token=Hf7TokArg2q, --hub, HubT0kenVal5",
                "  env: {HF_TOKEN: HubT0kenVal5}\n");
  ASSERT_EQ(shrinkCase(work.path(), &out), 0) << out;
  EXPECT_NE(out.find("self-check: the archive reproduced on its own"), std::string::npos) << out;
  EXPECT_NE(out.find("note: argument 4 of the trial's command holds a secret"), std::string::npos) << out;
  const fs::path dir = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", dir));
  for (const char* file : {"case.yaml", "repro.py", "REPORT.md", "REPORT.html", "signature.txt"})
    for (const char* secret : {"ApiK3yArg9x", "Hf7TokArg2q", "HubT0kenVal5"})
      EXPECT_EQ(readFile(dir / file).find(secret), std::string::npos) << file << " carries " << secret;
  const std::string case_yaml = readFile(dir / "case.yaml");
  EXPECT_NE(case_yaml.find("{env:MINREPRO_SECRET_ARG4}"), std::string::npos) << case_yaml;
  EXPECT_NE(case_yaml.find("{env:HF_TOKEN}"), std::string::npos) << case_yaml;
  EXPECT_EQ(runCommand("HF_TOKEN=HubT0kenVal5 MINREPRO_SECRET_ARG4=ApiK3yArg9x MINREPRO_SECRET_ARG5=Hf7TokArg2q " +
                           std::string(MINREPRO_BINARY) + " verify --runs 1 " +
                           (work.path() / "repro.tar.gz").string() + " 2>&1",
                       &out),
            0)
      << out;
  // The archive's case runs again with minrepro, its variables set where it runs.
  EXPECT_EQ(
      runCommand("cd " + dir.string() +
                     " && HF_TOKEN=HubT0kenVal5 MINREPRO_SECRET_ARG4=ApiK3yArg9x MINREPRO_SECRET_ARG5=Hf7TokArg2q " +
                     MINREPRO_BINARY + " shrink --config case.yaml --python " + testing::python() +
                     " --output again.tar.gz --work-dir w2 --no-op-repro 2>&1",
                 &out),
      0)
      << out;
  EXPECT_NE(out.find("original reproduces: index-error"), std::string::npos) << out;
}

// A tensor whose name reads like a token: case.yaml names it as the batch
// keys it (the step reads it so), and says so as it does for the batch
// (#43, probe 22: REPORT.md's list named batch.pt and not case.yaml).
TEST(Secrets, ATensorNamedLikeATokenIsListedInCaseYamlToo) {
  testing::TempDir work("minrepro-secrets-name");
  const std::string name = "ghp_" + std::string("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A");
  std::string out;
  ASSERT_EQ(runCommand(testing::python() +
                           " -c \"import torch; torch.save({'x': torch.arange(12), 'sample_id': "
                           "torch.arange(12) + 300, '" +
                           name + "': torch.zeros(12)}, '" + (work.path() / "batch.pt").string() + "')\"",
                       &out),
            0)
      << out;
  writeStepFailingOnSeven(work.path(), "");
  writeFile(work.path() / "case.yaml", "batch: batch.pt\nsamples: {tensors: {x: 0, " + name +
                                           ": 0}, ids: sample_id}\ntrial:\n  command: [" + testing::python() +
                                           ", \"{case_dir}/step.py\", \"{batch}\"]\n");
  ASSERT_EQ(runCommand(std::string(MINREPRO_BINARY) + " shrink --no-op-repro --config " +
                           (work.path() / "case.yaml").string() + " --work-dir " + (work.path() / "w").string() +
                           " --output " + (work.path() / "repro.tar.gz").string() + " 2>&1",
                       &out),
            0)
      << out;
  const fs::path dir = work.path() / "extracted";
  ASSERT_TRUE(testing::extractInto(work.path() / "repro.tar.gz", dir));
  const std::string case_yaml = readFile(dir / "case.yaml");
  const std::size_t at = case_yaml.find(name);  // the batch is keyed so
  ASSERT_NE(at, std::string::npos) << case_yaml;
  const std::string line =
      "case.yaml:" + std::to_string(1 + std::count(case_yaml.begin(), case_yaml.begin() + at, '\n'));
  EXPECT_NE(out.find("warning: the archive carries " + line + ": github-pat verbatim"), std::string::npos) << out;
  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_NE(report.find("**Looks like a secret, copied verbatim**: " + line + ": github-pat"), std::string::npos)
      << report;
}

}  // namespace
}  // namespace minrepro
