// case.yaml loading: one test per kind of bad input (each checks the file,
// the key path, the line:column and the expected/found words of the
// message), the defaults, both trial kinds, and renderCase round trips.
#include "core/case_config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <initializer_list>
#include <random>

namespace minrepro {
namespace {

namespace fs = std::filesystem;

const char* const kHarnessCase = R"(batch: batch.pt
samples:
  tensors:
    input: 0
    target: 0
trial:
  harness:
    model: model.pt
    target: target
)";

class CaseConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("minrepro_case_" + std::string(info->name()) + "_" +
                                        std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    touch("batch.pt");
    touch("model.pt");
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path touch(const std::string& name) { return write(name, "x"); }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path casePath() const { return dir_ / "case.yaml"; }

  // The message of the BadInputError that loading `text` throws.
  std::string errorFor(const std::string& text) {
    write("case.yaml", text);
    try {
      loadCase(casePath());
    } catch (const BadInputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no BadInputError for:\n" << text;
    return "";
  }

  // "<case file>:<line>:<col>: <key path>: expected"
  std::string at(int line, int col, const std::string& path) const {
    return casePath().string() + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + path + ": expected";
  }

  fs::path dir_;
};

void expectHas(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "missing \"" << part << "\" in:\n" << message;
}

// ---------------------------------------------------------------- the file

TEST_F(CaseConfigTest, MissingFileNamesThePath) {
  try {
    loadCase(dir_ / "nope.yaml");
    FAIL() << "no BadInputError";
  } catch (const BadInputError& e) {
    expectHas(e.what(), {(dir_ / "nope.yaml").string() + ": cannot read the case file", "No such file", "--config"});
  }
}

TEST_F(CaseConfigTest, DirectoryAsCaseFile) {
  try {
    loadCase(dir_);
    FAIL() << "no BadInputError";
  } catch (const BadInputError& e) {
    expectHas(e.what(), {dir_.string() + ": cannot read the case file", "directory"});
  }
}

TEST_F(CaseConfigTest, YamlSyntaxErrorHasLineAndColumn) {
  const std::string msg = errorFor("batch: batch.pt\nsamples: [1, 2\ntrial: {}\n");
  expectHas(msg, {casePath().string() + ":", "invalid YAML", "end of sequence flow not found"});
  EXPECT_NE(msg.find(casePath().string() + ":3:"), std::string::npos) << msg;
}

// An alias bomb (probe 21): nine levels of anchors, each naming the one
// before nine times, 840 bytes that expand to 387 million values, kept
// shrink busy for minutes and compare deaf to signals. Refused at once,
// as is nesting past 64 levels.
TEST_F(CaseConfigTest, AnAliasBombAndDeepNestingAreRefused) {
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int j = 1; j < 9; ++j) bomb += ", " + prev;
    bomb += "]\n";
  }
  expectHas(errorFor(std::string(kHarnessCase) + bomb),
            {"more than 100000 values (its aliases, *name, expanded)", "without"});
  std::string deep = "deep: ";
  for (int i = 0; i < 70; ++i) deep += "[";
  for (int i = 0; i < 70; ++i) deep += "]";
  expectHas(errorFor(std::string(kHarnessCase) + deep + "\n"), {"more than 64 levels"});
}

// A case file of endless bytes (/dev/zero, a pipe that never ends, a
// generated file of gigabytes) was read whole: 22.6 GB in 60 s (probe 23).
// Read up to 4 MiB and refused past it; a case given through a pipe works.
TEST_F(CaseConfigTest, AnEndlessOrHugeCaseFileIsRefusedWithoutReadingItWhole) {
  std::string message;
  try {
    loadCase("/dev/zero");
  } catch (const BadInputError& e) {
    message = e.what();
  }
  expectHas(message, {"/dev/zero: the case file is larger than 4 MiB", "this is no regular file", "--config"});
}

// A "\0" in a quoted string was accepted and cut the value where a system
// call read it (work_dir "wo\0rk" made "wo"); normalize with std 0 made
// every input inf.
TEST_F(CaseConfigTest, NulInAStringAndNormalizeByZeroAreRefused) {
  expectHas(errorFor(std::string(kHarnessCase) + "work_dir: \"wo\\0rk\"\n"),
            {casePath().string() + ":10:11: a NUL character", "remove it"});
  expectHas(errorFor(std::string(kHarnessCase) + "  env: {A: \"x\\0y\"}\n"), {":10:12: a NUL character"});
  expectHas(errorFor(std::string(kHarnessCase) + "    transforms:\n      - {type: normalize, tensor: input, mean: 0, "
                                                 "std: 0}\n"),
            {at(11, 56, "trial.harness.transforms[0].std") + " a std other than 0 (normalize divides by it)"});
}

TEST_F(CaseConfigTest, TopLevelNotAMap) {
  expectHas(errorFor("- batch.pt\n- model.pt\n"),
            {casePath().string() + ":1:1: expected a map with the keys batch, samples, trial", "found a list"});
}

TEST_F(CaseConfigTest, EmptyFile) {
  expectHas(errorFor(""), {casePath().string() + ":1:1: expected a map with the keys", "found an empty value"});
}

TEST_F(CaseConfigTest, ErrorsUseThePathAsGiven) {
  write("case.yaml", "batch: missing.pt\n");
  const fs::path relative = fs::proximate(casePath());
  ASSERT_TRUE(relative.is_relative()) << relative;
  try {
    loadCase(relative);
    FAIL() << "no BadInputError";
  } catch (const BadInputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(relative.string() + ":1:8: batch: expected", 0), 0u) << e.what();
  }
}

// ---------------------------------------------------------------- keys

TEST_F(CaseConfigTest, UnknownTopLevelKeySuggestsTheClosest) {
  expectHas(errorFor("bach: batch.pt\n"), {at(1, 1, "bach"),
                                           "one of the keys batch, samples, trial, failure, reducers, output, "
                                           "work_dir, seed, context",
                                           "found unknown key 'bach'", "did you mean 'batch'?"});
}

TEST_F(CaseConfigTest, UnknownNestedKeysAtEveryLevel) {
  const std::string base = kHarnessCase;
  expectHas(errorFor(base + "  timout: 5\n"),
            {at(10, 3, "trial.timout"), "harness, command, env, timeout, memory_limit_mb", "found unknown key 'timout'",
             "did you mean 'timeout'?"});
  expectHas(errorFor(base + "    ignore_idx: 3\n"),
            {at(10, 5, "trial.harness.ignore_idx"), "model, input, target, loss, ignore_index",
             "did you mean 'ignore_index'?"});
  expectHas(errorFor(base + "failure:\n  famly: index-error\n"),
            {at(11, 3, "failure.famly"), "family, operator, message", "did you mean 'family'?"});
  expectHas(errorFor("batch: batch.pt\nsamples:\n  tensor: {input: 0}\n"),
            {at(3, 3, "samples.tensor"), "tensors, lists, ids", "did you mean 'tensors'?"});
}

TEST_F(CaseConfigTest, UnknownKeyWithoutCloseMatch) {
  const std::string msg = errorFor(std::string(kHarnessCase) + "frobnicate: 1\n");
  expectHas(msg, {at(10, 1, "frobnicate"), "found unknown key 'frobnicate'", "remove it"});
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST_F(CaseConfigTest, DuplicateKey) {
  expectHas(errorFor(std::string(kHarnessCase) + "batch: other.pt\n"),
            {at(10, 1, "batch"), "each key once", "found it again"});
}

// Without a samples section minrepro infers it when the batch is opened
// (harness/case_inference.h), as capture's cases rely on; lists and a mask
// are read, and a mask beside a lengths tensor is refused.
TEST_F(CaseConfigTest, SamplesSectionIsOptionalAndListsAndMaskAreRead) {
  const CaseConfig inferred = loadCase(write("case.yaml", "batch: batch.pt\ntrial: {command: [x, '{batch}']}\n"));
  EXPECT_TRUE(inferred.infer_samples);
  EXPECT_TRUE(inferred.sample_axes.empty());
  const CaseConfig given =
      loadCase(write("case.yaml",
                     "batch: batch.pt\nsamples: {tensors: {\"[0]\": 0}, lists: [\"[1]\", targets.boxes]}\n"
                     "sequence: {tensors: {ids: 1, mask: 1}, mask: mask}\ntrial: {command: [x, '{batch}']}\n"));
  EXPECT_FALSE(given.infer_samples);
  ASSERT_EQ(given.sample_axes.size(), 1u);
  EXPECT_EQ(given.sample_axes[0].tensor, "[0]");
  EXPECT_EQ(given.sample_lists, (std::vector<std::string>{"[1]", "targets.boxes"}));
  EXPECT_EQ(given.sequence.mask, "mask");
  expectHas(errorFor("batch: batch.pt\nsamples: {tensors: {ids: 0}}\nsequence: {tensors: {ids: 1}, lengths: l, "
                     "mask: m}\ntrial: {command: [x, '{batch}']}\n"),
            {at(3, 49, "sequence.mask"), "either sequence.lengths or sequence.mask", "found both"});
}

TEST_F(CaseConfigTest, MissingRequiredKeysPointAtTheEnclosingMap) {
  expectHas(errorFor("samples:\n  tensors: {input: 0}\n"),
            {at(1, 1, "batch"), "found no 'batch' key at the top level", "add 'batch:'"});
  expectHas(errorFor("batch: batch.pt\nsamples:\n  tensors: {input: 0}\n"),
            {at(1, 1, "trial"), "found no 'trial' key"});
  expectHas(errorFor("batch: batch.pt\nsamples:\n  ids: sample_ids\n"),
            {at(3, 3, "samples"), "a map with 'tensors' (or 'lists')", "leave the samples section out"});
  expectHas(
      errorFor("batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  harness:\n"
               "    input: x\n"),
      {at(5, 5, "trial.harness.model"), "the TorchScript model slice file", "found no 'model' key in trial.harness"});
}

// ---------------------------------------------------------------- types

TEST_F(CaseConfigTest, TimeoutMustBeAPositiveNumber) {
  const std::string base = kHarnessCase;
  expectHas(errorFor(base + "  timeout: abc\n"),
            {at(10, 12, "trial.timeout"), "a positive number of seconds, found 'abc'"});
  expectHas(errorFor(base + "  timeout: 0\n"), {at(10, 12, "trial.timeout"), "found '0'"});
  expectHas(errorFor(base + "  timeout: -3\n"), {"found '-3'"});
  expectHas(errorFor(base + "  timeout: [1]\n"), {"found a list"});
  expectHas(errorFor(base + "  timeout:\n"), {at(10, 3, "trial.timeout"), "found an empty value"});
}

TEST_F(CaseConfigTest, WrongTypes) {
  const std::string base = kHarnessCase;
  expectHas(errorFor(base + "  memory_limit_mb: -5\n"),
            {at(10, 20, "trial.memory_limit_mb"), "a whole number of MiB", "found '-5'"});
  expectHas(errorFor(base + "seed: -1\n"), {at(10, 7, "seed"), "a non-negative integer, found '-1'"});
  expectHas(errorFor(base + "seed: 0x10\n"), {at(10, 7, "seed"), "found '0x10'"});
  expectHas(errorFor(base + "    ignore_index: x\n"),
            {at(10, 19, "trial.harness.ignore_index"), "an integer", "found 'x'"});
  expectHas(errorFor("batch: batch.pt\nsamples: [input]\n"),
            {at(2, 10, "samples"), "a map with the keys tensors, lists, ids", "found a list"});
  expectHas(errorFor(base + "reducers: samples\n"),
            {at(10, 11, "reducers"), "a non-empty list of reducer names", "found 'samples'"});
  expectHas(errorFor(base + "context:\n  step: {a: 1}\n"),
            {at(11, 9, "context.step"), "a single value", "found a map"});
  expectHas(errorFor("batch: [a, b]\n"), {at(1, 8, "batch"), "found a list"});
  expectHas(errorFor(base + "output: ''\n"), {at(10, 9, "output"), "found an empty string"});
}

TEST_F(CaseConfigTest, LossMustBeKnownAndNeedsATarget) {
  const std::string base =
      "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  harness:\n"
      "    model: model.pt\n";
  expectHas(errorFor(base + "    target: y\n    loss: cross_entropi\n"),
            {at(7, 11, "trial.harness.loss"), "one of cross_entropy, nll, none", "found 'cross_entropi'",
             "did you mean 'cross_entropy'?"});
  expectHas(errorFor(base + "    loss: nll\n"),
            {at(6, 11, "trial.harness.loss"), "'none' when no target is set", "found 'nll'", "trial.harness.target"});
}

// ---------------------------------------------------------------- trial kinds

TEST_F(CaseConfigTest, BothHarnessAndCommand) {
  expectHas(errorFor(std::string(kHarnessCase) + "  command: [x, '{batch}']\n"),
            {at(7, 3, "trial"), "exactly one of 'harness'", "'command'", "found both", "remove one"});
}

TEST_F(CaseConfigTest, NeitherHarnessNorCommand) {
  expectHas(errorFor("batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  timeout: 5\n"),
            {at(4, 3, "trial"), "exactly one of 'harness'", "found neither"});
}

TEST_F(CaseConfigTest, CommandMustTakeTheBatch) {
  const std::string base = "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n";
  expectHas(errorFor(base + "  command: [python3, step.py, batch.pt]\n"),
            {at(4, 12, "trial.command"), "an element containing '{batch}'", "found none", "add \"{batch}\""});
  expectHas(errorFor(base + "  command: python3 step.py {batch}\n"),
            {at(4, 12, "trial.command"), "a list of strings", "never passed to a shell",
             "found 'python3 step.py {batch}'", "split it into a list"});
  expectHas(errorFor(base + "  command: []\n"),
            {at(4, 12, "trial.command"), "a non-empty list", "found an empty list"});
  expectHas(errorFor(base + "  command: ['', '{batch}']\n"),
            {at(4, 13, "trial.command[0]"), "the program to run", "found an empty string"});
  expectHas(errorFor(base + "  command: [python3, [a], '{batch}']\n"), {at(4, 22, "trial.command[1]"), "found a list"});
}

// #14, item 6: a placeholder minrepro does not know would reach the program as text.
TEST_F(CaseConfigTest, UnknownPlaceholdersAreRefused) {
  const std::string base = "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n";
  expectHas(errorFor(base + "  command: [python3, '{case_dir}/step.py', '{batch}', --out, '{bacth}.log']\n"),
            {at(4, 62, "trial.command[4]"), "the placeholders {batch}, {workdir} or {case_dir}", "found '{bacth}'",
             "did you mean 'batch'?"});
  expectHas(errorFor(base + "  command: [python3, -c, 'print({learning_rate})', '{batch}']\n"),
            {"trial.command[2]", "found '{learning_rate}'", "put code with braces in a script file"});
  expectHas(errorFor(base + "  command: [python3, '{case_dir}/s.py', '{batch}']\n  switches:\n"
                            "    - {name: aug, args: ['--seed={seed}'], off_args: []}\n"),
            {"trial.switches[0].args[0]", "found '{seed}'"});
  // Braces that are not a placeholder pass as they are.
  EXPECT_NO_THROW(loadCase(write("case.yaml", base + "  command: [python3, -c, \"d = {'a': 1}\", '{batch}']\n")));
}

// Each switch is a variant compare runs and a unit the branches pass tries:
// an archive's case.yaml listing 5000 was days of compare's runs (probe 31).
TEST_F(CaseConfigTest, MoreThan64BranchesAreRefused) {
  std::string switches;
  for (int i = 0; i < 65; ++i)
    switches += "    - {name: s" + std::to_string(i) + ", args: [--s" + std::to_string(i) + "]}\n";
  expectHas(errorFor("batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  command: [python3, s.py, '{batch}']\n"
                     "  switches:\n" +
                     switches),
            {"trial.switches", "at most 64 branches", "found 65"});
}

TEST_F(CaseConfigTest, RelativeScriptOfTheCaseMustUseCaseDir) {
  touch("step.py");
  const std::string base = "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n";
  expectHas(errorFor(base + "  command: [python3, step.py, '{batch}']\n"),
            {at(4, 22, "trial.command[1]"), "found the relative path 'step.py'", "write \"{case_dir}/step.py\""});
}

TEST_F(CaseConfigTest, DeterministicSwitch) {
  const std::string text = std::string(kHarnessCase) + "  deterministic: true\n";
  write("case.yaml", text);
  EXPECT_TRUE(loadCase(casePath()).deterministic);
  expectHas(errorFor(std::string(kHarnessCase) + "  deterministic: 2\n"), {"trial.deterministic", "true or false"});
}

TEST_F(CaseConfigTest, FlakySettings) {
  const std::string base = std::string(kHarnessCase);
  write("case.yaml", base + "flaky: {enabled: false, alpha: 0.01, initial_runs: 5}\n");
  const CaseConfig c = loadCase(casePath());
  EXPECT_FALSE(c.flaky.enabled);
  EXPECT_DOUBLE_EQ(c.flaky.alpha, 0.01);
  EXPECT_EQ(c.flaky.initial_runs, 5u);
  EXPECT_EQ(c.flaky.initial_failures, 3u);
  expectHas(errorFor(base + "flaky: {alpha: 1.5}\n"), {at(10, 16, "flaky.alpha"), "a probability"});
  expectHas(errorFor(base + "flaky: {enabled: maybe}\n"), {at(10, 18, "flaky.enabled"), "true or false"});
}

TEST_F(CaseConfigTest, EnvOnlyWithCommand) {
  expectHas(errorFor(std::string(kHarnessCase) + "  env: {SEED: '1'}\n"),
            {at(10, 8, "trial.env"), "'env' only with 'command'", "found it with 'harness'"});
  const std::string base = "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  command: [x, '{batch}']\n";
  expectHas(errorFor(base + "  env: {SEED: [1]}\n"), {at(5, 15, "trial.env.SEED"), "a string value", "found a list"});
}

// ---------------------------------------------------------------- samples

TEST_F(CaseConfigTest, EmptyTensors) {
  expectHas(errorFor("batch: batch.pt\nsamples:\n  tensors: {}\n"),
            {at(3, 12, "samples.tensors"), "a map of batch tensor name to sample axis", "found an empty map",
             "name at least one tensor"});
}

TEST_F(CaseConfigTest, AxisMustBeAnInteger) {
  const std::string base = "batch: batch.pt\nsamples:\n  tensors:\n";
  expectHas(errorFor(base + "    input: first\n"),
            {at(4, 12, "samples.tensors.input"), "an integer sample axis", "found 'first'"});
  expectHas(errorFor(base + "    input: 0\n    target: 1.5\n"), {at(5, 13, "samples.tensors.target"), "found '1.5'"});
}

// ---------------------------------------------------------------- files

TEST_F(CaseConfigTest, BatchFileMissing) {
  const std::string missing = (dir_ / "data" / "b.pt").string();
  expectHas(errorFor("batch: data/./b.pt\n"),
            {at(1, 8, "batch"), "the batch, a torch.save'd dict of named tensors (an existing regular file)",
             "found no file at " + missing, "paths are relative to the case file's directory, " + dir_.string()});
}

TEST_F(CaseConfigTest, BatchIsADirectory) {
  fs::create_directories(dir_ / "data");
  expectHas(errorFor("batch: data\n"), {at(1, 8, "batch"), "found a directory at "});
}

// A FIFO or a device is there: said as such, not "no file" (#30.9).
TEST_F(CaseConfigTest, BatchIsAFifoOrADevice) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.pt").c_str(), 0644), 0);
  expectHas(errorFor("batch: fifo.pt\n"),
            {at(1, 8, "batch"), "found a FIFO (named pipe) at ", "save it to a regular file first"});
  expectHas(errorFor("batch: /dev/null\n"), {at(1, 8, "batch"), "found a device at /dev/null"});
}

TEST_F(CaseConfigTest, ModelFileMissing) {
  fs::remove(dir_ / "model.pt");
  expectHas(errorFor(kHarnessCase),
            {at(8, 12, "trial.harness.model"), "the TorchScript model slice (an existing regular file)",
             "found no file at " + (dir_ / "model.pt").string(), "relative to the case file's directory"});
}

// ---------------------------------------------------------------- failure, reducers

TEST_F(CaseConfigTest, UnknownFamily) {
  expectHas(
      errorFor(std::string(kHarnessCase) + "failure:\n  family: index_eror\n"),
      {at(11, 11, "failure.family"), "one of ", "index-error", "found 'index_eror'", "did you mean 'index-error'?"});
  expectHas(errorFor(std::string(kHarnessCase) + "failure:\n  family: start-failure\n"),
            {at(11, 11, "failure.family"), "found 'start-failure'"});
}

TEST_F(CaseConfigTest, BadRegex) {
  expectHas(errorFor(std::string(kHarnessCase) + "failure:\n  message: \"Target (\\\\d+ is\"\n"),
            {at(11, 12, "failure.message"), "an ECMAScript regular expression", "found 'Target (\\d+ is' (", "escape"});
}

TEST_F(CaseConfigTest, ReducerNamesKeepTheirPlaces) {
  expectHas(errorFor(std::string(kHarnessCase) + "reducers: [samples, samples]\n"),
            {at(10, 21, "reducers[1]"), "each reducer once"});
  // Whether a name is a pass is the engine's to say (tests/pass_names_test.cc);
  // the loader keeps where each name was written for its message.
  const CaseConfig c = loadCase(write("case.yaml", std::string(kHarnessCase) + "reducers: [samples, sample]\n"));
  EXPECT_EQ(c.reducers, (std::vector<std::string>{"samples", "sample"}));
  ASSERT_EQ(c.reducer_places.size(), 2u);
  EXPECT_EQ(c.reducer_places[1], casePath().string() + ":10:21: reducers[1]");
}

// ---------------------------------------------------------------- good cases

TEST_F(CaseConfigTest, HarnessDefaults) {
  const CaseConfig c = loadCase(write("case.yaml", kHarnessCase));
  EXPECT_EQ(c.case_file, casePath());
  EXPECT_EQ(c.base_dir, dir_);
  EXPECT_EQ(c.batch, dir_ / "batch.pt");
  ASSERT_EQ(c.sample_axes.size(), 2u);
  EXPECT_EQ(c.sample_axes[0].tensor, "input");
  EXPECT_EQ(c.sample_axes[1].tensor, "target");
  EXPECT_EQ(c.sample_ids, "");
  ASSERT_TRUE(c.harness);
  EXPECT_FALSE(c.command);
  EXPECT_EQ(c.harness->model, dir_ / "model.pt");
  EXPECT_EQ(c.harness->input, "input");
  EXPECT_EQ(c.harness->target, "target");
  EXPECT_EQ(c.harness->loss, "cross_entropy");
  EXPECT_EQ(c.harness->ignore_index, -100);
  EXPECT_EQ(c.timeout, std::chrono::seconds(60));
  EXPECT_EQ(c.memory_limit_bytes, 0u);
  EXPECT_FALSE(c.expected.family);
  // No `reducers`: the default pipeline, configs/pipelines/default.yaml.
  EXPECT_EQ(c.pipeline, "default");
  EXPECT_EQ(c.reducers, (std::vector<std::string>{"samples", "branches", "lengths", "values"}));
  EXPECT_TRUE(c.sequence.tensors.empty());
  EXPECT_TRUE(c.harness->transforms.empty());
  EXPECT_TRUE(c.invariants.dtype && c.invariants.layout && c.invariants.op && c.invariants.sample_axis);
  EXPECT_EQ(c.output, dir_ / "repro.tar.gz");
  EXPECT_EQ(c.work_dir, dir_ / "minrepro-work");
  EXPECT_EQ(c.seed, 0u);
  EXPECT_TRUE(c.context.empty());
}

TEST_F(CaseConfigTest, HarnessWithoutTargetHasNoLoss) {
  const CaseConfig c = loadCase(
      write("case.yaml", "batch: batch.pt\nsamples: {tensors: {x: -1}}\ntrial: {harness: {model: model.pt}}\n"));
  EXPECT_EQ(c.sample_axes[0].axis, -1);
  EXPECT_EQ(c.harness->target, "");
  EXPECT_EQ(c.harness->loss, "none");
}

TEST_F(CaseConfigTest, HarnessWithEveryKey) {
  touch("data/batch.pt");
  const CaseConfig c = loadCase(write("case.yaml", R"(batch: ./data/../data/batch.pt
samples:
  tensors: {tokens: 1, labels: 0}
  ids: sample_ids
trial:
  harness:
    model: model.pt
    input: tokens
    target: labels
    loss: nll
    ignore_index: 0
  timeout: 2.5
  memory_limit_mb: 512
failure:
  family: index-error
  operator: nll_loss
  message: "Target \\d+ is out of bounds"
reducers: [samples]
output: out/r.tar.gz
work_dir: /tmp/elsewhere
seed: 7
context:
  step: "41873"
  revision: 3
  note:
)"));
  EXPECT_EQ(c.batch, dir_ / "data" / "batch.pt");
  EXPECT_EQ(c.sample_axes[0].tensor, "tokens");
  EXPECT_EQ(c.sample_axes[0].axis, 1);
  EXPECT_EQ(c.sample_ids, "sample_ids");
  EXPECT_EQ(c.harness->input, "tokens");
  EXPECT_EQ(c.harness->loss, "nll");
  EXPECT_EQ(c.harness->ignore_index, 0);
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.memory_limit_bytes, 512u << 20);
  EXPECT_EQ(c.expected.family, FailureFamily::IndexError);
  EXPECT_EQ(c.expected.op, "nll_loss");
  EXPECT_EQ(c.expected.message_regex, "Target \\d+ is out of bounds");
  EXPECT_EQ(c.output, dir_ / "out" / "r.tar.gz");
  EXPECT_EQ(c.work_dir, fs::path("/tmp/elsewhere"));
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.context, (std::map<std::string, std::string>{{"step", "41873"}, {"revision", "3"}, {"note", ""}}));
}

TEST_F(CaseConfigTest, CommandTrial) {
  const CaseConfig c = loadCase(write("case.yaml", R"(batch: batch.pt
samples: {tensors: {input: 0}}
trial:
  command: ["/usr/bin/python3", "-u", "step.py", "--batch={batch}", "{workdir}"]
  env: {SEED: "1", MODE: 2}
  timeout: 0.0001
)"));
  ASSERT_TRUE(c.command);
  EXPECT_FALSE(c.harness);
  EXPECT_EQ(c.command->argv,
            (std::vector<std::string>{"/usr/bin/python3", "-u", "step.py", "--batch={batch}", "{workdir}"}));
  EXPECT_EQ(c.command->env, (std::map<std::string, std::string>{{"SEED", "1"}, {"MODE", "2"}}));
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(1));  // rounded up to the smallest step
}

// ---------------------------------------------------------------- renderCase

// Writes `text` as a case in a fresh directory next to dir_ with the files
// it names, and loads it.
CaseConfig loadRendered(const fs::path& dir, const std::string& text) {
  fs::create_directories(dir);
  for (const char* name : {"b.pt", "m.pt"}) std::ofstream(dir / name) << "x";
  std::ofstream(dir / "case.yaml") << text;
  return loadCase(dir / "case.yaml");
}

TEST_F(CaseConfigTest, RenderHarnessRoundTrips) {
  write("case.yaml", R"(batch: batch.pt
samples: {tensors: {input: 0, "odd: name": -2}, ids: ids}
trial:
  harness: {model: model.pt, input: input, target: "null", loss: nll, ignore_index: 3}
  timeout: 1.25
  memory_limit_mb: 64
failure: {family: index-error, operator: nll_loss, message: "a{2}\\d+ #x"}
seed: 11
context: {step: "007", empty: "", flag: "true"}
)");
  const CaseConfig a = loadCase(casePath());
  const fs::path out = dir_ / "archive";
  const std::string text = renderCase(a, out, "b.pt", "m.pt");
  EXPECT_EQ(text.find(dir_.string()), std::string::npos) << text;
  const CaseConfig b = loadRendered(out, text);
  EXPECT_EQ(b.batch, out / "b.pt");
  EXPECT_EQ(b.harness->model, out / "m.pt");
  ASSERT_EQ(b.sample_axes.size(), 2u);
  EXPECT_EQ(b.sample_axes[1].tensor, "odd: name");
  EXPECT_EQ(b.sample_axes[1].axis, -2);
  EXPECT_EQ(b.sample_ids, "ids");
  EXPECT_EQ(b.harness->input, a.harness->input);
  EXPECT_EQ(b.harness->target, "null");
  EXPECT_EQ(b.harness->loss, "nll");
  EXPECT_EQ(b.harness->ignore_index, 3);
  EXPECT_EQ(b.timeout, a.timeout);
  EXPECT_EQ(b.memory_limit_bytes, a.memory_limit_bytes);
  EXPECT_EQ(b.expected.family, a.expected.family);
  EXPECT_EQ(b.expected.op, a.expected.op);
  EXPECT_EQ(b.expected.message_regex, a.expected.message_regex);
  EXPECT_EQ(b.reducers, a.reducers);
  EXPECT_EQ(b.output, out / "repro.tar.gz");
  EXPECT_EQ(b.work_dir, out / "minrepro-work");
  EXPECT_EQ(b.seed, 11u);
  EXPECT_EQ(b.context, a.context);
}

TEST_F(CaseConfigTest, RenderHarnessWithoutTarget) {
  const CaseConfig a = loadCase(
      write("case.yaml", "batch: batch.pt\nsamples: {tensors: {x: 0}}\ntrial: {harness: {model: model.pt}}\n"));
  const CaseConfig b = loadRendered(dir_ / "archive", renderCase(a, dir_ / "archive", "b.pt", "m.pt"));
  EXPECT_EQ(b.harness->target, "");
  EXPECT_EQ(b.harness->loss, "none");
  EXPECT_FALSE(b.expected.family);
  EXPECT_EQ(b.timeout, std::chrono::seconds(60));
}

TEST_F(CaseConfigTest, RenderCommandMakesCaseFilesRelative) {
  touch("scripts/step.py");
  write("case.yaml", "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  command: [\"" +
                         (dir_ / "scripts" / "step.py").string() + "\", \"/usr/bin/python3\", " +
                         "\"rel.py\", \"{batch}\", \"" + dir_.string() + "/../x\"]\n" +
                         "  env: {SEED: \"1\", EMPTY: \"\"}\n  timeout: 0.001\n");
  const CaseConfig a = loadCase(casePath());
  const fs::path out = dir_ / "best";
  const std::string text = renderCase(a, out, "b.pt", "unused.pt");
  const CaseConfig b = loadRendered(out, text);
  ASSERT_TRUE(b.command);
  EXPECT_EQ(b.command->argv, (std::vector<std::string>{"{case_dir}/scripts/step.py", "/usr/bin/python3", "rel.py",
                                                       "{batch}", dir_.string() + "/../x"}));
  EXPECT_EQ(b.command->env, a.command->env);
  EXPECT_EQ(b.timeout, std::chrono::milliseconds(1));
  EXPECT_EQ(text.find("unused.pt"), std::string::npos) << text;
}

TEST_F(CaseConfigTest, CommandCaseFiles) {
  touch("scripts/step.py");
  touch("vocab.txt");
  write("case.yaml", "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  command: [\"" +
                         (dir_ / "scripts" / "step.py").string() +
                         "\", \"{case_dir}/vocab.txt\", \"{case_dir}/missing.txt\", \"" + (dir_ / "scripts").string() +
                         "\", \"/usr/bin/python3\", \"{batch}\"]\n");
  const CaseConfig c = loadCase(casePath());
  EXPECT_EQ(commandCaseFiles(c), (std::vector<fs::path>{"scripts/step.py", "vocab.txt"}));
  const std::string text = renderCase(c, dir_, "b.pt", "");
  EXPECT_NE(text.find("{case_dir}/scripts/step.py"), std::string::npos) << text;
  EXPECT_NE(text.find("{case_dir}/scripts\""), std::string::npos) << text;
}

}  // namespace
}  // namespace minrepro

// ---------------------------------------------------------------- reduction keys

namespace minrepro {
namespace {

const char* const kReductionKeys = R"(sequence:
  tensors: {tokens: 1, mask: -1}
  padding: {mask: 0}
  lengths: lengths
  min_length: 2
values:
  exclude: [input]
  trivial: {target: 1}
invariants: {layout: false, operator: false}
pipeline: shape-first
)";

const char* const kTransforms = R"(    transforms:
      - {type: normalize, tensor: input, mean: 0.5, std: 0.25}
      - {type: noise, name: jitter, tensor: input, std: 0.1}
      - {type: pad, tensor: tokens, axis: 1, length: 520, value: 0, optional: false}
)";

TEST_F(CaseConfigTest, SequenceValuesInvariantsPipelineAndTransformsAreRead) {
  const CaseConfig c = loadCase(write("case.yaml", std::string(kHarnessCase) + kTransforms + kReductionKeys));
  ASSERT_EQ(c.sequence.tensors.size(), 2u);
  EXPECT_EQ(c.sequence.tensors[1].axis, -1);
  EXPECT_EQ(c.sequence.lengths, "lengths");
  EXPECT_EQ(c.sequence.min_length, 2);
  EXPECT_EQ(c.values.exclude, std::vector<std::string>{"input"});
  EXPECT_EQ(c.values.trivial.at("target"), 1.0);
  EXPECT_FALSE(c.invariants.layout);
  EXPECT_FALSE(c.expected.require_original_op);
  EXPECT_TRUE(c.invariants.dtype);
  EXPECT_EQ(c.reducers, (std::vector<std::string>{"lengths", "branches", "samples", "values"}));
  ASSERT_EQ(c.harness->transforms.size(), 3u);
  EXPECT_EQ(c.harness->transforms[1].name, "jitter");
  EXPECT_EQ(c.harness->transforms[1].seed, 1u);  // the case's seed 0 + its position
  EXPECT_EQ(c.harness->transforms[2].params.at("length"), "520");
  EXPECT_FALSE(c.harness->transforms[2].optional);
  // Rendered and read again: the same reduction settings.
  const std::string text = renderCase(c, dir_, "batch.pt", "model.pt");
  const CaseConfig again = loadCase(write("again.yaml", text));
  EXPECT_EQ(again.harness->transforms.size(), 3u);
  EXPECT_EQ(again.harness->transforms[1].seed, 1u);
  EXPECT_EQ(again.sequence.tensors[1].axis, -1);
  EXPECT_FALSE(again.invariants.layout);
}

TEST_F(CaseConfigTest, ReductionKeysRejectMistakesClearly) {
  const std::string base = kHarnessCase;
  expectHas(errorFor(base + "    transforms:\n      - {type: nromalize, tensor: input, mean: 0, std: 1}\n"),
            {"trial.harness.transforms[0].type", "did you mean 'normalize'?"});
  expectHas(errorFor(base + "    transforms:\n      - {type: pad, tensor: x, axis: 1, length: 5}\n"),
            {"trial.harness.transforms[0].value", "add 'value:'"});
  expectHas(errorFor(base + "    transforms:\n      - {type: cast, tensor: x, dtype: half}\n"),
            {"transforms[0].dtype", "float16"});
  expectHas(errorFor(base + "reducers: [samples]\npipeline: default\n"), {"either 'pipeline' or 'reducers'"});
  expectHas(errorFor(base + "pipeline: nosuch\n"), {"pipeline: expected the name of a pipeline", "nosuch"});
  expectHas(errorFor(base + "sequence: {tensors: {}}\n"), {"sequence.tensors", "an empty map"});
  expectHas(errorFor(base + "sequence:\n  tensors: {x: 1}\n  padding: {y: 0}\n"),
            {"sequence.padding.y", "a tensor named in sequence.tensors"});
  expectHas(errorFor(base + "  switches: [{name: a, args: [--a]}]\n"), {"'switches' only with 'command'"});
  expectHas(errorFor(base + "invariants: {dtype: maybe}\n"), {"invariants.dtype", "true or false"});
}

}  // namespace
}  // namespace minrepro

namespace minrepro {
namespace {

// An archive's case names its withheld secrets: a run takes their values
// from where it runs, in trial.env and in the command's arguments.
TEST(WithheldVariables, ComeFromWhereTheRunRuns) {
  ::setenv("MINREPRO_TEST_SECRET_HERE", "v4lue-here", 1);
  ::unsetenv("MINREPRO_TEST_SECRET_UNSET");
  const auto env = withWithheldFromHere({{"A", "<secret:env-MINREPRO_TEST_SECRET_HERE>"},
                                         {"B", "<secret:env-MINREPRO_TEST_SECRET_UNSET>"},
                                         {"C", "plain"}});
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"A", "v4lue-here"}, {"C", "plain"}}));
  EXPECT_EQ(substituteEnvPlaceholders("--key={env:C}:{env:MINREPRO_TEST_SECRET_HERE}{env:NOPE}", env),
            "--key=plain:v4lue-here");
  EXPECT_EQ(withheldVariableName("<secret:env-HF_TOKEN>"), std::optional<std::string>("HF_TOKEN"));
  EXPECT_FALSE(withheldVariableName("<secret:keyed-secret>"));
  ::unsetenv("MINREPRO_TEST_SECRET_HERE");
}

}  // namespace
}  // namespace minrepro
