// Real-tensor tier: the inference every way in shares (harness/case_inference.h)
// on the batch layouts people bring (tests/fixtures/layouts/make_layouts.py,
// saved by real PyTorch), each with the case it should get written here by
// hand: sample tensors and their axes, per-sample lists, ids, the lengths
// tensor or mask, the sequence axes with their padding, what is kept whole.
// Three layouts whose samples are ranges of one axis are refused with what to
// save instead. init's summary and the case it writes come from one
// structure: the summary's first line names exactly the file's samples.
#include "harness/case_inference.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "commands/init.h"
#include "core/errors.h"
#include "harness/batch_io.h"
#include "harness/batch_store.h"
#include "harness/contract.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

struct Expected {
  std::map<std::string, int> samples = {};  // tensor -> sample axis
  std::vector<std::string> lists = {};
  std::string ids = {}, lengths = {}, mask = {};
  std::map<std::string, std::pair<int, double>> sequence = {};  // tensor -> (axis, padding)
  std::vector<std::string> whole = {};                          // kept whole
};

class Layouts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("minrepro-layouts");
    const std::string error = testing::makeCases("tests/fixtures/layouts/make_layouts.py", dir_->path());
    ASSERT_EQ(error, "");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path batch(const std::string& layout) { return dir_->path() / layout / "batch.pt"; }

  static void expectInference(const std::string& layout, const Expected& e) {
    SCOPED_TRACE(layout);
    const InferredCase c = inferCase(batch(layout));
    std::map<std::string, int> samples;
    for (const SampleAxis& a : c.sample_axes) samples[a.tensor] = a.axis;
    EXPECT_EQ(samples, e.samples);
    EXPECT_EQ(c.sample_lists, e.lists);
    EXPECT_EQ(c.ids, e.ids);
    EXPECT_EQ(c.lengths, e.lengths);
    EXPECT_EQ(c.mask, e.mask);
    std::map<std::string, std::pair<int, double>> sequence;
    for (const SequenceTensor& s : c.sequence) sequence[s.tensor] = {s.axis, s.pad};
    EXPECT_EQ(sequence, e.sequence);
    std::vector<std::string> whole;
    for (const InferredTensor& t : c.tensors)
      if (t.role == "whole") {
        whole.push_back(t.name);
        EXPECT_FALSE(t.reason.empty()) << t.name << " is kept whole without a reason";
      }
    EXPECT_EQ(whole, e.whole);
  }

  static std::string refusal(const std::string& layout) {
    try {
      inferCase(batch(layout));
    } catch (const BadInputError& e) {
      return e.what();
    }
    return "";
  }

  static testing::TempDir* dir_;
};

testing::TempDir* Layouts::dir_ = nullptr;

TEST_F(Layouts, TokenizerDictsTakeTheirLengthsFromTheAttentionMask) {
  expectInference("tokenizer_cls", {.samples = {{"input_ids", 0}, {"attention_mask", 0}, {"labels", 0}},
                                    .mask = "attention_mask",
                                    .sequence = {{"attention_mask", {1, 0}}, {"input_ids", {1, 0}}}});
  expectInference(
      "tokenizer_tokens",
      {.samples = {{"input_ids", 0}, {"token_type_ids", 0}, {"attention_mask", 0}, {"labels", 0}},
       .mask = "attention_mask",
       .sequence = {
           {"attention_mask", {1, 0}}, {"input_ids", {1, 0}}, {"token_type_ids", {1, 0}}, {"labels", {1, -100}}}});
}

// The camera ids 0..3 beside 3 image channels are no lengths: nothing is
// padded past them.
TEST_F(Layouts, SmallPerSampleIntegersStaySampleTensors) {
  expectInference("image_meta", {.samples = {{"image", 0}, {"camera", 0}, {"label", 0}}, .ids = "idx"});
  expectInference("one_hot", {.samples = {{"x", 0}, {"y", 0}}});
  expectInference("tabular", {.samples = {{"x", 0}, {"y", 0}}});
}

TEST_F(Layouts, AudioFindsItsTimeAxisThroughTheLengths) {
  expectInference("audio_btf",
                  {.samples = {{"frames", 0}, {"speaker", 0}}, .lengths = "lengths", .sequence = {{"frames", {1, 0}}}});
  expectInference("audio_bft",
                  {.samples = {{"mel", 0}, {"text", 0}}, .lengths = "mel_lengths", .sequence = {{"mel", {2, -11.5}}}});
  expectInference("tagger_lengths", {.samples = {{"tokens", 0}, {"tags", 0}},
                                     .ids = "sample_id",
                                     .lengths = "lengths",
                                     .sequence = {{"tokens", {1, 0}}, {"tags", {1, -100}}}});
}

TEST_F(Layouts, TuplesListsAndNestedDictsAreNamedByPath) {
  expectInference("tuple_xy", {.samples = {{"[0]", 0}, {"[1]", 0}}});
  expectInference("list_xy", {.samples = {{"[0]", 0}, {"[1]", 0}}});
  expectInference("bare_tensor", {.samples = {{".", 0}}});
  expectInference("nested_dicts",
                  {.samples = {{"inputs.ids", 0}, {"inputs.mask", 0}, {"targets.cls", 0}, {"targets.weight", 0}},
                   .mask = "inputs.mask",
                   .sequence = {{"inputs.mask", {1, 0}}, {"inputs.ids", {1, 0}}}});
  const InferredCase nested = inferCase(batch("nested_dicts"));
  EXPECT_EQ(nested.kept_values, (std::vector<std::string>{"meta.epoch", "meta.split"}));
}

TEST_F(Layouts, ListsOfOneEntryPerSampleAreCutWithTheSamples) {
  expectInference("detection_targets", {.samples = {{"[0]", 0}}, .lists = {"[1]"}});
  expectInference("detection_lists", {.samples = {{"images", 0}}, .lists = {"boxes", "labels"}});
  expectInference("file_names", {.samples = {{"image", 0}, {"label", 0}}, .lists = {"path", "meta"}});
  // Each sentence's words: one list per sample, not the samples found in
  // the one sentence that has as many words as the batch has sentences.
  expectInference("tagger_padded_width", {.samples = {{"inputs[0]", 0}, {"tags", 0}},
                                          .lists = {"words", "doc_id"},
                                          .ids = "sample_id",
                                          .lengths = "inputs[1]",
                                          .sequence = {{"inputs[0]", {1, 0}}, {"tags", {1, -100}}}});
}

TEST_F(Layouts, SequenceFirstAndWindowOnlyLayouts) {
  expectInference("sequence_first", {.samples = {{"src", 1}, {"target", 0}}});
  expectInference("tokens_no_lengths", {.samples = {{"tokens", 0}, {"label", 0}}, .sequence = {{"tokens", {1, 0}}}});
  // Two categorical columns are no window of two tokens (a new user's
  // forecaster: its store and promotion ids were cut as a sequence).
  expectInference(
      "forecaster",
      {.samples = {{"past.values", 0}, {"past.mask", 0}, {"static[0]", 0}, {"static[1]", 0}, {"future_values", 0}},
       .lists = {"series_id"}});
}

TEST_F(Layouts, RangeLayoutsAndObjectsAreRefusedWithWhatToSave) {
  const std::string packed = refusal("packed_cu_seqlens");
  EXPECT_NE(packed.find("'cu_seqlens' marks packed sequences"), std::string::npos) << packed;
  EXPECT_NE(packed.find("save the batch padded"), std::string::npos) << packed;
  const std::string graph = refusal("graph_batch");
  EXPECT_NE(graph.find("'batch' assigns"), std::string::npos) << graph;
  EXPECT_NE(graph.find("to_data_list"), std::string::npos) << graph;
  const std::string offsets = refusal("packed_offsets");
  EXPECT_NE(offsets.find("'user.history_offsets' gives where each sample's values start"), std::string::npos)
      << offsets;
  EXPECT_NE(offsets.find("padded into one [samples, length] tensor"), std::string::npos) << offsets;
  // CTC's targets joined end to end, with their lengths (helper-17's speech batch).
  const std::string joined = refusal("ctc_joined");
  EXPECT_NE(joined.find("'targets' holds the samples' values joined end to end"), std::string::npos) << joined;
  EXPECT_NE(joined.find("list(targets.split(target_lens.tolist()))"), std::string::npos) << joined;
  // The same in a collate's tuple, nothing named: the lengths are found
  // beside the joined values (a new user's speech model: 8 -> 8, exit 0).
  const std::string tuple = refusal("ctc_tuple_joined");
  EXPECT_NE(tuple.find("'[1][0]' holds the samples' values joined end to end"), std::string::npos) << tuple;
  EXPECT_NE(tuple.find("list(batch[1][0].split(batch[1][1].tolist()))"), std::string::npos) << tuple;
  const std::string named = refusal("named_tuple");
  EXPECT_NE(named.find("such as a named tuple"), std::string::npos) << named;
  EXPECT_NE(named.find("tuple(batch)"), std::string::npos) << named;
}

// Two features named like ids, each unique in the batch (a user's and an
// item's): neither names the samples (a new user's report said "Kept sample
// ids: [202]", a user id), and the doubt says why.
TEST_F(Layouts, TwoFeaturesNamedLikeIdsAreNotTakenForTheSamplesIds) {
  const InferredCase c = inferCase(batch("recommender"));
  EXPECT_EQ(c.ids, "");
  std::string doubts;
  for (const std::string& d : c.doubts) doubts += d + "\n";
  EXPECT_NE(doubts.find("user.user_id, item.item_id are each named like ids"), std::string::npos) << doubts;
  EXPECT_NE(inferCase(batch("ctc_padded")).ids, "") << "one NAME_id still names the samples";
}

// One text was empty: its row of the mask is all zeros. The mask still
// gives the lengths (a new user's report: it was dropped for a window of
// input_ids exactly when the mask held the bug). A left-padded mask gives
// none, and the doubt says why it was not used.
TEST_F(Layouts, AMaskWithAnEmptyRowStillGivesTheLengths) {
  expectInference("tokenizer_empty_row", {.samples = {{"input_ids", 0}, {"attention_mask", 0}, {"labels", 0}},
                                          .mask = "attention_mask",
                                          .sequence = {{"attention_mask", {1, 0}}, {"input_ids", {1, 0}}}});
  const InferredCase left = inferCase(batch("tokenizer_left_padded"));
  EXPECT_EQ(left.mask, "");
  std::string doubts;
  for (const std::string& d : left.doubts) doubts += d + "\n";
  EXPECT_NE(doubts.find("'attention_mask' is named like a mask but is not a right-padded"), std::string::npos)
      << doubts;
}

// init's first note lists the sample tensors, ids and lengths; the case it
// writes names the same ones under samples and sequence (the bug it
// replaces: a summary naming `camera` above a case that kept it whole).
TEST_F(Layouts, InitsSummaryAndFileComeFromOneStructure) {
  for (const std::string layout : {"image_meta", "tokenizer_cls", "tagger_lengths", "detection_targets"}) {
    SCOPED_TRACE(layout);
    InitOptions options;
    options.batch = batch(layout);
    options.case_dir = batch(layout).parent_path();
    options.argv = {"python", "step.py", "{batch}"};
    std::vector<std::string> notes;
    const std::string text = renderInitCase(options, notes);
    const InferredCase c = inferCase(batch(layout));
    ASSERT_FALSE(notes.empty());
    for (const SampleAxis& a : c.sample_axes) {
      EXPECT_NE(notes.front().find(a.tensor), std::string::npos) << notes.front();
      const std::string axis = ": " + std::to_string(a.axis);
      EXPECT_TRUE(text.find(a.tensor + axis) != std::string::npos ||
                  text.find("\"" + a.tensor + "\"" + axis) != std::string::npos)
          << text;
    }
    for (const std::string& name : {c.ids, c.lengths})
      if (!name.empty()) {
        EXPECT_NE(notes.front().find(name), std::string::npos) << notes.front();
        EXPECT_NE(text.find(": " + name + "\n"), std::string::npos) << text;
      }
    for (const std::string& list : c.sample_lists) {
      EXPECT_NE(notes.front().find(list), std::string::npos) << notes.front();
      EXPECT_NE(text.find("lists: "), std::string::npos) << text;
    }
  }
}

// A padded CTC batch: one of the two per-sample lengths cuts the sequence,
// the other keeps its values (the values pass set a kept utterance's target
// length to the batch's median, past its labels), and utt_id names the
// samples (it was rewritten to another utterance's id).
TEST_F(Layouts, ASecondLengthsTensorKeepsItsValuesAndUttIdNamesTheSamples) {
  const InferredCase c = inferCase(batch("ctc_padded"));
  EXPECT_EQ(c.ids, "utt_id");
  ASSERT_TRUE(c.lengths == "feat_lens" || c.lengths == "target_lens") << c.lengths;
  EXPECT_EQ(c.values_kept, (std::vector<std::string>{c.lengths == "feat_lens" ? "target_lens" : "feat_lens"}));
  InitOptions options;
  options.batch = batch("ctc_padded");
  options.case_dir = batch("ctc_padded").parent_path();
  options.argv = {"python", "step.py", "{batch}"};
  std::vector<std::string> notes;
  const std::string text = renderInitCase(options, notes);
  EXPECT_NE(text.find("values:\n  exclude: [" + c.values_kept.front() + "]"), std::string::npos) << text;
}

// init --output in another directory than the one the command was typed
// in: the case's paths are written relative to the case file's own
// directory (where they resolve), the command's as the shell resolved them.
// Before, both were written relative to the current directory: the batch
// was "not found" and the step was {case_dir}/step.py of the wrong directory.
TEST_F(Layouts, InitWritesPathsRelativeToTheCaseFileNotTheCurrentDirectory) {
  const fs::path project = batch("tokenizer_cls").parent_path();
  testing::writeFile(project / "step.py", "x");
  InitOptions options;
  options.batch = batch("tokenizer_cls");
  options.command_dir = project.parent_path();  // typed one directory up: python proj/step.py proj/batch.pt
  options.case_dir = project;                   // --output proj/case.yaml
  const std::string proj = project.filename().string();
  options.argv = {"python", proj + "/step.py", proj + "/batch.pt"};
  std::vector<std::string> notes;
  std::string text = renderInitCase(options, notes);
  EXPECT_NE(text.find("\nbatch: batch.pt\n"), std::string::npos) << text;
  EXPECT_NE(text.find("command: [\"python\", \"{case_dir}/step.py\", \"{batch}\"]"), std::string::npos) << text;
  options.case_dir = project.parent_path() / "cases";  // --output elsewhere: absolute paths
  text = renderInitCase(options, notes);
  EXPECT_NE(text.find("\nbatch: " + batch("tokenizer_cls").string() + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\"" + (project / "step.py").string() + "\""), std::string::npos) << text;
}

// Each candidate for the lengths is paired only with the axes as long as
// its largest value, within a budget of checks (probe 36: 40 000 small
// per-sample tensors beside one [2, 4] took init 82 s, each candidate going
// over every tensor). Past the budget the search stops and a doubt says so;
// a lengths tensor among a few hundred such tensors is still found. The
// time itself is measured, not asserted.
TEST_F(Layouts, ManyPerSampleTensorsArePairedWithinABudget) {
  testing::TempDir dir("minrepro-many-tensors");
  const auto save = [&](const std::string& name, const std::string& batch) {
    ASSERT_EQ(testing::runCommand(testing::python() + " -c \"import torch; y = torch.tensor([1, 4]); torch.save(" +
                                  batch + ", '" + (dir.path() / name).string() + "')\""),
              0);
  };
  save("many.pt", "{'input': torch.randn(2, 4), 'target': y, 'many': [y.clone() for _ in range(20_001)]}");
  const InferredCase many = inferCase(dir.path() / "many.pt");
  std::string doubts;
  for (const std::string& d : many.doubts) doubts += d + "\n";
  EXPECT_NE(doubts.find("too many tensors to pair each with each in the search for a lengths tensor"),
            std::string::npos)
      << doubts.substr(0, 400);
  save("some.pt",
       "{'tokens': torch.tensor([[5, 0, 0, 0], [6, 7, 8, 9]]), 'lengths': y, 'many': [y.clone() for _ in "
       "range(300)]}");
  const InferredCase some = inferCase(dir.path() / "some.pt");
  EXPECT_EQ(some.lengths, "lengths");
  ASSERT_EQ(some.sequence.size(), 1u);
  EXPECT_EQ(some.sequence[0].tensor, "tokens");
}

// A tensor named with a right-to-left override (U+202E): the summary says
// its bytes, and case.yaml writes the name escaped, which YAML reads back as
// the name itself (probe 24: both kept it raw, shown reordered).
TEST_F(Layouts, ANameWithAHiddenControlIsWrittenEscapedAndReadsBackTheSame) {
  testing::TempDir dir("minrepro-bidi-name");
  const std::string rlo = "\xe2\x80\xae";
  ASSERT_EQ(testing::runCommand(testing::python() + " -c \"import torch; torch.save({'x': torch.randn(16, 4), " +
                                "'lab' + chr(0x202e) + 'el': torch.arange(16) % 4}, '" +
                                (dir.path() / "batch.pt").string() + "')\""),
            0);
  InitOptions options;
  options.batch = dir.path() / "batch.pt";
  options.case_dir = dir.path();
  options.argv = {"python", "step.py", "{batch}"};
  std::vector<std::string> notes;
  const std::string text = renderInitCase(options, notes);
  EXPECT_EQ(text.find(rlo), std::string::npos) << text;
  EXPECT_NE(text.find("\"lab\\u202eel\": 0"), std::string::npos) << text;
  EXPECT_NE(text.find("lab\\xe2\\x80\\xaeel"), std::string::npos) << text;  // the summary's comment line
  const YAML::Node read = YAML::Load(text);
  EXPECT_TRUE(read["samples"]["tensors"]["lab" + rlo + "el"].IsDefined()) << text;
}

// The zero-config start writes its case.yaml in the work directory through
// a temporary name: a link planted there is removed, not written through.
TEST_F(Layouts, TheZeroConfigCaseIsNotWrittenThroughALinkAtItsTemporaryName) {
  testing::TempDir work("minrepro-zero-config-link");
  const fs::path victim = work.path() / "victim.txt";
  testing::writeFile(victim, "VICTIM");
  fs::create_directories(work.path() / "w");
  testing::writeFile(work.path() / "w" / ".minrepro-work", "an earlier run's\n");
  fs::create_symlink(victim, work.path() / "w" / "case.yaml.partial");
  InitOptions options;
  options.batch = batch("tokenizer_cls");
  options.case_dir = batch("tokenizer_cls").parent_path();
  options.argv = {"python", "step.py", "{batch}"};
  std::ostringstream out;
  const fs::path written = writeZeroConfigCase(options, work.path() / "w", true, out);
  EXPECT_EQ(testing::readFile(victim), "VICTIM");
  EXPECT_NE(testing::readFile(written).find("samples:"), std::string::npos);
}

// Ids in per-sample records (torchvision's detection targets): inferred as
// "[1][*].image_id" when unique, not when one repeats; a case naming such a
// field that some entry lacks is refused when opened.
TEST(IdsInRecords, AreInferredWhenUniqueAndCheckedWhenOpened) {
  testing::TempDir dir;
  const fs::path file = dir.path() / "b.pt";
  const auto save = [&](const std::string& ids) {
    std::string out;
    ASSERT_EQ(testing::runCommand(testing::python() +
                                      " -c \"import torch; torch.save((torch.zeros(3, 2), [{'labels': "
                                      "torch.tensor([1]), 'image_id': torch.tensor(i)} for i in " +
                                      ids + "]), '" + file.string() + "')\"",
                                  &out),
              0)
        << out;
  };
  save("(7, 3, 9)");
  EXPECT_EQ(inferCase(file).ids, "[1][*].image_id");
  save("(7, 7, 9)");
  EXPECT_EQ(inferCase(file).ids, "");
  CaseConfig config;
  config.batch = file;
  config.case_file = dir.path() / "case.yaml";
  config.sample_axes = {{"[0]", 0}};
  config.sample_lists = {"[1]"};
  config.sample_ids = "[1][*].image_id";
  save("(7, 3, 9)");
  EXPECT_EQ(BatchStore::open(config)->sampleIds(), (std::vector<std::int64_t>{7, 3, 9}));
  config.sample_ids = "[1][*].labels_id";
  try {
    BatchStore::open(config);
    ADD_FAILURE() << "opened";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("which must be one integer in every entry of the list; entry 0 has none"),
              std::string::npos)
        << e.what();
  }
}

// A dimension 3e8 long beside an empty one: no data, 1.5 KB on disk, and
// per-sample bookkeeping of gigabytes (probe 42: init at 2.75 GB, check at
// 2.46 GB, shrink exit 1). Refused by inference, the store and check alike.
TEST(SamplesWithoutData, AreRefusedBeforeAnyPerSampleWork) {
  testing::TempDir dir;
  NamedTensors b;
  b.names = {"y"};
  b.tensors = {at::empty({300'000'000, 0}, at::kLong)};
  const fs::path file = dir.path() / "b.pt";
  writeBatchFile(b, file);
  const std::string said = "declares 300000000 samples (a dimension that long) but holds 0 bytes of tensor data";
  try {
    inferCase(file);
    ADD_FAILURE() << "inferred";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
  }
  CaseConfig config;
  config.batch = file;
  config.case_file = dir.path() / "case.yaml";
  config.sample_axes = {{"y", 0}};
  try {
    BatchStore::open(config);
    ADD_FAILURE() << "opened";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
  }
  TargetContract contract;
  contract.target = "y";
  contract.classes = 4;
  try {
    checkClassTargets(file, contract);
    ADD_FAILURE() << "checked";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
  }
  // A million samples need no data of their own (a batch of empty rows).
  b.tensors = {at::empty({1'000'000, 0}, at::kLong)};
  writeBatchFile(b, file);
  try {
    inferCase(file);
  } catch (const BadInputError& e) {
    EXPECT_EQ(std::string(e.what()).find("declares"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minrepro
