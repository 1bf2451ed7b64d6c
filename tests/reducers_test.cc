// Unit tier for the passes beyond samples: the setting search, the invariants,
// each reducer against a scripted CaseView, and the batch store's
// materialization of a candidate on real tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/setting_search.h"
#include "engine/case_branches.h"
#include "engine/invariants.h"
#include "harness/batch_io.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"
#include "reducers/selection_text.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

// Runs a setting search against a predicate; returns {result, trials}.
std::pair<std::int64_t, int> searchSetting(std::int64_t min, std::int64_t current,
                                           const std::function<bool(std::int64_t)>& fails) {
  SettingSearch search(min, current);
  int trials = 0;
  while (!search.done()) {
    ++trials;
    search.answer(fails(search.query()));
  }
  return {search.result(), trials};
}

// The journal's record of an accepted candidate: every field comes back,
// runs of samples are written as ranges (a chunk of a million samples stays
// one short line), and anything else is refused rather than half-read.
TEST(SelectionText, EveryFieldRoundTripsAndRunsAreRanges) {
  Selection s;
  for (std::int64_t i = 500000; i < 1000000; ++i) s.samples.push_back(i);
  s.samples.insert(s.samples.begin(), {3, 7, 8});
  s.seq_begin = 2;
  s.seq_end = 513;
  s.lengths = {{7, 300}, {500001, 12}};
  s.branches_off = {"noise", "pad to 520;x"};
  s.values_kept = {{"input", {0, 1, 2, 9}}, {"odd name=%", {}}};
  const std::string text = selectionText(s);
  EXPECT_LT(text.size(), 200u) << text;
  EXPECT_EQ(text.find(' '), std::string::npos) << "one word of a journal line";
  const auto back = parseSelectionText(text);
  ASSERT_TRUE(back) << text;
  EXPECT_EQ(selectionKey(*back), selectionKey(s));
  EXPECT_EQ(back->branches_off, s.branches_off);
  EXPECT_EQ(back->values_kept, s.values_kept);
  for (const std::string bad : {"", "samples=5-3", "samples=1,1", "window=2", "samples=1;colour=red", "samples=x",
                                "samples=1;off=%G1", "samples=1;values.%4=1"})
    EXPECT_FALSE(parseSelectionText(bad)) << bad;
}

TEST(SettingSearch, FindsEveryThresholdInLogarithmicTrials) {
  for (std::int64_t threshold = 1; threshold <= 600; ++threshold) {
    const auto [result, trials] = searchSetting(1, 600, [&](std::int64_t v) { return v >= threshold; });
    EXPECT_EQ(result, threshold);
    EXPECT_LE(trials, 1 + static_cast<int>(std::ceil(std::log2(599.0)))) << threshold;
  }
}

TEST(SettingSearch, KeepsAnExactLengthTrigger) {
  const auto [result, trials] = searchSetting(1, 300, [](std::int64_t v) { return v == 300; });
  EXPECT_EQ(result, 300);
  EXPECT_LE(trials, 10);
  // A length that does not matter costs one trial.
  EXPECT_EQ(searchSetting(1, 300, [](std::int64_t) { return true; }), (std::pair<std::int64_t, int>{1, 1}));
}

TensorInfo info(const std::string& name, const std::string& dtype, const std::string& layout,
                std::vector<std::int64_t> shape, bool samples = true) {
  TensorInfo t{name, dtype, std::move(shape), {}, layout, false, 0, 0, {}};
  t.has_sample_axis = samples;
  return t;
}

TEST(Invariants, DtypeLayoutAndSampleCountAreCheckedAndCanBeRelaxed) {
  const std::vector<TensorInfo> original{info("x", "float16", "transposed", {8, 4}),
                                         info("y", "int64", "contiguous", {8})};
  EXPECT_FALSE(
      brokenInvariant({}, original, {info("x", "float16", "strided", {2, 4}), info("y", "int64", "contiguous", {2})}));
  EXPECT_EQ(*brokenInvariant({}, original,
                             {info("x", "float32", "transposed", {2, 4}), info("y", "int64", "contiguous", {2})}),
            "x: dtype float16 became float32");
  EXPECT_EQ(*brokenInvariant({}, original,
                             {info("x", "float16", "contiguous", {1, 4}), info("y", "int64", "contiguous", {1})}),
            "x: layout transposed became contiguous");
  EXPECT_EQ(
      *brokenInvariant({}, original, {info("x", "float16", "strided", {2, 4}), info("y", "int64", "contiguous", {3})}),
      "sample counts disagree: x has 2, y has 3");
  Invariants relaxed;
  relaxed.layout = false;
  EXPECT_FALSE(brokenInvariant(relaxed, original,
                               {info("x", "float16", "contiguous", {1, 4}), info("y", "int64", "contiguous", {1})}));
  // A strided 1-D target (labels[::2]) cut to one sample: one element has no
  // layout to keep, while two elements must stay strided.
  const std::vector<TensorInfo> strided_target{info("y", "int64", "strided", {8})};
  EXPECT_FALSE(brokenInvariant({}, strided_target, {info("y", "int64", "contiguous", {1})}));
  EXPECT_EQ(*brokenInvariant({}, strided_target, {info("y", "int64", "contiguous", {2})}),
            "y: layout strided became contiguous");
}

// A CaseView with scripted answers (no batch).
struct ScriptedView : CaseView {
  std::int64_t sampleCount() const override { return 4; }
  std::int64_t sequenceLength() const override { return 10; }
  std::vector<std::int64_t> sampleLengths() const override { return {10, 7, 3, 10}; }
  std::int64_t minLength() const override { return 1; }
  std::vector<std::string> optionalBranches() const override { return {"crop", "noise", "pad"}; }
  std::vector<ValueUnit> nonTrivialValues(const Selection&) const override { return {{"x", 5}, {"x", 9}, {"y", 2}}; }
};

TEST(Reducers, BranchesSwitchOffWhatIsNotKept) {
  ScriptedView view;
  const auto created = findReducer("branches")->create(view);
  const SetReducer* reducer = created->asSet();
  ASSERT_NE(reducer, nullptr);
  EXPECT_EQ(created->asSettings(), nullptr);
  Selection s = fullSelection(view);
  s.branches_off = {"noise"};
  EXPECT_EQ(reducer->unitCount(s), 2u);  // crop, pad
  EXPECT_EQ(reducer->apply(s, {1}).branches_off, (std::set<std::string>{"crop", "noise"}));
  EXPECT_TRUE(reducer->allowsEmpty());
  EXPECT_EQ(measureSize(reducer->apply(s, {}), view).branches, 0);
}

TEST(Reducers, ValuesKeepOnlyTheChosenElementsPerTensor) {
  ScriptedView view;
  const auto created = findReducer("values")->create(view);
  const SetReducer* reducer = created->asSet();
  ASSERT_NE(reducer, nullptr);
  const Selection next = reducer->apply(fullSelection(view), {1});
  EXPECT_EQ(next.values_kept.at("x"), (std::vector<std::int64_t>{9}));
  EXPECT_TRUE(next.values_kept.at("y").empty());
}

TEST(Reducers, LengthSettingsCutTheWindowThenEachSample) {
  ScriptedView view;
  const auto created = findReducer("lengths")->create(view);
  const SettingReducer* reducer = created->asSettings();
  ASSERT_NE(reducer, nullptr);
  EXPECT_EQ(created->asSet(), nullptr);
  Selection s = fullSelection(view);
  s.samples = {1, 2};
  auto settings = reducer->settings(s);
  ASSERT_EQ(settings.size(), 4u);  // end, start, sample 1 (7), sample 2 (3)
  EXPECT_EQ(settings[2].name, "sample 1");
  EXPECT_EQ(settings[2].value, 7);
  s = reducer->withSetting(s, settings[0], 6);  // window [0, 6)
  s = reducer->withSetting(s, settings[1], 4);  // window [2, 6)
  EXPECT_EQ(s.seq_begin, 2);
  EXPECT_EQ(s.seq_end, 6);
  settings = reducer->settings(s);
  ASSERT_EQ(settings.size(), 3u);   // sample 2 shows only position 2 of its 3: nothing left to cut
  EXPECT_EQ(settings[2].value, 4);  // sample 1: positions 2..6 of its 7
  EXPECT_EQ(reducer->withSetting(s, settings[2], 2).lengths.at(1), 4);  // 2 visible = original length 4
}

TEST(Branches, CommandSwitchesGetTheirOnOrOffArgumentsAndEnvironment) {
  CommandTrial c{{"/usr/bin/python3", "step.py", "{batch}"}, {{"A", "1"}}, {}};
  c.switches = {CommandSwitch{"mixup", {"--mixup"}, {}, {{"MIXUP", "1"}}, {{"MIXUP", "0"}}}};
  const CommandTrial on = withBranches(c, {});
  EXPECT_EQ(on.argv.back(), "--mixup");
  EXPECT_EQ(on.env.at("MIXUP"), "1");
  const CommandTrial off = withBranches(c, {"mixup"});
  EXPECT_EQ(off.argv.back(), "{batch}");
  EXPECT_EQ(off.env.at("MIXUP"), "0");
  EXPECT_EQ(off.env.at("A"), "1");
}

// A real batch: tokens with a per-sample length tensor, a mask and floats.
struct MaterializeFixture : ::testing::Test {
  testing::TempDir dir;
  CaseConfig config;
  void SetUp() override {
    config.case_file = dir.path() / "case.yaml";
    config.batch = dir.path() / "batch.pt";
    NamedTensors b;
    const at::Tensor lengths = at::tensor(std::vector<int64_t>{6, 4, 2}, at::kLong);
    const at::Tensor mask = at::arange(6).unsqueeze(0) < lengths.unsqueeze(1);
    b.names = {"tokens", "mask", "lengths", "x"};
    b.tensors = {(at::arange(1, 19, at::kLong).view({3, 6}) * mask), mask, lengths,
                 at::arange(1, 13, at::kFloat).view({4, 3}).t()};  // [3, 4], transposed
    writeBatchFile(b, config.batch);
    config.sample_axes = {{"tokens", 0}, {"mask", 0}, {"x", 0}};
    config.sequence.tensors = {{"tokens", 1, 0}, {"mask", 1, 0}};
    config.sequence.lengths = "lengths";
  }
  NamedTensors write(const Selection& s) {
    const auto store = BatchStore::open(config);
    store->writeCandidate(s, dir.path() / "c.pt");
    return readBatchFile(dir.path() / "c.pt");
  }
};

TEST_F(MaterializeFixture, WindowAndSampleLengthsKeepMaskPaddingAndLengthsConsistent) {
  Selection s;
  s.samples = {0, 1};
  s.seq_begin = 1;
  s.seq_end = 5;
  s.lengths[0] = 3;  // sample 0: positions 1, 2 stay
  const NamedTensors c = write(s);
  // The batch is padded to its longest sample (6 of 6): the window ends
  // where the longest kept one does (sample 1, length 4), as a collate
  // pads, not at 5.
  EXPECT_TRUE(c.tensors[0].equal(at::tensor(std::vector<int64_t>{2, 3, 0, 8, 9, 10}, at::kLong).view({2, 3})));
  EXPECT_EQ(c.tensors[1].sum().item<int64_t>(), 5);  // 2 + 3 real positions
  EXPECT_TRUE(c.tensors[2].equal(at::tensor(std::vector<int64_t>{2, 3}, at::kLong)));
  EXPECT_EQ(c.tensors[3].strides().vec(), (std::vector<int64_t>{1, 2}));  // still transposed
}

// Padded to a fixed width (no sample as long as the batch is wide: a
// tokenizer's max_length), a batch keeps its width in every candidate.
TEST_F(MaterializeFixture, ABatchPaddedToAFixedWidthKeepsItsWidth) {
  NamedTensors b;
  const at::Tensor lengths = at::tensor(std::vector<int64_t>{5, 4, 2}, at::kLong);
  b.names = {"tokens", "mask", "lengths", "x"};
  b.tensors = {at::arange(1, 19, at::kLong).view({3, 6}) * (at::arange(6).unsqueeze(0) < lengths.unsqueeze(1)),
               at::arange(6).unsqueeze(0) < lengths.unsqueeze(1), lengths,
               at::arange(1, 13, at::kFloat).view({4, 3}).t()};
  writeBatchFile(b, config.batch);
  Selection s;
  s.samples = {2};
  const NamedTensors c = write(s);
  EXPECT_EQ(c.tensors[0].sizes().vec(), (std::vector<int64_t>{1, 6}));
  Selection one_of_full;  // the same batch padded to its longest: cut to it
  one_of_full.samples = {2};
  b.tensors[2] = at::tensor(std::vector<int64_t>{6, 4, 2}, at::kLong);
  writeBatchFile(b, config.batch);
  EXPECT_EQ(write(one_of_full).tensors[0].sizes().vec(), (std::vector<int64_t>{1, 2}));
}

TEST_F(MaterializeFixture, DroppedValuesBecomeTrivialAndPaddingIsNeverAUnit) {
  const auto store = BatchStore::open(config);
  Selection s = fullSelection(*store);
  s.samples = {2};
  // Sample 2 has 2 real tokens, its mask's 2 trues are already trivial (masks
  // trivial at all-ones), and x's row holds 3, 6, 9, 12.
  const std::vector<ValueUnit> units = store->nonTrivialValues(s);
  ASSERT_EQ(units.size(), 6u);
  EXPECT_EQ(units[0].tensor, "tokens");
  EXPECT_EQ(units[0].index, 12);  // row 2, column 0 of the [3, 6] original
  s.values_kept["tokens"] = {13};
  s.values_kept["x"] = {};
  const NamedTensors c = write(s);
  // As wide as sample 2 is long: the batch was padded to its longest.
  EXPECT_TRUE(c.tensors[0].equal(at::tensor(std::vector<int64_t>{0, 14}, at::kLong).view({1, 2})));
  EXPECT_EQ(c.tensors[3].count_nonzero().item<int64_t>(), 0);
  EXPECT_EQ(c.tensors[3].scalar_type(), at::kFloat);
}

TEST_F(MaterializeFixture, LengthsOutsideTheSequenceAreBadInput) {
  NamedTensors b = readBatchFile(config.batch);
  b.tensors[2] = at::tensor(std::vector<int64_t>{7, 4, 2}, at::kLong);
  writeBatchFile(b, config.batch);
  try {
    BatchStore::open(config);
    FAIL() << "opened";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("holds lengths outside [0, 6]"), std::string::npos) << e.what();
  }
}

TEST(Reducers, EveryFieldOfASelectionChangesItsKey) {
  ScriptedView view;
  const Selection base = fullSelection(view);
  std::vector<Selection> changed(5, base);
  changed[0].samples = {0, 1};
  changed[1].seq_begin = 2;
  changed[2].lengths[1] = 5;
  changed[3].branches_off = {"noise"};
  changed[4].values_kept["x"] = {5};
  std::set<std::string> keys{selectionKey(base)};
  for (const Selection& s : changed) keys.insert(selectionKey(s));
  EXPECT_EQ(keys.size(), 6u);  // each pass writes its own field, and none is forgotten
  EXPECT_EQ(selectionKey(changed[3]), selectionKey(Selection(changed[3])));
}

TEST(Reducers, EachPassDescribesItsOwnPartOfTheMinimalCase) {
  ScriptedView view;
  Selection minimal = fullSelection(view);
  minimal.samples = {1};
  minimal.seq_begin = 2;
  minimal.seq_end = 6;
  minimal.lengths[1] = 5;
  minimal.branches_off = {"crop", "pad"};
  const std::vector<std::int64_t> ids{100, 101, 102, 103};
  EXPECT_TRUE(findReducer("samples")->create(view)->describe(minimal, ids).empty());
  EXPECT_EQ(findReducer("branches")->create(view)->describe(minimal, ids),
            (std::vector<std::string>{"Branches needed: noise; switched off without losing the failure: crop, pad"}));
  EXPECT_EQ(findReducer("lengths")->create(view)->describe(minimal, ids),
            (std::vector<std::string>{"Sequence window: positions 2 to 5 of 0 to 9 (length 4)",
                                      "Sample id 101: length 7 shortened to 3"}));
  EXPECT_TRUE(findReducer("values")->create(view)->describe(minimal, ids).empty());  // no value simplified
}

}  // namespace
}  // namespace minrepro
