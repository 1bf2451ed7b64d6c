// Whole-binary tier: the batches people bring, shrunk with no case file at
// all (`minrepro shrink --batch batch.pt -- python step.py {batch}`), each to
// the one sample planted in it (tests/fixtures/layouts/make_layouts.py): a
// tuple from a TensorDataset, images with categorical metadata (a
// single-colour image: a NaN loss), a tokenizer's dict with its attention
// mask, a mel spectrogram [B, F, T] with lengths, nested dicts, and a
// detection batch of one target dict per image. The archive's batch keeps
// the structure and types the step unpacks, and loads with
// weights_only=True. Real processes and real PyTorch throughout.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/e2e_fixture.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using testing::runCommand;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class LayoutsEndToEnd : public ::testing::Test {
 protected:
  testing::TempDir work_{"minrepro-layouts-e2e"};

  void SetUp() override { ASSERT_EQ(testing::makeCases("tests/fixtures/layouts/make_layouts.py", work_.path()), ""); }

  // Shrinks a layout with no case file; returns the output, `status` the exit status.
  std::string shrink(const std::string& layout, int* status) {
    std::string out;
    *status = runCommand("cd " + (work_.path() / layout).string() + " && " + MINREPRO_BINARY +
                             " shrink --batch batch.pt --no-op-repro -- " + testing::python() + " step.py {batch}",
                         &out);
    return out;
  }

  // Shrinks DIR's step with a case written by hand, its samples section
  // `samples` (indented lines); returns the exit status, the output in *out.
  int shrinkWithSamples(const fs::path& dir, const std::string& samples, std::string* out) {
    testing::writeFile(dir / "case.yaml", "batch: batch.pt\nsamples:\n" + samples + "trial:\n  command: [" +
                                              testing::python() + ", \"{case_dir}/step.py\", \"{batch}\"]\n");
    return runCommand("cd " + dir.string() + " && " + MINREPRO_BINARY + " shrink --config case.yaml --no-op-repro",
                      out);
  }

  // What Python makes of the archive's batch, loaded as a maintainer would.
  std::string archived(const std::string& layout, const std::string& expression) {
    const fs::path dir = work_.path() / layout / "maintainer";
    EXPECT_TRUE(testing::extractInto(work_.path() / layout / "repro.tar.gz", dir));
    std::string out;
    EXPECT_EQ(runCommand(testing::python() + " -c \"import torch; b = torch.load('" + (dir / "batch.pt").string() +
                             "', weights_only=True); print(" + expression + ")\"",
                         &out),
              0)
        << out;
    return out;
  }

  void expectShrunkTo(const std::string& layout, const std::string& ids) {
    int status = -1;
    const std::string out = shrink(layout, &status);
    ASSERT_EQ(status, 0) << out;
    EXPECT_TRUE(has(out, "reduced 24 -> 1 samples (ids [" + ids + "])")) << out;
    std::smatch trials;
    ASSERT_TRUE(std::regex_search(out, trials, std::regex(R"(\]\) in (\d+) trials)"))) << out;
    EXPECT_LE(std::stoi(trials[1].str()), 60) << "a deterministic failure in a batch of 24: " << out;
    EXPECT_TRUE(has(out, "self-check: the archive reproduced on its own")) << out;
  }
};

TEST_F(LayoutsEndToEnd, TupleFromATensorDataset) {
  expectShrunkTo("tuple_xy", "5");
  EXPECT_EQ(archived("tuple_xy", "type(b).__name__, [tuple(t.shape) for t in b], b[0].isnan().any().item()"),
            "tuple [(1, 10), (1,)] True\n");
}

TEST_F(LayoutsEndToEnd, ImagesWithCategoricalMetadata) {
  expectShrunkTo("image_meta", "3017");
  EXPECT_EQ(archived("image_meta", "sorted(b), b['camera'].shape, b['idx'].tolist()"),
            "['camera', 'idx', 'image', 'label'] torch.Size([1]) [3017]\n");
}

TEST_F(LayoutsEndToEnd, TokenizerDictWithAnAttentionMask) {
  expectShrunkTo("tokenizer_cls", "13");
  // The mask gave the lengths: the sample is cut to the token past the
  // vocabulary, its mask cut with it.
  EXPECT_EQ(archived("tokenizer_cls",
                     "b['input_ids'].shape == b['attention_mask'].shape, (b['input_ids'] == 1000).sum().item()"),
            "True 1\n");
}

TEST_F(LayoutsEndToEnd, MelSpectrogramWithTimeOnItsLastAxis) {
  expectShrunkTo("audio_bft", "9");
  EXPECT_EQ(
      archived("audio_bft",
               "b['mel'].shape[0], b['mel'].shape[2] == int(b['mel_lengths'].max()), b['mel'].isinf().sum().item()"),
      "1 True 1\n");
}

TEST_F(LayoutsEndToEnd, NestedDicts) {
  expectShrunkTo("nested_dicts", "20");
  EXPECT_EQ(archived("nested_dicts", "b['meta'], b['inputs']['ids'].shape[0], b['targets']['cls'].shape"),
            "{'epoch': 3, 'split': 'train'} 1 torch.Size([1])\n");
}

TEST_F(LayoutsEndToEnd, DetectionWithOneTargetDictPerImage) {
  expectShrunkTo("detection_targets", "11");
  EXPECT_EQ(
      archived("detection_targets", "type(b).__name__, b[0].shape[0], type(b[1]).__name__, len(b[1]), sorted(b[1][0])"),
      "tuple 1 list 1 ['boxes', 'labels']\n");
  // The report's values line names the tensors the values pass went over:
  // the targets' boxes and labels keep their values (it said "every other
  // value is its tensor's trivial value" above boxes it never touched).
  const fs::path dir = work_.path() / "detection_targets" / "maintainer";
  const std::string report = testing::readFile(dir / "REPORT.md");
  EXPECT_TRUE(has(report, " non-trivial value(s) left among [0]; every other value there is")) << report;
}

// A failure of the padded width alone (30 positions, past a table of 24)
// in a batch padded to its longest sentence: every subset that keeps the
// long sentence fails, and a candidate is as wide as its longest kept
// sentence, as the loop's collate would have made it. Before, every
// candidate stayed 30 wide and the search kept an arbitrary sentence.
TEST_F(LayoutsEndToEnd, AFailureOfThePaddedWidthKeepsTheLongSample) {
  expectShrunkTo("tagger_padded_width", "1017");
  EXPECT_EQ(archived("tagger_padded_width",
                     "b['inputs'][0].shape[1] == int(b['inputs'][1].max()) > 24, len(b['words']), b['doc_id']"),
            "True 1 ['doc004#s1']\n");
}

// A forecaster whose one series was never observed in its window: the
// step's own assert on a NaN loss is the non-finite family, and REPORT.md
// says what sets the series apart: its mask marks none of its steps.
TEST_F(LayoutsEndToEnd, AForecastersUnobservedSeriesIsSaidByItsMask) {
  expectShrunkTo("forecaster", "9");
  EXPECT_EQ(archived("forecaster", "b['series_id'], b['static'][0].shape"),
            "['store02/item0009'] torch.Size([1, 2])\n");
  const std::string report = testing::readFile(work_.path() / "forecaster" / "maintainer" / "REPORT.md");
  EXPECT_TRUE(has(report, "- Family: non-finite")) << report;
  EXPECT_TRUE(has(report, "past.mask (true per sample)")) << report;
}

// A batch whose per-sample lists hold file names, the one thing that tells
// the user which image to fix: REPORT.md shows the kept sample's entries
// (a string; a dict with a tuple), not only its position. Before, it said
// "Kept sample ids: [7]" and nothing else of it.
TEST_F(LayoutsEndToEnd, TheKeptSamplesFileNamesAreInTheReport) {
  expectShrunkTo("file_names", "7");
  // Image 7's record, with the field only it has: one record per sample
  // still (before, the whole list of every sample's record was kept).
  EXPECT_EQ(archived("file_names", "b['path'], len(b['meta']), b['meta'][0]['file'], b['label'].tolist()"),
            "['img_007.png'] 1 img_007.png [2]\n");
  const std::string report = testing::readFile(work_.path() / "file_names" / "maintainer" / "REPORT.md");
  EXPECT_TRUE(has(report, "- Kept sample 7 in `path`: `'img_007.png'`\n")) << report;
  EXPECT_TRUE(
      has(report,
          "- Kept sample 7 in `meta`: `{'file': 'img_007.png', 'size': (8, 15), 'url': "
          "'https://cdn.example.com/img_007.png?Expires=1767225600&Signature=<secret:url-query-credential>'}`\n"))
      << report;
  // The batch carries the signed URL as the step had it: said, to remove before sending.
  EXPECT_TRUE(has(
      report, "- **Looks like a secret, copied verbatim**: batch.pt (a string in its pickle): url-query-credential"))
      << report;
}

// A case that keeps a per-sample tensor whole (the camera ids, once taken for
// lengths): every candidate fails another way. The run stops within a few
// trials, naming the tensor and what to write.
TEST_F(LayoutsEndToEnd, ACaseThatKeepsAPerSampleTensorWholeStopsAtOnceAndSaysWhy) {
  const fs::path dir = work_.path() / "image_meta";
  std::string out;
  EXPECT_EQ(shrinkWithSamples(dir, "  tensors: {image: 0, label: 0}\n  ids: idx\n", &out), 3) << out;
  EXPECT_TRUE(has(out, "both halves of the batch fail another way")) << out;
  EXPECT_TRUE(has(out, "The case keeps these whole in every candidate: camera [24] int64")) << out;
  EXPECT_TRUE(has(out,
                  "warning: camera [24] int64: the batch's 24 along the first dimension, but the case keeps it "
                  "whole"))
      << out;
  EXPECT_TRUE(has(out, "name it under samples.tensors (e.g. camera: 0)")) << out;
  EXPECT_FALSE(fs::exists(dir / "repro.tar.gz"));
}

// CTC's joined targets in a collate's tuple, kept whole by a case written
// as init wrote it before it refused them: each half of the batch fails
// another way, each with its own numbers ("size 47 ... got size 78"), the
// 78 the joined targets' length. The run stops naming them; before, it
// searched on, cut the frames to one and ended "8 -> 8 samples", exit 0.
TEST_F(LayoutsEndToEnd, JoinedTargetsKeptWholeStopTheRunNamingThem) {
  const fs::path dir = work_.path() / "ctc_tuple_joined";
  std::string out;
  EXPECT_EQ(
      shrinkWithSamples(dir, "  tensors: {\"[0][0]\": 0, \"[0][1]\": 0, \"[1][1]\": 0}\n  lists: [\"[2]\"]\n", &out), 3)
      << out;
  EXPECT_TRUE(has(out, "both halves of the batch fail another way")) << out;
  EXPECT_TRUE(has(out, "The case keeps these whole in every candidate: [1][0] [")) << out;
  EXPECT_FALSE(fs::exists(dir / "repro.tar.gz"));
}

// A graph batch's case written by hand with only the per-graph labels under
// samples.tensors: the nodes and edges stay whole in every candidate, the
// corrupted edge with them, and any one graph "fails the same way". The
// run stops before the search, naming what it keeps whole and what to save.
TEST_F(LayoutsEndToEnd, ACaseWhoseCulpritIsInATensorKeptWholeStopsBeforeTheSearch) {
  const fs::path dir = work_.path() / "graph_batch";
  testing::writeFile(dir / "case.yaml", "batch: batch.pt\nsamples:\n  tensors: {y: 0}\ntrial:\n  command: [" +
                                            testing::python() + ", \"{case_dir}/step.py\", \"{batch}\"]\n");
  std::string out;
  EXPECT_EQ(
      runCommand("cd " + dir.string() + " && " + MINREPRO_BINARY + " shrink --config case.yaml --no-op-repro", &out), 3)
      << out;
  EXPECT_TRUE(has(out,
                  "error: nothing to reduce in the samples: the step fails the same way with none of the 24 "
                  "samples"))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(keeps whole \(x \[\d+, 8\] float32, edge_index \[2, 100\] int64, )"
                                                R"(batch \[\d+\] int64\))")))
      << out;
  EXPECT_TRUE(has(out, "save one dict of tensors per sample in a list")) << out;
  EXPECT_FALSE(fs::exists(dir / "repro.tar.gz"));
}

}  // namespace
}  // namespace minrepro
