// Whole-binary tier: a user's own loop, as a new user meets minrepro (#28):
// a sequence tagger whose forward takes (tokens, lengths), a padded batch
// with lengths, ids and ignored tags, and a step script that loads weights
// from beside itself. The zero-config start (no case.yaml), the archive run
// by another Python at another path, and the failures that are not in the
// batch at all (exit 3, said per cause, with the torch versions when they
// differ). Real processes and real PyTorch throughout.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/archive/run_archive.h"
#include "engine/batch_dependence.h"
#include "engine/torch_versions.h"
#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::runCommand;
using testing::writeFile;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The user's files (tests/fixtures/own_loop/, also bench/bench_own_loop.sh's
// case): a tagger whose forward takes (tokens, lengths), a step script that
// reads model_state.pt beside itself, and make_batch.py, which writes a
// collated batch of 24 padded sequences whose sample id 1017 holds a token
// one past the embedding table.
const fs::path kFixture = fs::path(MINREPRO_SOURCE_DIR) / "tests/fixtures/own_loop";
std::string userStep() { return readFile(kFixture / "step.py"); }

class OwnLoop : public ::testing::Test {
 protected:
  testing::TempDir work_{"minrepro-own-loop"};
  fs::path user_ = work_.path() / "project";

  void SetUp() override {
    fs::create_directories(user_);
    for (const char* file : {"tagger.py", "step.py", "make_batch.py"}) fs::copy_file(kFixture / file, user_ / file);
    std::string out;
    ASSERT_EQ(runCommand("cd " + user_.string() + " && " + testing::python() + " make_batch.py", &out), 0) << out;
  }

  // A Python installation of its own at `dir` whose torch is the tests' (a
  // venv with a .pth naming the site directory that holds it).
  std::string otherPython(const fs::path& dir) {
    std::string site, out;
    EXPECT_EQ(runCommand(
                  testing::python() + " -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))'",
                  &site),
              0)
        << site;
    site = site.substr(0, site.find('\n'));
    EXPECT_EQ(runCommand(testing::python() + " -m venv --without-pip " + dir.string(), &out), 0) << out;
    std::string own_site;
    EXPECT_EQ(runCommand(dir.string() + "/bin/python -c 'import site; print(site.getsitepackages()[0])'", &own_site),
              0);
    writeFile(own_site.substr(0, own_site.find('\n')) + "/torch-of-the-tests.pth", site + "\n");
    return (dir / "bin" / "python").string();
  }

  int minrepro(const std::string& args, std::string* output) {
    return runCommand("cd " + user_.string() + " && " + MINREPRO_BINARY + " " + args, output);
  }
};

TEST_F(OwnLoop, InitWritesTheInferredCaseAndRefusesToReplaceOne) {
  std::string out;
  ASSERT_EQ(minrepro("init --batch saved.pt -- python step.py saved.pt", &out), 0) << out;
  const std::string text = readFile(user_ / "case.yaml");
  EXPECT_TRUE(has(text, "tensors: {tokens: 0, tags: 0}")) << text;  // ids and lengths go with the samples
  EXPECT_TRUE(has(text, "ids: sample_id")) << text;
  EXPECT_TRUE(has(text, "tensors: {tokens: 1, tags: 1}")) << text;
  EXPECT_TRUE(has(text, "padding: {tokens: 0, tags: -100}")) << text;
  EXPECT_TRUE(has(text, "lengths: lengths")) << text;
  // The command as typed, its file in the case directory and the batch as the placeholder.
  EXPECT_TRUE(has(text, R"(command: ["python", "{case_dir}/step.py", "{batch}"])")) << text;
  EXPECT_TRUE(has(out, "24 samples along dimension 0 of: tokens, lengths, tags, sample_id")) << out;
  EXPECT_NE(minrepro("init --batch saved.pt -- python step.py {batch}", &out), 0);
  EXPECT_TRUE(has(out, "case.yaml: the case (--output) exists; give another path, or --force")) << out;
  EXPECT_EQ(minrepro("init --batch saved.pt --force -- python step.py {batch}", &out), 0) << out;
  EXPECT_EQ(minrepro("init --batch saved.pt --force -- python step.py", &out), 2) << out;
  EXPECT_TRUE(has(out, "must take the batch as {batch}")) << out;
  // Without --force too: the command's fault is said first, not the
  // case.yaml of the earlier try (a new user fixed that, then met this).
  EXPECT_EQ(minrepro("init --batch saved.pt -- python step.py", &out), 2) << out;
  EXPECT_TRUE(has(out, "must take the batch as {batch}")) << out;
}

// init writes by shrink's rule (#43.3): never over the batch or the step,
// even with --force, nor a device or a link; the user's own files only with --force.
TEST_F(OwnLoop, InitNeverWritesOverWhatItReads) {
  const std::string batch = readFile(user_ / "saved.pt"), step = readFile(user_ / "step.py");
  std::string out;
  for (const std::string output : {"saved.pt", "step.py"}) {
    SCOPED_TRACE(output);
    EXPECT_EQ(minrepro("init --batch saved.pt --output " + output + " --force -- python step.py {batch}", &out), 2)
        << out;
    EXPECT_TRUE(has(out, "writing there would destroy it, even with --force")) << out;
  }
  EXPECT_EQ(readFile(user_ / "saved.pt"), batch);
  EXPECT_EQ(readFile(user_ / "step.py"), step);
  writeFile(user_ / "log.txt", "the step's log\n");  // named as --log=log.txt
  EXPECT_EQ(minrepro("init --batch saved.pt --output log.txt --force -- python step.py {batch} --log=log.txt", &out), 2)
      << out;
  EXPECT_EQ(readFile(user_ / "log.txt"), "the step's log\n");
  EXPECT_EQ(minrepro("init --batch saved.pt --output /dev/full --force -- python step.py {batch}", &out), 2) << out;
  EXPECT_TRUE(has(out, "is not a regular file")) << out;
  fs::create_symlink(user_ / "step.py", user_ / "link.yaml");
  EXPECT_EQ(minrepro("init --batch saved.pt --output link.yaml --force -- python step.py {batch}", &out), 2) << out;
  EXPECT_TRUE(has(out, "is a symbolic link")) << out;
  writeFile(user_ / "notes.yaml", "mine\n");
  EXPECT_EQ(minrepro("init --batch saved.pt --output notes.yaml -- python step.py {batch}", &out), 2) << out;
  EXPECT_EQ(readFile(user_ / "notes.yaml"), "mine\n");
  EXPECT_EQ(minrepro("init --batch saved.pt --output notes.yaml --force -- python step.py {batch}", &out), 0) << out;
  EXPECT_TRUE(has(readFile(user_ / "notes.yaml"), "batch: ")) << readFile(user_ / "notes.yaml");
}

// A 2-D feature tensor beside the tokens ([16, 4] floats, [16, 20] ids):
// the sequence is the length a lengths tensor fits, not the first size met
// (both inferences, init's and capture's, took the features for it).
TEST_F(OwnLoop, AFeatureTensorBesideTheTokensIsNotTakenForTheSequence) {
  std::string out;
  ASSERT_EQ(
      runCommand(testing::python() +
                     " -c \"import torch\n"
                     "g = torch.Generator().manual_seed(0)\n"
                     "lengths = torch.randint(3, 21, (16,), generator=g); lengths[5] = 20\n"
                     "tokens = torch.randint(1, 50, (16, 20), generator=g)\n"
                     "tokens[torch.arange(20).unsqueeze(0) >= lengths.unsqueeze(1)] = 0\n"
                     "torch.save({'ids': torch.arange(16), 'tokens': tokens, 'lengths': lengths,\n"
                     "            'features': torch.randn(16, 4, generator=g), 'label': torch.randint(0, 4, (16,))},\n"
                     "           '" +
                     (user_ / "features.pt").string() + "')\"",
                 &out),
      0)
      << out;
  ASSERT_EQ(minrepro("init --batch features.pt --output features.yaml -- python step.py {batch}", &out), 0) << out;
  const std::string text = readFile(user_ / "features.yaml");
  EXPECT_TRUE(has(text, "lengths: lengths")) << text;
  EXPECT_TRUE(has(text, "tensors: {tokens: 1}")) << text;
  EXPECT_FALSE(has(text, "features: 1")) << text;
  // What init says is what it wrote: only the tokens are padded past the lengths.
  EXPECT_TRUE(has(out, "lengths: 'lengths' (the tensors padded past each sample's length: tokens axis 1 pad 0)"))
      << out;
}

TEST_F(OwnLoop, ShrinkWithoutCaseYamlAndTheArchiveRunsUnderAnotherPython) {
  // The trials run a venv's Python that is gone when the maintainer runs the archive.
  const std::string reporter = otherPython(work_.path() / "reporter-venv");
  std::string out;
  ASSERT_EQ(minrepro("shrink --batch saved.pt -- " + reporter + " step.py {batch}", &out), 0) << out;
  EXPECT_TRUE(has(out, "no case.yaml: inferred from")) << out;
  EXPECT_TRUE(has(out, "reduced 24 -> 1 samples (ids [1017])")) << out;
  EXPECT_TRUE(has(out, "the archive reproduced on its own in 3 of 3 runs")) << out;
  fs::remove_all(work_.path() / "reporter-venv");

  const fs::path empty = work_.path() / "maintainer";
  ASSERT_TRUE(testing::extractInto(user_ / "repro.tar.gz", empty));
  for (const char* file : {"step.py", "tagger.py", "model_state.pt", "op/repro_op.py"})
    EXPECT_TRUE(fs::exists(empty / file)) << file;
  EXPECT_FALSE(has(readFile(empty / "repro.py"), "reporter-venv")) << readFile(empty / "repro.py");
  const std::string maintainer = otherPython(work_.path() / "maintainer-venv");
  EXPECT_NE(runCommand("cd " + empty.string() + " && " + maintainer + " repro.py", &out), 0) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  // What sets it apart reads the token tensor too (a 2-D integer tensor), and tags ignored past each length.
  const std::string report = readFile(empty / "REPORT.md");
  EXPECT_TRUE(has(report,
                  "`tokens` (10 values per sample): the kept samples hold 50, outside the range 0..49 that the "
                  "other 23 samples span"))
      << report;
  EXPECT_TRUE(has(report, "the largest id against the embedding's num_embeddings (a token id")) << report;
  // REPORT.html shows the token ids of the kept sample with the one outside the rest's range marked.
  const std::string html = readFile(empty / "REPORT.html");
  const std::size_t tokens = html.find("<table class=\"values\" data-tensor=\"tokens\">");
  ASSERT_NE(tokens, std::string::npos) << html;
  const std::string table = html.substr(tokens, html.find("</table>", tokens) - tokens);
  const std::string kept = table.substr(0, table.find("<tr class=\"cut\">"));
  EXPECT_TRUE(has(kept, "<td class=\"outlier\">50</td>")) << table;
  EXPECT_EQ(kept.find("outlier"), kept.rfind("outlier")) << "one marked cell: " << table;
  // A fix in the user's code, checked on the minimal batch and the neighbours: the archive's
  // own copy still fails; --code runs the user's current step.py instead.
  writeFile(user_ / "step.py",
            "import sys, torch\nb = torch.load(sys.argv[1])\n"
            "b['tokens'][b['tokens'] >= 50] = 1  # unknown tokens to UNK\n"
            "torch.save(b, sys.argv[1] + '.fixed.pt')\nsys.argv[1] += '.fixed.pt'\n" +
                userStep());
  const std::string verify = std::string(MINREPRO_BINARY) + " verify " + (user_ / "repro.tar.gz").string() +
                             " --runs 1 --expect pass --python " + testing::python();
  EXPECT_EQ(runCommand(verify, &out), 1) << out;
  EXPECT_EQ(runCommand(verify + " --code " + user_.string(), &out), 0) << out;
  EXPECT_TRUE(has(out, "replaces: step.py")) << out;
  EXPECT_TRUE(has(out, "neighbours passed: 4 of 4")) << out;
  // The lengths pass cut the sequence: the bad token alone is left.
  EXPECT_EQ(testing::pyEvalOnBatch(empty / "batch.pt", "b['tokens'].tolist(), b['lengths'].tolist()"), "[[50]] [1]\n");
  // Reduced again from the archive, as REPORT.md says: the case names the
  // reporter's Python, gone here; exit 2 names it, and --python runs it.
  const std::string again = "cd " + empty.string() + " && " + MINREPRO_BINARY + " shrink --config case.yaml";
  EXPECT_EQ(runCommand(again, &out), 2) << out;
  EXPECT_TRUE(has(out, "trial.command runs the Python " + reporter + ", which is not on this machine")) << out;
  EXPECT_TRUE(has(report, "minrepro shrink --config case.yaml [--python PYTHON]")) << report;
  EXPECT_EQ(runCommand(again + " --python " + maintainer + " --no-op-repro --no-self-check", &out), 0) << out;
  EXPECT_TRUE(has(out, "reduced 1 -> 1 samples (ids [1017])")) << out;
}

// `minrepro check` on a tagger's batch: tags and tokens are per-position
// indices ([samples, positions]); the token past the table is named by its
// sample id and position.
// A zero-config run that stops early (here its budget; a full disk or
// Ctrl-C alike) prints the command that goes on, and that command, run
// from anywhere, resumes the run: it repeats the --batch start as typed,
// from where it was typed (the work directory's case.yaml alone names
// paths relative to the project, so --config of it could not).
TEST_F(OwnLoop, TheZeroConfigStartsGoOnCommandResumesTheRun) {
  std::string out;
  const std::string start = "cd " + user_.string() + " && mkdir -p checks && " + MINREPRO_BINARY +
                            " shrink --batch saved.pt --max-trials 3 --no-op-repro --add-to checks -- " +
                            testing::python() + " step.py {batch} 2>&1";
  ASSERT_EQ(runCommand(start, &out), 5) << out;
  const std::string marker = "to go on from here (the trials so far are replayed, not run again): ";
  const auto at = out.find(marker);
  ASSERT_NE(at, std::string::npos) << out;
  // The command ends the line (copied whole into a shell), with the options typed but the spent budget.
  std::string line = out.substr(at + marker.size(), out.find('\n', at) - at - marker.size());
  EXPECT_NE(line.find(" --no-op-repro"), std::string::npos) << line;
  // A path typed relative to the start is written absolute (the line is pasted anywhere).
  EXPECT_NE(line.find(" --add-to " + (user_ / "checks").string()), std::string::npos) << line;
  EXPECT_EQ(line.find("--max-trials"), std::string::npos) << line;
  // "minrepro" when one is on PATH, else the binary that ran.
  EXPECT_EQ(line.rfind("cd " + user_.string() + " && ", 0), 0u) << line;
  EXPECT_NE(line.find(" shrink --batch "), std::string::npos) << line;
  ASSERT_EQ(runCommand("cd / && " + line + " 2>&1", &out), 0) << line << "\n" << out;
  EXPECT_TRUE(has(out, "resuming from 3 journaled trials")) << out;
  EXPECT_TRUE(has(out, "reduced 24 -> 1 samples (ids [1017])")) << out;
}

TEST_F(OwnLoop, CheckReadsPerPositionTargets) {
  std::string out;
  EXPECT_EQ(minrepro("check --batch saved.pt --target tags --classes 5 --ids sample_id", &out), 0) << out;
  EXPECT_TRUE(has(out, "targets of 24 samples")) << out;
  EXPECT_EQ(minrepro("check --batch saved.pt --target tokens --classes 50 --ignore-index 0 --ids sample_id", &out), 1)
      << out;
  EXPECT_TRUE(has(out, "  sample 1017 (index 17, position 2): 50\n")) << out;
}

TEST_F(OwnLoop, AFailureThatIsNotInTheBatchIsNotReducedAndItsCauseIsSaid) {
  struct Case {
    const char* first_line;
    const char* said;
  };
  for (const Case& c : {Case{"import notinstalledmodule", "an environment error, not the bug (ModuleNotFoundError"},
                        Case{"def broken(:", "an error in the trial's script (SyntaxError"},
                        Case{"open('settings.json')", "a file the trial needs cannot be opened (FileNotFoundError"}}) {
    writeFile(user_ / "step.py", std::string(c.first_line) + "\n" + userStep());
    std::string out;
    EXPECT_EQ(minrepro("shrink --batch saved.pt -- " + testing::python() + " step.py {batch}", &out), 3) << out;
    EXPECT_TRUE(has(out, "error: nothing to reduce: ")) << out;
    EXPECT_TRUE(has(out, c.said)) << out;
    EXPECT_FALSE(fs::exists(user_ / "repro.tar.gz"));
  }
}

TEST_F(OwnLoop, ATorchVersionThatDiffersFromTheCapturedOneIsNamed) {
  writeFile(user_ / "step.py", std::string("import notinstalledmodule\n") + userStep());
  writeFile(user_ / "case.yaml",
            "batch: saved.pt\nsamples: {tensors: {tokens: 0, tags: 0}, ids: sample_id}\n"
            "trial: {command: [" +
                testing::python() +
                ", '{case_dir}/step.py', '{batch}']}\n"
                "context: {pytorch: 1.2.0}\n");
  std::string out;
  EXPECT_EQ(minrepro("shrink --config case.yaml", &out), 3) << out;
  EXPECT_TRUE(has(out, "warning: the case was captured with PyTorch 1.2.0 but the trials run PyTorch ")) << out;
  EXPECT_TRUE(has(out, "note: the torch versions above differ; that may be why")) << out;
  // A case that reduces hears it once the original reproduces, before the
  // search, not after it (a new user's case captured under 1.13).
  writeFile(user_ / "step.py", userStep());
  out.clear();
  EXPECT_EQ(minrepro("shrink --config case.yaml --no-op-repro --force", &out), 0) << out;
  const auto warning = out.find("warning: the case was captured with PyTorch 1.2.0");
  ASSERT_NE(warning, std::string::npos) << out;
  EXPECT_LT(warning, out.find("pass samples:")) << out;
  EXPECT_EQ(out.find("captured with PyTorch 1.2.0", out.find('\n', warning)), std::string::npos)
      << "said once: " << out;
}

TEST_F(OwnLoop, AHarnessKeyTheBatchLacksIsBadInputBeforeAnyTrial) {
  std::string out;
  ASSERT_EQ(runCommand("cd " + user_.string() + " && " + testing::python() +
                           " -c 'import torch; torch.jit.save(torch.jit.script(torch.nn.Linear(10, 5)), \"model.pt\")'",
                       &out),
            0)
      << out;
  writeFile(user_ / "harness.yaml",
            "batch: saved.pt\nsamples: {tensors: {tokens: 0, tags: 0}}\n"
            "trial: {harness: {model: model.pt, input: tokens, target: nosuch}}\n");
  EXPECT_EQ(minrepro("shrink --config harness.yaml --work-dir w", &out), 2) << out;
  EXPECT_TRUE(has(out, "trial.harness.target names 'nosuch', which")) << out;
  EXPECT_TRUE(has(out, "(its tensors: lengths, sample_id, tags, tokens)")) << out;
  EXPECT_FALSE(fs::exists(user_ / "w" / "journal.txt") && has(readFile(user_ / "w" / "journal.txt"), "trial"));
}

// Capture from the user's own loop (tests/capture/tagger_loop.py: a tagger
// whose forward takes (tokens, lengths), a padding collate, a random token
// dropout behind cfg.token_dropout, AdamW) writes a case whose trial is the
// step itself, test-runs it once, and records what the reducers need.
class CaptureStep : public OwnLoop {
 protected:
  fs::path case_ = user_ / "crash";
  int train(const std::string& mode, std::string* output) {
    return runCommand("cd " + user_.string() + " && PYTHONPATH=" + MINREPRO_SOURCE_DIR + "/harness/python " +
                          testing::python() + " " + MINREPRO_SOURCE_DIR + "/tests/capture/tagger_loop.py crash " + mode,
                      output);
  }
  // captured_step.py on the captured batch, as a trial runs it, with `extra` arguments.
  int runStep(const std::string& extra, std::string* output) {
    return runCommand("cd " + work_.path().string() + " && " + testing::python() + " " +
                          (case_ / "captured_step.py").string() + " " + (case_ / "batch.pt").string() + " " +
                          MINREPRO_SOURCE_DIR + "/tests/capture/tagger_loop.py __main__ " + extra,
                      output);
  }
};

TEST_F(CaptureStep, TheWithBlockIsTheTrialAndTheArchiveRunsUnderAnotherPython) {
  std::string out;
  ASSERT_EQ(train("with", &out), 1) << out;
  EXPECT_TRUE(has(out, "step 2 loss")) << out;
  EXPECT_TRUE(has(out, "test run of the case: fails the same way (IndexError: index out of range in self)")) << out;
  const std::string text = readFile(case_ / "case.yaml");
  for (const char* line :
       {"# No samples section: minrepro infers the samples", "/captured_step.py", "{batch}", "",
        R"(    - {name: "cfg.token_dropout", off_args: ["--off", "cfg.token_dropout"]})", "  family: index-error",
        "reducers: [branches, samples, lengths, values]",
        R"(  trial: "the step itself: the with block at tagger_loop.py:)",
        R"(  test_run: "failed the same way (IndexError: index out of range in self) in )", R"(  step: "3")"})
    EXPECT_TRUE(has(text, line)) << line << "\n" << text;
  EXPECT_FALSE(has(text, "samples:")) << "one inference for every way in: minrepro's, when it opens the case\n" << text;
  EXPECT_FALSE(fs::exists(case_ / "CAPTURE-ERROR.txt"));
  EXPECT_EQ(testing::pyEvalOnBatch(case_ / "batch.pt", "sorted(b)"), "['lengths', 'sample_id', 'tags', 'tokens']\n");

  const fs::path archive = work_.path() / "repro.tar.gz";
  ASSERT_EQ(testing::shrinkCase(case_ / "case.yaml", archive, work_.path() / "work", &out), 0) << out;
  EXPECT_TRUE(has(out, "reduced 8 -> 1 samples (ids [1017])")) << out;
  // The same inference as `minrepro init` on the batch: ids, lengths, the padded tensors.
  EXPECT_TRUE(has(out,
                  "inferred from the batch: lengths: 'lengths' (the tensors padded past each sample's length: "
                  "tokens axis 1 pad 0, tags axis 1 pad -100)"))
      << out;
  const fs::path empty = work_.path() / "maintainer";
  ASSERT_TRUE(testing::extractInto(archive, empty));
  EXPECT_TRUE(has(readFile(empty / "case.yaml"), "--off, cfg.token_dropout")) << readFile(empty / "case.yaml");
  EXPECT_EQ(testing::pyEvalOnBatch(empty / "batch.pt", "b['tokens'].tolist(), b['lengths'].tolist()"), "[[50]] [1]\n");
  // Another Python at another path, no minrepro_capture on its path, an empty directory.
  const std::string maintainer = otherPython(work_.path() / "maintainer-venv");
  EXPECT_EQ(runCommand("cd " + empty.string() + " && " + maintainer + " repro.py", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
}

TEST_F(CaptureStep, TheDecoratedFunctionIsTheTrialAndItsBranchSwitchesOff) {
  std::string out;
  ASSERT_EQ(train("decorator", &out), 1) << out;
  const std::string text = readFile(case_ / "case.yaml");
  EXPECT_TRUE(has(text, R"(  trial: "the step itself: the decorated function __main__.decorated_step")")) << text;
  EXPECT_TRUE(has(text, "  family: index-error")) << text;
  EXPECT_TRUE(has(text, R"(name: "cfg.token_dropout")")) << text;
  // No step numbers given: not "none" completed (a new user's report), the count.
  EXPECT_TRUE(has(text, R"x(last_completed_step: "unknown (not given; 3 steps completed before this one)")x")) << text;
  // The step as the trial defines it: the user's function from the user's
  // file, without capture's decorator (its file had been capture's own,
  // whose lines tracebacks then quoted and the archive carried).
  const std::string step = readFile(case_ / "step.json");
  EXPECT_TRUE(has(step, std::string("\"file\": \"") + MINREPRO_SOURCE_DIR + "/tests/capture/tagger_loop.py\"")) << step;
  EXPECT_FALSE(has(step, "minrepro_capture/__init__.py")) << step;
  EXPECT_FALSE(has(step, "@minrepro_capture")) << step;
  EXPECT_EQ(runStep("", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  EXPECT_EQ(runStep("--off cfg.token_dropout", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  // The batch without the bad sample: the step runs through.
  ASSERT_EQ(runCommand(testing::python() + " -c \"import torch; b = torch.load('" + (case_ / "batch.pt").string() +
                           "'); keep = b['sample_id'] != 1017; torch.save({k: v[keep] for k, v in b.items()}, '" +
                           (case_ / "good.pt").string() + "')\"",
                       &out),
            0)
      << out;
  EXPECT_EQ(runCommand("cd " + work_.path().string() + " && " + testing::python() + " " +
                           (case_ / "captured_step.py").string() + " " + (case_ / "good.pt").string() + " " +
                           MINREPRO_SOURCE_DIR + "/tests/capture/tagger_loop.py __main__",
                       &out),
            0)
      << out;
  EXPECT_TRUE(has(out, "captured_step: the step ran without an error")) << out;
}

// `deco = minrepro_capture.capture(...)` then `@deco`: the trial had no
// `deco` (NameError, and shrink blamed the user's script); the decorator
// is not part of the step the trial runs.
TEST_F(CaptureStep, ADecoratorBoundToANameFirstIsNotPartOfTheTrial) {
  std::string out;
  ASSERT_EQ(train("decorator-name", &out), 1) << out;
  EXPECT_TRUE(has(out, "minrepro_capture: test run of the case: fails the same way")) << out;
  EXPECT_FALSE(has(readFile(case_ / "step.json"), "@CAPTURING")) << readFile(case_ / "step.json");
  EXPECT_EQ(runStep("", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  EXPECT_TRUE(has(out, "tagger_loop.py\", line ")) << out;  // the traceback quotes the user's lines
}

// A batch whose per-sample metadata holds a Python float (an image
// pipeline's scale factor): PyTorch 1.13's weights-only reader has no
// float opcode, so the step's own batch could not be read there (capture's
// test run "DOES NOT fail the same way", the archive exit 1 under 1.13; a
// new user's segmentation batch). Under the second torch (ctest -L
// second-torch) this is the case that failed.
TEST_F(CaptureStep, APythonFloatInTheBatchIsReadUnderEitherTorch) {
  std::string out;
  ASSERT_EQ(train("meta", &out), 1) << out;
  EXPECT_TRUE(has(out, "test run of the case: fails the same way (IndexError: index out of range in self)")) << out;
  EXPECT_FALSE(fs::exists(case_ / "CAPTURE-ERROR.txt"));
  EXPECT_EQ(runStep("", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  EXPECT_FALSE(has(out, "UnpicklingError")) << out;
}

// A fix is checked by editing the script (verify --code puts the user's
// copy in the archive's place): the step ran the source saved at capture,
// and a good fix "still fails" (a new user's segmentation loop). The
// block, and each definition the step uses, run as the file has them
// where it no longer holds the saved source; an unchanged file whose lines
// moved runs the saved step at its new lines.
TEST_F(CaptureStep, AFixInTheScriptIsWhatTheStepRuns) {
  std::string out;
  ASSERT_EQ(train("with", &out), 1) << out;
  const std::string script = readFile(fs::path(MINREPRO_SOURCE_DIR) / "tests/capture/tagger_loop.py");
  const auto edited = [&](const std::string& name, const std::string& from, const std::string& to) {
    const auto at = script.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string text = script;
    text.replace(at, from.size(), to);
    fs::create_directories(user_ / name);  // the script's own name, as verify --code gives it
    writeFile(user_ / name / "tagger_loop.py", text);
    return runCommand("cd " + work_.path().string() + " && " + testing::python() + " " +
                          (case_ / "captured_step.py").string() + " " + (case_ / "batch.pt").string() + " " +
                          (user_ / name / "tagger_loop.py").string() + " __main__ 2>&1",
                      &out);
  };
  const std::string call = "                loss = train_step(model, opt, batch, cfg)\n";
  EXPECT_EQ(
      edited("in_block", call, "                batch[\"tokens\"] = batch[\"tokens\"].clamp(max=VOCAB - 1)\n" + call),
      0)
      << out;
  EXPECT_TRUE(has(out, "captured_step: the with block at line ")) << out;
  EXPECT_TRUE(has(out, "of tagger_loop.py differs from the step captured: running the file's")) << out;
  const std::string augment = "    if not cfg.token_dropout:\n";
  EXPECT_EQ(edited("in_function", augment, "    tokens = tokens.clamp(max=VOCAB - 1)\n" + augment), 0) << out;
  EXPECT_TRUE(has(out, "captured_step: augment (line ")) << out;
  // Lines moved, nothing changed: the bug, at the lines the file has now.
  EXPECT_EQ(edited("moved", "import json\n", "import json\n\n\n\n"), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
  EXPECT_FALSE(has(out, "differs from the step captured")) << out;
}

TEST_F(CaptureStep, ATestRunThatFailsAnotherWayIsSaidAtCaptureTime) {
  writeFile(user_ / "train_config.json", "{\"label_smoothing\": 0.0}\n");
  std::string out;
  ASSERT_EQ(train("cwd-file", &out), 1) << out;
  EXPECT_TRUE(has(out, "DOES NOT fail the same way")) << out;
  const std::string error = readFile(case_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error,
                  "failed another way: FileNotFoundError: [Errno 2] No such file or directory: "
                  "'train_config.json' (the step raised IndexError"))
      << error;
  // The cause, from the run itself: the file is where training ran.
  EXPECT_TRUE(has(error,
                  "The step opened 'train_config.json' by a relative name, which resolves from the directory "
                  "it runs in: training ran in " +
                      user_.string() + ", where it is"))
      << error;
  EXPECT_TRUE(has(out, "minrepro_capture: fix what " + (case_ / "CAPTURE-ERROR.txt").string() +
                           " says, then reduce it with: minrepro shrink --config"))
      << out;
  // The failure section holds shrink to the step's failure: it stops with
  // exit 3 naming the file, where it used to reduce the FileNotFoundError
  // to an arbitrary sample and exit 0 (a new user's detection model).
  EXPECT_TRUE(has(readFile(case_ / "case.yaml"), "failure:\n  family: index-error")) << readFile(case_ / "case.yaml");
  EXPECT_TRUE(has(error, "minrepro shrink will stop with exit 3 on this case")) << error;
  EXPECT_EQ(testing::shrinkCase(case_ / "case.yaml", work_.path() / "repro.tar.gz", work_.path() / "work", &out), 3)
      << out;
  EXPECT_TRUE(has(out,
                  "a file the trial needs cannot be opened (it failed with: runtime-error: [Errno 2] No such file "
                  "or directory: 'train_config.json'"))
      << out;
  EXPECT_TRUE(has(out, "os.path.join(os.path.dirname(os.path.abspath(__file__)), 'train_config.json')")) << out;
  EXPECT_FALSE(fs::exists(work_.path() / "repro.tar.gz"));
}

// The same file read by a relative name in a step minrepro starts itself
// (no capture, no case.yaml): the step fails on it whatever the batch,
// though on a batch with no tensor it fails earlier, unpacking it. The
// file is where the user is, not in the trial's directory: exit 3 with
// what to do, not "reduced 8 -> 1" to an arbitrary sample.
TEST_F(OwnLoop, AFileOpenedByARelativeNameIsNamedNotReduced) {
  writeFile(user_ / "class_weights.json", "[1.0, 1.0, 1.0]\n");
  writeFile(user_ / "weighted_step.py",
            "import json, sys, torch\nb = torch.load(sys.argv[1], weights_only=True)\ntokens = b['tokens']\n"
            "with open('class_weights.json') as f:\n    weights = json.load(f)\n"
            "torch.nn.functional.embedding(tokens, torch.zeros(50, 4))\n");
  std::string out;
  EXPECT_EQ(minrepro("shrink --batch saved.pt --work-dir w --output r.tar.gz -- " + testing::python() +
                         " weighted_step.py {batch}",
                     &out),
            3)
      << out;
  EXPECT_TRUE(has(out, "error: nothing to reduce: a file the trial needs cannot be opened")) << out;
  EXPECT_TRUE(has(out, "('class_weights.json' is in " + user_.string() + ", where your shell ran it)")) << out;
  EXPECT_FALSE(fs::exists(user_ / "r.tar.gz"));
}

// Two samples out of range with different values (7 at position 4, 9 at
// position 9): the original raises "Target 7" first, the search keeps the
// 9. REPORT.md, signature.txt and repro.py quoted the original's message
// while repro.py printed "Target 9", and nothing said the 7 was there (a
// new user's segmentation batch). They quote what the archive does now,
// and the report says the original said other numbers.
TEST_F(OwnLoop, TheArchiveQuotesItsOwnMessageAndTheReportTheOriginalsToo) {
  writeFile(user_ / "two_bad.py",
            "import torch\nt = torch.randint(0, 5, (12,), generator=torch.Generator().manual_seed(0))\n"
            "t[4], t[9] = 7, 9\ntorch.save({'x': torch.zeros(12, 5), 'y': t}, 'two_bad.pt')\n");
  writeFile(user_ / "ce_step.py",
            "import sys, torch\nb = torch.load(sys.argv[1], weights_only=True)\n"
            "torch.nn.functional.cross_entropy(b['x'], b['y'])\n");
  std::string out;
  ASSERT_EQ(runCommand("cd " + user_.string() + " && " + testing::python() + " two_bad.py", &out), 0) << out;
  ASSERT_EQ(minrepro("shrink --batch two_bad.pt --no-op-repro --output r.tar.gz -- " + testing::python() +
                         " ce_step.py {batch}",
                     &out),
            0)
      << out;
  EXPECT_TRUE(has(out, "reduced 12 -> 1 samples (ids [9])")) << out;
  const fs::path dir = work_.path() / "maintainer";
  ASSERT_TRUE(testing::extractInto(user_ / "r.tar.gz", dir));
  EXPECT_EQ(runCommand("cd " + dir.string() + " && " + testing::python() + " repro.py", &out), 1) << out;
  EXPECT_TRUE(has(out, "IndexError: Target 9 is out of bounds.")) << out;
  const std::string report = readFile(dir / "REPORT.md");
  EXPECT_TRUE(has(report, "# Reproducer: index-error in cross_entropy: Target 9 is out of bounds.")) << report;
  EXPECT_TRUE(has(report,
                  "- First error: `Target 9 is out of bounds.`\n- The original batch's first error: "
                  "`Target 7 is out of bounds.` (the same failure, with other numbers;"))
      << report;
  EXPECT_TRUE(has(readFile(dir / "signature.txt"), "message: Target 9 is out of bounds.\n"));
  EXPECT_TRUE(has(readFile(dir / "repro.py"), "Reproduces: index-error in cross_entropy: Target 9 is out of bounds."));
  // verify holds the archive to its own message: it reproduces.
  EXPECT_EQ(runCommand(std::string(MINREPRO_BINARY) + " verify " + (user_ / "r.tar.gz").string() + " --runs 1", &out),
            0)
      << out;
}

TEST_F(CaptureStep, AStepWhoseObjectsCannotBeSavedNamesThem) {
  std::string out;
  ASSERT_EQ(train("unsaved", &out), 1) << out;
  EXPECT_FALSE(fs::exists(case_ / "case.yaml"));
  EXPECT_FALSE(fs::exists(case_ / "step_state.pt.partial"));
  const std::string error = readFile(case_ / "CAPTURE-ERROR.txt");
  EXPECT_TRUE(has(error, "the ones pickle refuses: scale (")) << error;
  EXPECT_TRUE(has(error, "define them at module level, or create them inside the step")) << error;
}

// The loop at a script's top level (most scripts) and the same text run as
// a notebook cell: the step is captured by value, the case is the one
// minrepro infers, and the archive runs in an empty directory under a
// Python that has PyTorch and nothing else (no numpy, no minrepro).
class CaptureByValue : public OwnLoop {
 protected:
  // A venv whose site directory holds the tests' torch and what it needs, but not numpy.
  std::string torchOnlyPython(const fs::path& dir) {
    std::string site, out;
    EXPECT_EQ(runCommand(
                  testing::python() + " -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))'",
                  &site),
              0);
    site = site.substr(0, site.find('\n'));
    const fs::path only = dir / "torch-only";
    fs::create_directories(only);
    for (const auto& entry : fs::directory_iterator(site)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("numpy", 0) == 0 || name.rfind("minrepro", 0) == 0 || name.find(".pth") != std::string::npos ||
          name.rfind("__editable__", 0) == 0)
        continue;
      fs::create_symlink(entry.path(), only / name);
    }
    EXPECT_EQ(runCommand(testing::python() + " -m venv --without-pip " + (dir / "venv").string(), &out), 0) << out;
    std::string own_site;
    EXPECT_EQ(runCommand((dir / "venv/bin/python").string() + " -c 'import site; print(site.getsitepackages()[0])'",
                         &own_site),
              0);
    writeFile(own_site.substr(0, own_site.find('\n')) + "/torch-only.pth", only.string() + "\n");
    return (dir / "venv/bin/python").string();
  }

  void captureShrinkAndRunAlone(const std::string& script) {
    std::string out;
    const fs::path case_dir = work_.path() / "case";
    ASSERT_EQ(runCommand("cd " + user_.string() + " && PYTHONPATH=" + MINREPRO_SOURCE_DIR + "/harness/python " +
                             testing::python() + " " + MINREPRO_SOURCE_DIR + "/tests/capture/" + script + " " +
                             case_dir.string(),
                         &out),
              1)
        << out;
    EXPECT_TRUE(has(out, "step 1 loss")) << out;
    EXPECT_TRUE(has(out, "test run of the case: fails the same way (IndexError: index out of range in self)")) << out;
    EXPECT_FALSE(fs::exists(case_dir / "CAPTURE-ERROR.txt")) << readFile(case_dir / "CAPTURE-ERROR.txt");
    EXPECT_TRUE(has(readFile(case_dir / "step.json"), "\"by_value\"")) << readFile(case_dir / "step.json");
    // The block sets `loss` before it reads it: the previous step's loss
    // (a tensor and its graph) is not saved with the step's variables.
    std::string strings;
    ASSERT_EQ(runCommand(testing::python() +
                             " -c 'import sys, zipfile, pickletools; z = zipfile.ZipFile(sys.argv[1]); "
                             "d = z.read([n for n in z.namelist() if n.endswith(\"data.pkl\")][0]); "
                             "print(sorted(a for _, a, _ in pickletools.genops(d) if isinstance(a, str)))' " +
                             (case_dir / "step_state.pt").string(),
                         &strings),
              0)
        << strings;
    EXPECT_TRUE(has(strings, "'variables'")) << strings;
    EXPECT_FALSE(has(strings, "'loss'")) << strings;
    const fs::path archive = work_.path() / "repro.tar.gz";
    ASSERT_EQ(testing::shrinkCase(case_dir / "case.yaml", archive, work_.path() / "work", &out), 0) << out;
    EXPECT_TRUE(has(out, "reduced 16 -> 1 samples (ids [5])")) << out;
    const fs::path empty = work_.path() / "maintainer";
    ASSERT_TRUE(testing::extractInto(archive, empty));
    const std::string alone = torchOnlyPython(work_.path() / "python");
    EXPECT_NE(runCommand(alone + " -c 'import numpy'", &out), 0) << "numpy must be missing there: " << out;
    EXPECT_EQ(runCommand("cd " + empty.string() + " && " + alone + " repro.py", &out), 1) << out;
    EXPECT_TRUE(has(out, "IndexError: index out of range in self")) << out;
    EXPECT_FALSE(has(out, "ModuleNotFoundError")) << out;
  }
};

TEST_F(CaptureByValue, ALoopAtTheScriptsTopLevel) { captureShrinkAndRunAlone("toplevel_loop.py"); }

TEST_F(CaptureByValue, ANotebookCell) { captureShrinkAndRunAlone("notebook_cell.py"); }

// A detector's loop (tests/capture/detection_loop.py): the `for` statement
// unpacks (images, targets), targets a list of per-image dicts, and the
// block reads the two names. Each is a part of the batch, cut with it: a
// list saved with the step's state instead met every cut batch whole, and
// every smaller candidate failed another way ("8 -> 8 samples", exit 0).
class DetectionLoop : public OwnLoop {
 protected:
  fs::path case_dir_ = work_.path() / "case";

  int capture(const std::string& mode, std::string* out) {
    return runCommand("cd " + user_.string() + " && PYTHONPATH=" + MINREPRO_SOURCE_DIR + "/harness/python " +
                          testing::python() + " " + MINREPRO_SOURCE_DIR + "/tests/capture/detection_loop.py " +
                          case_dir_.string() + " " + mode,
                      out);
  }
};

TEST_F(DetectionLoop, TheNamesTheForStatementUnpacksAreCutWithTheBatch) {
  std::string out;
  ASSERT_EQ(capture("plain", &out), 1) << out;
  EXPECT_TRUE(has(out, "fails the same way (IndexError: Target 5 is out of bounds.)")) << out;
  EXPECT_FALSE(has(out, "note:")) << out;
  const std::string step = readFile(case_dir_ / "step.json");
  EXPECT_TRUE(has(step, "\"targets\": [\n   1\n  ]")) << step;
  ASSERT_EQ(testing::shrinkCase(case_dir_ / "case.yaml", work_.path() / "repro.tar.gz", work_.path() / "work", &out,
                                testing::kNoOpStep),
            0)
      << out;
  EXPECT_TRUE(has(out, "sample ids: '[1][*].image_id'")) << out;  // the records' own ids
  EXPECT_TRUE(has(out, "reduced 8 -> 1 samples (ids [13])")) << out;
  EXPECT_FALSE(has(out, "could go")) << out;
  // The label one past the head, among the per-image records' labels.
  ASSERT_TRUE(testing::extractInto(work_.path() / "repro.tar.gz", work_.path() / "extracted"));
  const std::string report = readFile(work_.path() / "extracted" / "REPORT.md");
  EXPECT_TRUE(has(report, "`[1][*].labels` (in each sample's entry): the kept samples hold 5, outside the range "))
      << report;
}

TEST_F(DetectionLoop, ACopyOfAPerSampleListIsNamedAndAShrinkThatCutsNoSampleSaysWhy) {
  std::string out;
  ASSERT_EQ(capture("copy", &out), 1) << out;
  const std::string note =
      "`targets` holds 8 entries, as the batch holds 8 samples, but is not part of the batch given to capture()";
  EXPECT_TRUE(has(out, "minrepro_capture: note: " + note)) << out;
  EXPECT_TRUE(has(readFile(case_dir_ / "CAPTURE-ERROR.txt"), note));
  const fs::path archive = work_.path() / "repro.tar.gz";
  ASSERT_EQ(testing::shrinkCase(case_dir_ / "case.yaml", archive, work_.path() / "work", &out, testing::kNoOpStep), 0)
      << out;
  EXPECT_TRUE(has(out, "reduced 8 -> 8 samples")) << out;
  const std::string warning =
      "none of the 8 samples could go: smaller batches failed another way (most often index-error: index ";
  EXPECT_TRUE(has(out, "warning: " + warning)) << out;
  EXPECT_TRUE(has(out, "a variable the block reads that is not the batch given to capture()")) << out;
  ASSERT_TRUE(testing::extractInto(archive, work_.path() / "extracted"));
  EXPECT_TRUE(has(readFile(work_.path() / "extracted" / "REPORT.md"), warning));
}

TEST(TorchVersions, MajorMinorDecidesAndEachMismatchIsOneSentence) {
  EXPECT_EQ(torchMinorVersion("2.13.0+cpu"), "2.13");
  EXPECT_EQ(torchMinorVersion("1.13.0a0+git"), "1.13");
  EXPECT_EQ(torchMinorVersion("unknown"), "");
  const std::vector<std::pair<std::string, std::string>> env = {
      {"LibTorch", "2.13.0"}, {"PyTorch", "1.13.1"}, {"PyTorch from", "/usr/bin/python3"}};
  EXPECT_TRUE(
      torchVersionMismatches({{"pytorch", "1.13.0"}}, {{"LibTorch", "1.13.1"}, {"PyTorch", "1.13.1"}}, false).empty());
  const auto both = torchVersionMismatches({{"pytorch", "2.13.0+cpu"}}, env, false);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_TRUE(has(both[0], "captured with PyTorch 2.13.0+cpu but the trials run PyTorch 1.13.1 (/usr/bin/python3)"));
  EXPECT_TRUE(has(both[1], "minrepro's LibTorch is 2.13.0 but the trials' Python runs PyTorch 1.13.1"));
  // The built-in harness runs LibTorch: the captured version is held against it alone.
  const auto harness = torchVersionMismatches({{"libtorch", "1.13.1"}}, env, true);
  ASSERT_EQ(harness.size(), 1u);
  EXPECT_TRUE(
      has(harness[0], "captured with LibTorch 1.13.1 but the trials run LibTorch 2.13.0 (the built-in harness)"));
}

TEST(FlakyRule, OneRuleForVerifyAndTheSelfCheck) {
  const auto run = [](bool as_expected, bool failed) {
    RunResult r;
    r.as_expected = as_expected;
    if (failed) r.signature.family = FailureFamily::RuntimeError;
    return r;
  };
  // 2 of 6 at a recorded rate of 0.4: consistent.
  std::vector<RunResult> runs = {run(true, true),   run(false, false), run(true, true),
                                 run(false, false), run(false, false), run(false, false)};
  EXPECT_TRUE(judgeFlakyRuns(runs, 0.4).reproduces);
  EXPECT_TRUE(has(judgeFlakyRuns(runs, 0.4).describe(0.4), "consistent with the recorded rate"));
  // Another failure besides the recorded one is slippage, whatever else showed.
  runs.push_back(run(false, true));
  EXPECT_FALSE(judgeFlakyRuns(runs, 0.4).reproduces);
  // None failing: a verdict only when the runs were enough for the rate.
  const std::vector<RunResult> passes(6, run(false, false));
  EXPECT_FALSE(judgeFlakyRuns(passes, 0.1).conclusive);
  EXPECT_EQ(judgeFlakyRuns(passes, 0.1).runs_needed, 66);
  EXPECT_TRUE(judgeFlakyRuns(passes, 0.9).conclusive);
  EXPECT_FALSE(judgeFlakyRuns(passes, 0.9).reproduces);
}

TEST(BatchDependence, AdviceFollowsTheCause) {
  CaseConfig config;
  config.command = CommandTrial{{"/venv/bin/python", "step.py", "{batch}"}, {}, {}};
  TrialOutcome o;
  o.end = TrialEnd::Exited;
  o.exit_code = 2;
  o.stderr_text = "usage: step.py [-h] --batch BATCH\nstep.py: error: the following arguments are required: --batch\n";
  EXPECT_TRUE(has(batchIndependentAdvice(o, config), "the trial's command line is wrong"));
  o.exit_code = 1;
  o.stderr_text = "Traceback (most recent call last):\n  File \"x\"\nModuleNotFoundError: No module named 'timm'\n";
  EXPECT_TRUE(has(batchIndependentAdvice(o, config), "Python the trial runs (/venv/bin/python)"));
  o.stderr_text = "TypeError: forward() missing 1 required positional argument: 'lengths'\n";
  EXPECT_TRUE(has(batchIndependentAdvice(o, config), "calls a function with the wrong arguments"));
  // A relative name opened by the step: how to open it from the script (the
  // advice named only trial.command, which held no such path).
  o.stderr_text = "FileNotFoundError: [Errno 2] No such file or directory: 'config.json'\n";
  EXPECT_TRUE(has(batchIndependentAdvice(o, config),
                  "The step opened 'config.json' by a relative path, which resolves from the directory it runs in"));
  EXPECT_TRUE(has(batchIndependentAdvice(o, config), "os.path.dirname(os.path.abspath(__file__)), 'config.json')"));
  o.stderr_text = "Segmentation fault\n";
  EXPECT_TRUE(has(batchIndependentAdvice(o, config), "the failure does not depend on the batch: "));
}

}  // namespace
}  // namespace minrepro
