// Reading, checking and subsetting real batch files (LibTorch and Python).
#include "harness/batch_store.h"
#include "harness/pickle_budget.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/csrc/api/include/torch/version.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "harness/batch_io.h"
#include "harness/zip_directory.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

struct BatchFixture : ::testing::Test {
  testing::TempDir dir;
  CaseConfig config;
  void SetUp() override {
    config.case_file = dir.path() / "case.yaml";
    config.batch = dir.path() / "batch.pt";
  }
  void write(const NamedTensors& batch) { writeBatchFile(batch, config.batch); }
  // torch.save(BATCH, the fixture's batch file) in Python, after `setup`
  // (statements, `torch` imported); the output when Python failed, else "".
  std::string saveFromPython(const std::string& batch, const std::string& setup = "") {
    std::string output;
    const int status = testing::runCommand(testing::python() + " -c \"import torch; " + setup + "torch.save(" + batch +
                                               ", '" + config.batch.string() + "')\"",
                                           &output);
    return status == 0 ? "" : output + " (exit " + std::to_string(status) + ")";
  }
  // The fixture's batch file with its data.pkl replaced by `pickle` (a
  // Python bytes expression): a pickle Python's pickler would not write.
  std::string replacePickle(const std::string& pickle) {
    std::string output;
    const int status = testing::runCommand(
        testing::python() + " -c \"import zipfile; src = zipfile.ZipFile('" + config.batch.string() +
            "'); records = {n: src.read(n) for n in src.namelist()}; src.close(); out = zipfile.ZipFile('" +
            config.batch.string() + "', 'w'); [out.writestr(n, " + pickle +
            " if n.endswith('data.pkl') else b) for n, b in records.items()]; out.close()\"",
        &output);
    return status == 0 ? "" : output + " (exit " + std::to_string(status) + ")";
  }
  // The fixture's batch saved by torch.save from `batch` (a Python
  // expression), then written again record by record with zipfile's
  // `method` ('ZIP_STORED', 'ZIP_DEFLATED'): `body` runs with `items` (the
  // records, in order) and the writer `w` open, and may change either.
  std::string rezip(const std::string& batch, const std::string& method, const std::string& body) {
    std::string output;
    const int status = testing::runCommand(
        testing::python() + " -W ignore -c \"import torch, zipfile; P = '" + config.batch.string() + "'; torch.save(" +
            batch +
            ", P)\nz = zipfile.ZipFile(P); items = [(i.filename, z.read(i.filename)) for i in z.infolist()]; "
            "z.close()\nw = zipfile.ZipFile(P, 'w', zipfile." +
            method + ")\n" + body + "\nw.close()\"",
        &output);
    return status == 0 ? "" : output + " (exit " + std::to_string(status) + ")";
  }
  std::string openError() {
    try {
      BatchStore::open(config);
    } catch (const BadInputError& e) {
      return e.what();
    }
    return "";
  }
};

NamedTensors layoutBatch() {
  at::manual_seed(0);
  NamedTensors b;
  b.names = {"transposed", "image", "target", "ids", "weights"};
  b.tensors = {at::randn({6, 5}).t(),                                               // [5, 6], strides (1, 5)
               at::randn({5, 3, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast),  // channels-last
               at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4}, at::kLong), at::arange(100, 105, at::kLong),
               at::randn({3}, at::kDouble)};  // no sample axis
  return b;
}

TEST_F(BatchFixture, SubsetKeepsDtypeLayoutAndValuesInEveryTensor) {
  const NamedTensors original = layoutBatch();
  write(original);
  config.sample_axes = {{"transposed", 0}, {"image", 0}, {"target", -1}};
  config.sample_ids = "ids";
  auto store = BatchStore::open(config);
  EXPECT_EQ(store->sampleCount(), 5);
  EXPECT_EQ(store->sampleIds(), (std::vector<int64_t>{100, 101, 102, 103, 104}));
  const fs::path out = dir.path() / "subset.pt";
  store->writeSubset({1, 3}, out);
  const NamedTensors subset = readBatchFile(out);
  ASSERT_EQ(subset.names, original.names);

  const at::Tensor& t = subset.tensors[0];
  EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(t.strides().vec(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(layoutName(t), "transposed");
  EXPECT_TRUE(at::equal(t, original.tensors[0].index_select(0, at::tensor({1, 3}, at::kLong))));

  const at::Tensor& img = subset.tensors[1];
  EXPECT_EQ(layoutName(img), "channels_last");
  EXPECT_TRUE(at::equal(img, original.tensors[1].index_select(0, at::tensor({1, 3}, at::kLong))));

  EXPECT_EQ(subset.tensors[2].scalar_type(), at::kLong);
  EXPECT_EQ(std::vector<int64_t>(subset.tensors[2].data_ptr<int64_t>(), subset.tensors[2].data_ptr<int64_t>() + 2),
            (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(subset.tensors[3][1].item<int64_t>(), 103);
  EXPECT_EQ(subset.tensors[4].scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(subset.tensors[4], original.tensors[4]));
}

TEST_F(BatchFixture, ASliceDoesNotDragItsStorageAlong) {
  NamedTensors b;
  b.names = {"input", "target"};
  b.tensors = {at::randn({4096, 64}), at::zeros({4096}, at::kLong)};
  write(b);
  config.sample_axes = {{"input", 0}, {"target", 0}};
  const fs::path out = dir.path() / "one.pt";
  BatchStore::open(config)->writeSubset({7}, out);
  EXPECT_LT(fs::file_size(out), 8192u) << "the subset should hold one row, not the whole storage";
}

TEST_F(BatchFixture, PythonReadsTheSubsetWithItsLayout) {
  write(layoutBatch());
  config.sample_axes = {{"transposed", 0}, {"image", 0}, {"target", 0}};
  const fs::path out = dir.path() / "subset.pt";
  BatchStore::open(config)->writeSubset({0, 2, 4}, out);
  std::string output;
  const int status = testing::runCommand(
      testing::python() + " -c \"import torch; b = torch.load('" + out.string() +
          "', weights_only=True); "
          "print(b['transposed'].stride(), b['image'].is_contiguous(memory_format=torch.channels_last), "
          "b['target'].tolist(), b['weights'].dtype)\"",
      &output);
  ASSERT_EQ(status, 0) << output;
  EXPECT_EQ(output, "(1, 3) True [0, 2, 4] torch.float64\n");
}

// A quantized tensor is refused by name with what to save instead, not an
// internal error from the first operator that has no quantized kernel.
TEST_F(BatchFixture, AQuantizedTensorIsBadInputNamingIt) {
  const fs::path file = dir.path() / "quant.pt";
  std::string output;
  ASSERT_EQ(testing::runCommand(testing::python() +
                                    " -c \"import torch; torch.save((torch.quantize_per_tensor("
                                    "torch.randn(8, 4), 0.1, 0, torch.qint8), torch.arange(8)), '" +
                                    file.string() + "')\"",
                                &output),
            0)
      << output;
  try {
    readBatchFile(file);
    ADD_FAILURE() << "read";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a quantized tensor (QInt8)"), std::string::npos) << e.what();
  }
}

// Tensors LibTorch's reader does not rebuild are named for what they are,
// with how to save them instead. Before, each was "an object of a class of
// your own, such as a named tuple". (The python() of a torch without the
// newer dtypes skips those.)
TEST_F(BatchFixture, TensorsTheReaderCannotRebuildAreNamedForWhatTheyAre) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"torch.arange(8).to(torch.uint16) if hasattr(torch, 'uint16') else None", "uint16, uint32, uint64 or"},
      {"torch.eye(8).to_sparse()", "holds a sparse tensor"},
      {"torch.empty(8, 2, device='meta')", "on the meta device"},
  };
  for (const auto& [make, says] : cases) {
    SCOPED_TRACE(make);
    const fs::path file = dir.path() / "odd.pt";
    std::string output;
    const int status = testing::runCommand(testing::python() + " -c \"import sys, torch; t = " + make +
                                               "; t is None and sys.exit(3); torch.save({'x': torch.randn(8, 3), "
                                               "'odd': t}, '" +
                                               file.string() + "')\"",
                                           &output);
    if (status == 3) continue;  // this torch has no such dtype
    ASSERT_EQ(status, 0) << output;
    try {
      readBatchFile(file);
      ADD_FAILURE() << "read";
    } catch (const BadInputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("class of your own"), std::string::npos) << e.what();
    }
    fs::remove(file);
  }
}

// A cut keeps the stride pattern of what it was cut from: a stride-3 view
// stays stride 3, a column slice keeps its row stride, a broadcast dimension
// stays broadcast (and becomes the outermost when its values differ), and
// the storage offset stays.
TEST_F(BatchFixture, CutKeepsTheStridePatternOffsetAndBroadcastOfItsTensor) {
  NamedTensors b;
  b.names = {"every_third", "columns", "broadcast", "offset"};
  const at::Tensor wide = at::randn({5, 128});
  b.tensors = {at::arange(15, at::kFloat).as_strided({5}, {3}), wide.narrow(1, 0, 64), at::randn({1, 4}).expand({5, 4}),
               at::arange(8, at::kLong).narrow(0, 3, 5)};
  write(b);
  for (const auto& name : b.names) config.sample_axes.push_back({name, 0});
  const fs::path out = dir.path() / "subset.pt";
  BatchStore::open(config)->writeSubset({1, 4}, out);
  const NamedTensors subset = readBatchFile(out);
  const std::vector<std::vector<int64_t>> strides{{3}, {128, 1}, {0, 1}, {1}};
  const at::Tensor index = at::tensor({1, 4}, at::kLong);
  for (std::size_t i = 0; i < b.names.size(); ++i) {
    EXPECT_EQ(subset.tensors[i].strides().vec(), strides[i]) << b.names[i];
    EXPECT_TRUE(at::equal(subset.tensors[i], b.tensors[i].index_select(0, index))) << b.names[i];
  }
  EXPECT_EQ(layoutName(subset.tensors[0]), "strided");
  // Broadcast along the samples, but a cut whose values differ there (the
  // values pass sets some to trivial ones): laid out dense, samples outermost.
  const at::Tensor varied = at::arange(8, at::kFloat).view({2, 4});
  EXPECT_EQ(copyWithStridePattern(varied, at::randn({1, 4}).expand({2, 4})).strides().vec(),
            (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(subset.tensors[3].storage_offset(), 3);
  // The elements before the view are zeros: what the original held there
  // belonged to what the reduction removed.
  const at::Tensor leading = at::empty({0}, at::kLong).set_(subset.tensors[3].storage(), 0, {3}, {1});
  EXPECT_TRUE(at::equal(leading, at::zeros({3}, at::kLong)));
}

// Tensors a candidate does not change are written as they were read: views
// into one storage stay views into one storage (as torch.load sees them),
// with their offsets and strides, however the tensors with a sample axis
// were cut.
// A transposed tensor (a column slice of a [3, B] matrix, .t()) cut to one
// sample stays non-contiguous: [1, 3] with strides (1, 2). Before, it became
// a contiguous row, the layout invariant rejected every one-sample
// candidate, and the run kept two samples.
TEST_F(BatchFixture, ATransposedTensorCutToOneSampleStaysNonContiguous) {
  NamedTensors b;
  b.names = {"x", "y"};
  b.tensors = {at::arange(48, at::kFloat).view({3, 16}).t(), at::arange(16, at::kLong)};
  write(b);
  for (const auto& name : b.names) config.sample_axes.push_back({name, 0});
  const fs::path out = dir.path() / "one.pt";
  BatchStore::open(config)->writeSubset({5}, out);
  const NamedTensors subset = readBatchFile(out);
  EXPECT_FALSE(subset.tensors[0].is_contiguous());
  EXPECT_EQ(subset.tensors[0].strides().vec(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(at::equal(subset.tensors[0], b.tensors[0].narrow(0, 5, 1)));
}

// A per-sample list whose entries are views of one storage (CTC labels
// split from one tensor): a subset keeps its entries' offsets and values,
// and what the dropped samples' entries held becomes zeros. Before, the
// kept entry carried the whole storage: every utterance's labels.
TEST_F(BatchFixture, AListEntrysStorageCarriesNoDroppedSamplesValues) {
  std::string output;
  ASSERT_EQ(
      saveFromPython("{'x': torch.randn(4, 2), 'targets': list(t.split([2, 3, 4, 3]))}", "t = torch.arange(1, 13); "),
      "");
  config.sample_axes = {{"x", 0}};
  config.sample_lists = {"targets"};
  const fs::path out = dir.path() / "one.pt";
  BatchStore::open(config)->writeSubset({2}, out);
  ASSERT_EQ(testing::runCommand(testing::python() + " -c \"import torch; b = torch.load('" + out.string() +
                                    "'); t = b['targets'][0]; print(t.tolist(), t.storage_offset(), "
                                    "torch.tensor(t.untyped_storage()).view(torch.int64).tolist())\"",
                                &output),
            0)
      << output;
  EXPECT_NE(output.find("[6, 7, 8, 9] 5 [0, 0, 0, 0, 0, 6, 7, 8, 9, 0, 0, 0]"), std::string::npos) << output;
}

TEST_F(BatchFixture, UnchangedViewsIntoOneStorageStaySharedInEveryCandidate) {
  const at::Tensor base = at::arange(24, at::kFloat);
  NamedTensors b;
  b.names = {"x", "w", "b", "c"};
  b.tensors = {at::randn({6, 2}), base.as_strided({8}, {3}, 0), base.as_strided({8}, {3}, 1),
               base.as_strided({8}, {3}, 2)};
  write(b);
  config.sample_axes = {{"x", 0}};
  auto store = BatchStore::open(config);
  const auto described = store->describe();
  EXPECT_EQ(described[2].storage_offset, 1);
  EXPECT_EQ(described[1].shares_storage_with, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(described[1].layout, "strided");
  Selection keep = fullSelection(*store);
  keep.samples = {4};
  const fs::path out = dir.path() / "candidate.pt";
  store->writeCandidate(keep, out);
  std::string output;
  ASSERT_EQ(testing::runCommand(
                testing::python() + " -c \"import torch; b = torch.load('" + out.string() +
                    "', weights_only=True); "
                    "s = lambda t: (t.untyped_storage() if hasattr(t, 'untyped_storage') else t.storage()).data_ptr(); "
                    "print([(b[k].stride(), b[k].storage_offset(), s(b[k]) == s(b['w'])) "
                    "for k in 'wbc'], b['b'].tolist()[:2], tuple(b['x'].shape))\"",
                &output),
            0)
      << output;
  EXPECT_EQ(output, "[((3,), 0, True), ((3,), 1, True), ((3,), 2, True)] [1.0, 4.0] (1, 2)\n");
}

TEST_F(BatchFixture, DisagreeingSampleDimensionsAreBadInput) {
  NamedTensors b;
  b.names = {"input", "target"};
  b.tensors = {at::randn({512, 8}), at::zeros({511}, at::kLong)};
  write(b);
  config.sample_axes = {{"input", 0}, {"target", 0}};
  const std::string error = openError();
  EXPECT_NE(error.find("sample dimensions disagree"), std::string::npos) << error;
  EXPECT_NE(error.find("'input' has 512"), std::string::npos) << error;
  EXPECT_NE(error.find("'target' has 511"), std::string::npos) << error;
}

// Float ids have the right shape: the message says which dtype it found.
TEST_F(BatchFixture, FloatIdsNameTheirDtype) {
  NamedTensors b = layoutBatch();
  b.tensors[3] = b.tensors[3].to(at::kFloat);
  write(b);
  config.sample_axes = {{"target", 0}};
  config.sample_ids = "ids";
  EXPECT_NE(openError().find("must be a 1-D integer tensor with 5 entries, found float32 of shape [5]"),
            std::string::npos)
      << openError();
}

TEST_F(BatchFixture, AxisOutOfRangeAndMissingTensorAreBadInput) {
  NamedTensors b;
  b.names = {"input", "target"};
  b.tensors = {at::randn({4, 8}), at::zeros({4}, at::kLong)};
  write(b);
  config.sample_axes = {{"input", 2}};
  EXPECT_NE(openError().find("samples.tensors.input: axis 2 is out of range for a tensor with 2 dimension(s)"),
            std::string::npos)
      << openError();
  config.sample_axes = {{"labels", 0}};
  EXPECT_NE(openError().find("no such tensor (it has: input, target)"), std::string::npos) << openError();
}

// A harness transform that cannot apply to its tensor is the case's mistake,
// said before any trial (instead of reducing the error it would raise).
TEST_F(BatchFixture, TransformThatCannotApplyToItsTensorIsBadInput) {
  NamedTensors b;
  b.names = {"input", "target"};
  b.tensors = {at::randn({4, 8}), at::zeros({4}, at::kLong)};
  write(b);
  config.sample_axes = {{"input", 0}, {"target", 0}};
  config.harness = HarnessTrial{};
  for (const std::string type : {"normalize", "noise"}) {
    TransformSpec t;
    t.name = type;
    t.type = type;
    t.tensor = "target";
    t.params = {{"mean", "0"}, {"std", "1"}};
    config.harness->transforms = {t};
    const std::string error = openError();
    EXPECT_NE(error.find(config.case_file.string() + ": trial.harness.transforms (" + type + "): " + type +
                         " needs a floating-point tensor, 'target' is int64"),
              std::string::npos)
        << error;
    config.harness->transforms[0].tensor = "input";
    EXPECT_EQ(openError(), "") << "the same transform on the float tensor is fine";
  }
  TransformSpec pad;
  pad.name = pad.type = "pad";
  pad.tensor = "input";
  pad.params = {{"axis", "2"}, {"length", "10"}, {"value", "0"}};
  config.harness->transforms = {pad};
  EXPECT_NE(openError().find("trial.harness.transforms (pad): axis 2 is out of range for 'input' of shape [4, 8]"),
            std::string::npos)
      << openError();
}

TEST_F(BatchFixture, UnreadableOrNonDictFilesAreBadInput) {
  testing::writeFile(config.batch, "not a zip file");
  EXPECT_NE(openError().find("not a readable torch.save file"), std::string::npos) << openError();
  std::string output;
  ASSERT_EQ(testing::runCommand(testing::python() +
                                    " -c \"import collections, torch; P = collections.namedtuple('P', 'x y'); "
                                    "torch.save(P(torch.zeros(2), torch.ones(2)), '" +
                                    config.batch.string() + "')\"",
                                &output),
            0)
      << output;
  EXPECT_NE(openError().find("an object of a class of your own (P), such as a named tuple"), std::string::npos)
      << openError();
  fs::remove(config.batch);
  EXPECT_NE(openError().find("cannot read the batch file"), std::string::npos) << openError();
}

// A storage record shorter than its tensor needs (a damaged or crafted
// file, #43 probe): refused as bad input before any tensor is read, where
// reading it would go past the buffer (heap bytes as sample values, or a
// crash of minrepro itself).
TEST_F(BatchFixture, AStorageRecordShorterThanItsTensorIsRefused) {
  std::string output;
  ASSERT_EQ(testing::runCommand(
                testing::python() + " -c \"import torch, zipfile; P = '" + config.batch.string() +
                    "'; torch.save({'input': torch.zeros(12, 4), 'target': torch.arange(12)}, P)\n"
                    "z = zipfile.ZipFile(P); items = [(i, z.read(i.filename)) for i in z.infolist()]; z.close()\n"
                    "longest = max((len(d), i.filename) for i, d in items if '/data/' in i.filename)[1]\n"
                    "w = zipfile.ZipFile(P, 'w', zipfile.ZIP_STORED)\n"
                    "[w.writestr(i.filename, d[:8] if i.filename == longest else d) for i, d in items]; w.close()\"",
                &output),
            0)
      << output;
  const std::string error = openError();
  EXPECT_NE(error.find("damaged: its storage record data/0 holds 8 bytes where 192 are declared"), std::string::npos)
      << error;
}

// torch.save's legacy format and a plain pickle are named as what they are,
// with the line that re-saves them (#43.9), not the stream reader's "miniz" error.
TEST_F(BatchFixture, LegacyTorchSaveAndPlainPickleSayWhatTheyAreAndHowToResave) {
  const std::string save = "import pickle, torch; b = {'x': torch.zeros(2)}; ";
  for (const auto& [how, said] : std::vector<std::pair<std::string, std::string>>{
           {"torch.save(b, P, _use_new_zipfile_serialization=False)", "saved in torch.save's legacy format"},
           {"pickle.dump(b, open(P, 'wb'))", "a plain pickle (pickle.dump), not a torch.save file"}}) {
    SCOPED_TRACE(how);
    std::string output;
    ASSERT_EQ(testing::runCommand(
                  testing::python() + " -c \"" + save + "P = '" + config.batch.string() + "'; " + how + "\"", &output),
              0)
        << output;
    const std::string error = openError();
    EXPECT_NE(error.find(said), std::string::npos) << error;
    EXPECT_EQ(error.find("miniz"), std::string::npos) << error;
    // The line re-saves it, pasted into a shell as it is, whatever the
    // file's name holds: $(...) and quotes are one word there and one
    // string in Python (probe 32: it ran `touch`). A plain pickle is
    // loaded with pickle (torch.load refuses it).
    const fs::path odd = dir.path() / "x$(touch INJECTED)'\").pt";
    fs::rename(config.batch, odd);
    config.batch = odd;
    const std::string error_of_odd = openError();
    const std::string from = "loading runs its pickled code): ", to = "; then give resaved.pt";
    ASSERT_NE(error_of_odd.find(from), std::string::npos) << error_of_odd;
    const std::size_t begin = error_of_odd.find(from) + from.size();
    const std::string line = error_of_odd.substr(begin, error_of_odd.find(to, begin) - begin);
    fs::remove(dir.path() / "resaved.pt");
    ASSERT_EQ(
        testing::runCommand(
            "cd " + dir.path().string() + " && python() { " + testing::python() + " \"$@\"; } && " + line, &output),
        0)
        << line << output;
    config.batch = dir.path() / "resaved.pt";
    config.sample_axes = {{"x", 0}};
    EXPECT_EQ(openError(), "") << line;
    EXPECT_FALSE(fs::exists(dir.path() / "INJECTED")) << line;
    config.batch = dir.path() / "batch.pt";
    config.sample_axes.clear();
  }
}

// A pickle that would build more containers than a batch may hold, or
// millions of values, is refused before LibTorch's unpickler builds them
// (probe 30: six million empty dicts in a 36 MB file took 2.9 GB before
// the entry cap refused them); a batch of a few thousand entries is read.
TEST_F(BatchFixture, APickleOfMillionsOfObjectsIsRefusedBeforeItIsBuilt) {
  for (const auto& [extra, said] : std::vector<std::pair<std::string, std::string>>{
           {"[[] for _ in range(1_000_001)]", "it would build more than 1000000 dicts, lists and tuples"},
           {"[{} for _ in range(250_001)]", "it would build more than 250000 dicts"},
           {"[None] * 3_000_001", "it would build more than 3000000 values"}}) {
    SCOPED_TRACE(said);
    ASSERT_EQ(saveFromPython("{'x': torch.zeros(2), 'm': " + extra + "}"), "");
    const std::string error = openError();
    EXPECT_NE(error.find(said), std::string::npos) << error;
    EXPECT_NE(error.find("refused before reading it"), std::string::npos) << error;
  }
  EXPECT_EQ(overPickleBudget(std::string("\x80\x02}q\x00.", 6)), "");  // one empty dict, protocol 2
  PickleBudget tight;
  tight.max_containers = 3;                                                   // the list and its dicts
  EXPECT_NE(overPickleBudget(std::string("\x80\x02](}}}e.", 8), tight), "");  // [{}, {}, {}]
  EXPECT_EQ(overPickleBudget(std::string("\x80\x02](}}e.", 7), tight), "");   // [{}, {}]
  // A string's bytes are skipped, whatever they hold: "}}}}" is one value.
  EXPECT_EQ(overPickleBudget(std::string("\x80\x02X\x04\x00\x00\x00}}}}.", 12), tight), "");
}

// A memo slot far past what the pickle built (LibTorch sizes its memo to
// it: slot 200 000 000 of a 1 KB file took 3.2 GB and was accepted), a
// GLOBAL without its newline (memory until allocation failed) or with a
// name of a megabyte (72 s) are refused before the unpickler starts
// (probe 34), as are millions of MARKs (probe 36).
TEST_F(BatchFixture, AForgedMemoSlotOrAnEndlessNameIsRefusedBeforeItIsRead) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2), 'target': torch.arange(2)}"), "");
  for (const auto& [pickle, said] : std::vector<std::pair<std::string, std::string>>{
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00kNr' + (200_000_000).to_bytes(4, 'little') + b's.'",
            "it stores into memo slot 200000000 having built 3 values"},
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00kc' + b'a' * 1000", "runs to the pickle's end (forged, or cut short)"},
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00kc' + b'a' * 1_000_000 + b'\\nb\\ns.'", "is 1000000 characters long"},
           // MARKs that nothing takes (probe 36: 250 000 000 took 2.4 GB).
           {"b'\\x80\\x02' + b'(' * 2_000_001 + b'}.'", "it would open more than 2000000 marks"}}) {
    SCOPED_TRACE(pickle);
    ASSERT_EQ(replacePickle(pickle), "");
    const std::string error = openError();
    EXPECT_NE(error.find(said), std::string::npos) << error.substr(0, 400);
    EXPECT_NE(error.find("refused before reading it"), std::string::npos) << error.substr(0, 400);
  }
  // As a pickler numbers them: a slot for each object memoized, in order.
  EXPECT_EQ(overPickleBudget(std::string("\x80\x02]q\x00(X\x01\x00\x00\x00"
                                         "aq\x01h\x01e.",
                                         20)),
            "");
}

// A batch of more than 100 000 tensors (one tensor held over and over: a
// 2 KB file held init for hours, probe 35) is refused when it is read.
TEST_F(BatchFixture, ABatchOfMoreThan100000TensorsIsRefused) {
  ASSERT_EQ(saveFromPython("{'input': x, 'target': torch.arange(4), 'junk': [x] * 100_000}", "x = torch.zeros(4, 3); "),
            "");
  const std::string error = openError();
  EXPECT_NE(error.find("it holds 100002 tensors (a tensor held twice counts twice; at most 100000)"), std::string::npos)
      << error;
}

// A string whose declared length runs past the pickle's end is refused
// before the unpickler allocates that length (probe 33: a 1.4 KB batch
// declaring a 2 GB string took check, shrink and compare to 2 GB; 8 bytes
// of length, any size).
TEST_F(BatchFixture, AStringLongerThanThePickleIsRefusedBeforeItIsAllocated) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2), 'target': torch.arange(2)}"), "");
  for (const auto& [pickle, said] : std::vector<std::pair<std::string, std::string>>{
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00kX\\x00\\x94\\x35\\x77abcs.'",
            "declares a string of 2000000000 bytes where the pickle has 5 left"},
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00k\\x8d' + (1 << 62).to_bytes(8, 'little') + b'abcs.'",
            "declares a string of 4611686018427387904 bytes"}}) {
    SCOPED_TRACE(pickle);
    ASSERT_EQ(replacePickle(pickle), "");
    const std::string error = openError();
    EXPECT_NE(error.find(said), std::string::npos) << error;
    EXPECT_NE(error.find("refused before reading it"), std::string::npos) << error;
  }
}

// Containers nested far deeper than the 100 levels a batch may have, but
// within the pickle budget, are refused with exit 2 like a shallower
// nesting: LibTorch frees them level by level, which overflowed the main
// thread's stack (probe 32: 200 000 nested tuples, a 200 KB file, ended
// check, init, shrink and compare with a segfault). Python's pickler cannot
// nest that deep, so the pickle is written by hand into a real save.
TEST_F(BatchFixture, ContainersNestedHundredsOfThousandsDeepAreRefusedNotACrash) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2)}"), "");
  for (const char* pickle : {"b'\\x80\\x02}X\\x05\\x00\\x00\\x00input)' + b'\\x85' * 400000 + b's.'",
                             "b'\\x80\\x02}X\\x05\\x00\\x00\\x00input' + b']' * 400000 + b'a' * 399999 + b's.'",
                             "b'\\x80\\x02' + b'}X\\x01\\x00\\x00\\x00k' * 240000 + b'}' + b's' * 240000 + b'.'"}) {
    SCOPED_TRACE(pickle);
    ASSERT_EQ(replacePickle(pickle), "");
    const std::string error = openError();
    EXPECT_NE(error.find("nested more than 100 levels deep"), std::string::npos) << error;
  }
}

// A pickle that calls a function running commands (os.system here) is
// refused unrun and named for what it is, not as "a class of your own, such
// as a named tuple" (probe 32), and the command never runs.
TEST_F(BatchFixture, APickleThatRunsACommandIsRefusedUnrunAndSaidToBeOne) {
  const fs::path ran = dir.path() / "RAN";
  ASSERT_EQ(saveFromPython("{'input': Run(), 'target': torch.arange(2)}",
                           "import os; exec('class Run:\\n def __reduce__(self): return (os.system, (\\'touch " +
                               ran.string() + "\\',))'); "),
            "");
  const std::string error = openError();
  EXPECT_NE(error.find("system, a function that runs commands or code"), std::string::npos) << error;
  EXPECT_EQ(error.find("named tuple"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(ran));
  // A pickle within the pickle, which torch.load without weights_only runs
  // (probe 33), and the same call named by protocol 4's STACK_GLOBAL.
  const std::string inner = "pickle.dumps(Run(), protocol=2)";
  ASSERT_EQ(saveFromPython("{'input': Nested(), 'target': torch.arange(2)}",
                           "import os, pickle; exec('class Run:\\n def __reduce__(self): return (os.system, "
                           "(\\'touch " +
                               ran.string() +
                               "\\',))'); exec('class Nested:\\n def __reduce__(self): return "
                               "(torch.storage._load_from_bytes, (" +
                               inner + ",))'); "),
            "");
  EXPECT_NE(openError().find("the pickle calls torch.storage._load_from_bytes"), std::string::npos) << openError();
  ASSERT_EQ(replacePickle("b'\\x80\\x02}X\\x01\\x00\\x00\\x00kX\\x05\\x00\\x00\\x00posixX\\x06\\x00\\x00"
                          "\\x00system\\x93X\\x04\\x00\\x00\\x00true\\x85Rs.'"),
            "");
  EXPECT_NE(openError().find("as pickle protocol 4 and later do"), std::string::npos) << openError();
  EXPECT_EQ(openError().find("1.13"), std::string::npos) << openError();
  EXPECT_FALSE(fs::exists(ran));
}

// A broadcast view far past any machine's memory (expand(): [8, 2e9] over
// 32 bytes) is refused when the batch is opened, since candidates are
// written dense; one of a few GB dense is read (probe 31: shrink reached
// 8 GB and died of an allocation failure, exit 1).
TEST_F(BatchFixture, AnExpandedViewPastMemoryIsRefusedWhenOpened) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(8, 1).expand(8, 2_000_000_000), 'target': torch.arange(8)}"), "");
  const std::string error = openError();
  EXPECT_NE(error.find("'input' is an expand()ed view, [8, 2000000000] Float: 59 GiB dense over 32 bytes of storage"),
            std::string::npos)
      << error;
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(8, 1).expand(8, 1000), 'target': torch.arange(8)}"), "");
  EXPECT_EQ(openError().find("expand()ed"), std::string::npos) << openError();
  // Views under the limit one by one, over it together (probe 34: two of
  // 3 GiB and 2 GiB from a 2 KB file took check to 4.3 GB).
  ASSERT_EQ(saveFromPython("{'input': torch.randn(1, 3).expand(2**26, 3), 'target': torch.tensor([1]).expand(2**26)}"),
            "");
  const std::string together = openError();
  EXPECT_NE(together.find("'target' is an expand()ed view, [67108864] Long: 512 MiB dense over 8 bytes of storage "
                          "(1280 MiB with the batch's other expanded views)"),
            std::string::npos)
      << together;
  // Strides that read elements more than once without a 0 among them
  // (probe 41: [2**15, 2**14] over 2**15 + 2**14 elements, read as 4 GiB by
  // check, and compare's float32 copy of a float16 one written to disk).
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2**15 + 2**14, dtype=torch.int64).as_strided((2**15, 2**14), (1, "
                           "1)), 'target': torch.arange(2)}"),
            "");
  const std::string overlapping = openError();
  EXPECT_NE(overlapping.find("'input' is a view whose strides [1, 1] read its elements more than once (as_strided), "
                             "[32768, 16384] Long: 4096 MiB dense over 393216 bytes of storage"),
            std::string::npos)
      << overlapping;
  // A view into a larger storage (a slice, a transpose) reads each element once.
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2**10, 2**9)[:, :2**8].t(), 'target': torch.arange(256)}"), "");
  EXPECT_EQ(openError().find("more than once"), std::string::npos) << openError();
}

// An empty file and a save cut short (a full disk, an interrupted copy)
// are named as what they are, not with the stream reader's "internal miniz
// error" and its advice (#43 probe).
TEST_F(BatchFixture, AnEmptyOrCutShortBatchSaysSoAndHowToSaveItAgain) {
  ASSERT_EQ(saveFromPython("{'x': torch.zeros(64, 64)}"), "");
  const std::string whole = testing::readFile(config.batch);
  testing::writeFile(config.batch, whole.substr(0, whole.size() / 2));
  std::string error = openError();
  EXPECT_NE(error.find("is cut short (" + std::to_string(whole.size() / 2) + " bytes, without the zip directory"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("save the batch again with torch.save(batch, path)"), std::string::npos) << error;
  EXPECT_EQ(error.find("miniz"), std::string::npos) << error;
  testing::writeFile(config.batch, "");
  error = openError();
  EXPECT_NE(error.find("is empty (0 bytes)"), std::string::npos) << error;
  EXPECT_EQ(error.find("miniz"), std::string::npos) << error;
}

// A batch whose pickle nests 20 000 lists (425 KB) killed minrepro with
// SIGSEGV, and one whose lists hold each other 8 times over, 7 levels
// deep (a few KB; torch.load keeps the references shared), was walked
// once per reference (8^7 entries here; 2^22 took 3.4 GB). Both are refused with what
// to save instead (probe 20 F2, F3), as is a key of 256 KB (F7).
TEST_F(BatchFixture, ContainersNestedTooDeepOrSharedTooOftenAreRefused) {
  const std::string craft =
      "import struct, torch, zipfile; P = '" + config.batch.string() +
      "'; torch.save({'input': torch.zeros(12, 4), 'target': torch.arange(12)}, P)\n"
      "z = zipfile.ZipFile(P); items = [(i.filename, z.read(i.filename)) for i in z.infolist()]; z.close()\n"
      "pkl = [d for n, d in items if n.endswith('data.pkl')][0]; assert pkl.endswith(b'u.')\n"
      "def key(k): return b'X' + struct.pack('<I', len(k)) + k.encode()\n";
  const auto write = [&](const std::string& insert) {
    std::string output;
    ASSERT_EQ(testing::runCommand(testing::python() + " -c \"" + craft + "ins = " + insert +
                                      "\nw = zipfile.ZipFile(P, 'w', zipfile.ZIP_STORED)\n"
                                      "[w.writestr(n, pkl[:-2] + ins + b'u.' if n.endswith('data.pkl') else d) "
                                      "for n, d in items]; w.close()\"",
                                  &output),
              0)
        << output;
  };
  write("key('deep') + b']' * 20000 + b'a' * 19999");
  std::string error = openError();
  EXPECT_NE(error.find("its containers are nested more than 100 levels deep"), std::string::npos) << error;
  write(
      "key('l0') + b']r' + struct.pack('<I', 40) + b''.join(key('l%d' % i) + b'(' + (b'j' + "
      "struct.pack('<I', 39 + i)) * 8 + b'lr' + struct.pack('<I', 40 + i) for i in range(1, 8))");
  error = openError();
  EXPECT_NE(error.find("hold more than 1000000 entries in all (an entry held twice counts twice)"), std::string::npos)
      << error;
  // A key of 256 KB took init 20 s; now refused as no name.
  write("key('k' * (256 << 10)) + b'N'");
  error = openError();
  EXPECT_NE(error.find("has a key of 262144 characters (at most 1024)"), std::string::npos) << error;
  // A newline in a name split REPORT.md's lines (probe 18 #9).
  write("key('label\\n## forged heading') + b'N'");
  error = openError();
  EXPECT_NE(error.find("has a key holding a control character (a newline, a tab)"), std::string::npos) << error;
}

// What torch.save never writes is refused before anything is read (#43
// probe): a record that inflates from a small file to 200 MB (LibTorch
// inflated it: 1.16 GB for a crafted 1 MB batch) and two records of one name.
TEST_F(BatchFixture, ACompressedBombOrADuplicateRecordIsRefusedBeforeReading) {
  const std::string batch = "{'input': torch.zeros(12, 4), 'target': torch.arange(12)}";
  ASSERT_EQ(rezip(batch, "ZIP_DEFLATED", "[w.writestr(n, bytes(200 << 20) if '/data/' in n else d) for n, d in items]"),
            "");
  ASSERT_LT(fs::file_size(config.batch), std::uintmax_t{2} << 20);
  std::string error = openError();
  EXPECT_NE(error.find("not as torch.save writes it: its record"), std::string::npos) << error;
  EXPECT_NE(error.find("expands to 200 MiB from a file of"), std::string::npos) << error;
  ASSERT_EQ(rezip(batch, "ZIP_STORED", "[w.writestr(n, d) for n, d in items]; w.writestr(items[-2][0], items[-2][1])"),
            "");
  error = openError();
  EXPECT_NE(error.find("not as torch.save writes it: it holds two records named"), std::string::npos) << error;
}

// Probe 36: records each under the one-record limit that add up past it
// (fifty of 60 MiB from a 3 MB file took check to 3.1 GB), and directory
// entries that all point at one record (400 at one of 25 MiB: 4.3 GB;
// LibTorch reads each). Refused before anything is read.
TEST_F(BatchFixture, RecordsThatAddUpPastTheFileOrShareBytesAreRefusedBeforeReading) {
  const std::string batch = "{'t%d' % i: torch.zeros(1) for i in range(20)}";
  ASSERT_EQ(rezip(batch, "ZIP_DEFLATED", "[w.writestr(n, bytes(16 << 20) if '/data/' in n else d) for n, d in items]"),
            "");
  ASSERT_LT(fs::file_size(config.batch), std::uintmax_t{2} << 20);
  std::string error = openError();
  EXPECT_NE(error.find("not as torch.save writes it: its records add up to more than 2"), std::string::npos) << error;
  EXPECT_NE(error.find("MiB from a file of 0 MiB (compressed records"), std::string::npos) << error;
  // Stored as torch.save stores them, but the directory's entry of data/1
  // points at data/0's record.
  const std::string records =
      "[w.writestr(n, d) for n, d in items]\n"
      "e = {i.filename.split('/', 1)[1]: i for i in w.filelist}\n";
  ASSERT_EQ(rezip(batch, "ZIP_STORED", records + "e['data/1'].header_offset = e['data/0'].header_offset"), "");
  error = openError();
  EXPECT_NE(error.find("not as torch.save writes it: its directory entries"), std::string::npos) << error;
  EXPECT_NE(error.find("point into the same bytes"), std::string::npos) << error;
  // Each entry at its own record, but data/0 and data/1 named the other way
  // round in the directory: torch.load refuses it, LibTorch swapped them.
  ASSERT_EQ(rezip(batch, "ZIP_STORED",
                  records + "e['data/0'].filename, e['data/1'].filename = e['data/1'].filename, e['data/0'].filename"),
            "");
  error = openError();
  EXPECT_NE(error.find("points at no record of that name (torch.load refuses it)"), std::string::npos) << error;
}

// Probe 36: two tensors over one storage record with different dtypes
// (torch.save refuses to write them; torch.load reads the second as the
// first's dtype, LibTorch as its own: class ids for minrepro, float zeros
// for the step) are refused; LibTorch's words for a malformed pickle (an
// internal assert asking for a PyTorch bug report, a sign-extended opcode)
// are said as what the file holds.
TEST_F(BatchFixture, AStorageOfTwoDtypesIsRefusedAndAMalformedPickleIsSaidForWhatItIs) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(8), 'target': torch.tensor([1, 2, 3, 4])}"), "");
  ASSERT_EQ(replacePickle("b.replace(b'X\\x01\\x00\\x00\\x001', b'X\\x01\\x00\\x00\\x000')"), "");
  std::string error = openError();
  EXPECT_NE(error.find("not as torch.save writes it: 'input' (Float) and 'target' (Long) read one storage record "
                       "as two dtypes"),
            std::string::npos)
      << error;
  for (const auto& [pickle, said] : std::vector<std::pair<std::string, std::string>>{
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00kK\\x05Qs.'",
            "its pickle does not hold what LibTorch's reader expects there (Expected Tuple but got Int)"},
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00k\\x82\\x01s.'", "unknown pickle opcode 130 (0x82)"},
           {"b'\\x80\\x02}X\\x01\\x00\\x00\\x00k\\x8a\\x09' + b'\\x01' * 9 + b's.'",
            "a pickled integer of 9 bytes, where LibTorch reads at most 8"}}) {
    SCOPED_TRACE(said);
    ASSERT_EQ(saveFromPython("{'input': torch.zeros(8), 'target': torch.tensor([1, 2, 3, 4])}"), "");
    ASSERT_EQ(replacePickle(pickle), "");
    error = openError();
    EXPECT_NE(error.find(said), std::string::npos) << error;
    EXPECT_EQ(error.find("report a bug"), std::string::npos) << error;
    EXPECT_EQ(error.find("0xffff"), std::string::npos) << error;
  }
}

// LibTorch 1.13's unpickler cannot read a dict with exactly one entry: the
// error says so and what to do. LibTorch 2.x reads it.
TEST_F(BatchFixture, OneEntryDictFromPythonGetsAnExplanationWhereLibTorchCannotReadIt) {
  ASSERT_EQ(saveFromPython("{'input': torch.zeros(2)}"), "");
  config.sample_axes = {{"input", 0}};
  if (TORCH_VERSION_MAJOR < 2)
    EXPECT_NE(openError().find("exactly one entry"), std::string::npos) << openError();
  else
    EXPECT_EQ(openError(), "");
}

// This process's resident kilobytes (VmRSS).
long residentKb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// A fork server's batch in shared memory (#43.10): a child forked from it
// does not count the batch as resident until it reads it (a private batch
// counted whole in every child from the fork on: a 272 MB batch made the
// largest child 749 MB), and the candidate cut in the child equals the one
// cut in the server.
TEST_F(BatchFixture, AForkedChildOfASharedBatchHoldsOnlyWhatItReads) {
  NamedTensors b;
  b.names = {"input", "target"};
  b.tensors = {at::randn({4096, 4096}), at::arange(4096, at::kLong)};  // 64 MB
  write(b);
  config.sample_axes = {{"input", 0}, {"target", 0}};
  auto store = BatchStore::open(config);
  Selection keep = fullSelection(*store);
  keep.samples = {1, 2, 3, 4000};
  const NamedTensors here = candidateTensors(*store, keep);
  // A child's resident KB at its fork and after cutting `keep`, and whether
  // its cut equals this process's.
  const auto forkAndCut = [&] {
    int channel[2];
    EXPECT_EQ(::pipe(channel), 0);
    const pid_t child = ::fork();
    if (child == 0) {
      const long at_fork = residentKb();
      const NamedTensors there = candidateTensors(*store, keep);
      const bool same = there.tensors[0].equal(here.tensors[0]) && there.tensors[1].equal(here.tensors[1]);
      const std::string report =
          std::to_string(at_fork) + " " + std::to_string(residentKb()) + " " + (same ? "1" : "0");
      (void)!::write(channel[1], report.data(), report.size());
      ::_exit(0);
    }
    ::close(channel[1]);
    char text[128] = {};
    (void)!::read(channel[0], text, sizeof text - 1);
    ::close(channel[0]);
    ::waitpid(child, nullptr, 0);
    std::array<long, 3> got{};
    std::istringstream(text) >> got[0] >> got[1] >> got[2];
    return got;
  };
  const auto private_batch = forkAndCut();
  shareWithForkedChildren(*store);
  const auto shared_batch = forkAndCut();
  EXPECT_LT(shared_batch[0], private_batch[0] - 48 * 1024)
      << "a child of the shared batch counts it at its fork: " << shared_batch[0] << " KB against " << private_batch[0]
      << " KB";
  EXPECT_LT(shared_batch[1], private_batch[1] - 48 * 1024) << "cutting 4 samples mapped the whole batch";
  EXPECT_EQ(private_batch[2], 1);
  EXPECT_EQ(shared_batch[2], 1) << "the child's cut differs from the server's";
}

// Every layout the cut keeps, with the sample axis outermost or not, a
// sequence window, and slabs of a few hundred bytes (so each tensor is
// streamed in many pieces): the file written piece by piece holds exactly
// what cutting in memory and laying out gives, gaps and offset zeros
// included; and the candidate a fork server builds in memory is the same.
TEST_F(BatchFixture, CandidatesStreamedInSlabsEqualTheCutInEveryLayout) {
  at::manual_seed(1);
  NamedTensors b;
  b.names = {"transposed", "image", "tokens", "every_third", "broadcast", "offset", "global"};
  const at::Tensor wide = at::randn({40, 96});
  b.tensors = {at::randn({12, 40}).t(),  // samples innermost
               at::randn({40, 3, 5, 5}).contiguous(at::MemoryFormat::ChannelsLast),
               at::randint(0, 100, {40, 30}, at::kLong),  // [samples, sequence]
               at::arange(120, at::kFloat).as_strided({40}, {3}),
               at::randn({1, 7}).expand({40, 7}),
               wide.narrow(1, 5, 50),  // offset 5, row stride 96
               at::randn({4, 4})};     // no sample axis: unchanged
  write(b);
  for (std::size_t i = 0; i + 1 < b.names.size(); ++i) config.sample_axes.push_back({b.names[i], 0});
  config.sequence.tensors = {{"tokens", 1, 0}};
  auto store = BatchStore::open(config);
  Selection keep = fullSelection(*store);
  keep.samples = {0, 1, 2, 7, 8, 20, 33, 34, 35, 39};
  keep.seq_begin = 4;
  keep.seq_end = 17;
  setSlabBytes(200);
  const fs::path out = dir.path() / "candidate.pt";
  store->writeCandidate(keep, out);
  const NamedTensors in_memory = candidateTensors(*store, keep);
  setSlabBytes(32 << 20);
  const NamedTensors written = readBatchFile(out);
  const at::Tensor index = at::tensor(keep.samples, at::kLong);
  for (std::size_t i = 0; i < b.names.size(); ++i) {
    at::Tensor cut = i + 1 < b.names.size() ? b.tensors[i].index_select(0, index) : b.tensors[i];
    if (b.names[i] == "tokens") cut = cut.narrow(1, 4, 13);
    const at::Tensor expected = i + 1 < b.names.size() ? copyWithStridePattern(cut, b.tensors[i]) : b.tensors[i];
    for (const at::Tensor& got : {written.tensors[i], in_memory.tensors[i]}) {
      EXPECT_EQ(got.strides().vec(), expected.strides().vec()) << b.names[i];
      EXPECT_EQ(got.storage_offset(), expected.storage_offset()) << b.names[i];
      ASSERT_EQ(got.storage().nbytes(), expected.storage().nbytes()) << b.names[i];
      EXPECT_TRUE(at::equal(got, cut)) << b.names[i];
      const auto bytes = [](const at::Tensor& t) {
        return at::empty({0}, at::kByte).set_(t.storage(), 0, {static_cast<int64_t>(t.storage().nbytes())}, {1});
      };
      EXPECT_TRUE(at::equal(bytes(got), bytes(expected))) << b.names[i] << ": the storage, gaps included";
    }
  }
  EXPECT_EQ(written.tensors[4].stride(0), 0) << "a broadcast sample axis stays broadcast";
}

// The storage bytes of a tensor, all of them.
at::Tensor storageBytes(const at::Tensor& t) {
  return at::empty({0}, at::kByte).set_(t.storage(), 0, {static_cast<int64_t>(t.storage().nbytes())}, {1});
}

// The values a candidate should hold: samples and window cut from the
// original, every element not kept by the values pass trivial (0 here).
at::Tensor expectedValues(const at::Tensor& t, std::optional<int> axis, std::optional<int> seq, const Selection& s,
                          const std::vector<int64_t>* kept) {
  at::Tensor values = t, origin = at::arange(t.numel(), at::kLong).view(t.sizes());
  for (at::Tensor* x : {&values, &origin}) {
    if (axis) *x = x->index_select(*axis, at::tensor(s.samples, at::kLong));
    if (seq && s.seq_end > 0) *x = x->narrow(*seq, s.seq_begin, s.seq_end - s.seq_begin);
  }
  values = values.clone();
  if (kept) values.masked_fill_(at::isin(origin, at::tensor(*kept, at::kLong)).logical_not(), 0);
  return values;
}

// Views sharing storages, in every arrangement a batch may hold them (three
// stride-3 columns of a packed record, a record with gaps and a tail, a
// sequence tensor and a view of its head, a tensor and its transpose, a
// storage that also backs a tensor without a sample axis, a view alone with
// an offset and a tail), times candidates (all kept, samples cut, a window,
// value edits, a shortened length): the file minrepro writes and the
// candidate a fork server's child builds in memory are the same bytes,
// storage sizes and sharing included; views of one storage stay on one
// storage, cut by whole samples; a value edit is made in place.
TEST_F(BatchFixture, SharedStoragesStayOneStorageAndTheFileEqualsTheForkedCandidate) {
  at::manual_seed(2);
  const at::Tensor packed = at::arange(120, at::kFloat), record = at::randn({40 * 11 + 5});
  const at::Tensor tokens = at::randint(0, 100, {40, 30}, at::kLong), x = at::randn({40, 6});
  const at::Tensor stats = at::randn({50}), alone = at::arange(130, at::kFloat);
  NamedTensors b;
  b.names = {"a", "b",  "c",          "features", "weight", "tokens", "head",
             "x", "xt", "stats_head", "stats",    "alone",  "lengths"};
  b.tensors = {packed.as_strided({40}, {3}, 0),
               packed.as_strided({40}, {3}, 1),
               packed.as_strided({40}, {3}, 2),
               record.as_strided({40, 8}, {11, 1}, 0),
               record.as_strided({40}, {11}, 9),
               tokens,
               tokens.narrow(1, 0, 4),
               x,
               x.t(),
               stats.narrow(0, 0, 4),
               stats.narrow(0, 10, 40),
               alone.as_strided({40}, {3}, 2),
               at::full({40}, 30, at::kLong)};
  write(b);
  const std::map<std::string, int> axes = {{"a", 0},      {"b", 0},      {"c", 0},    {"features", 0},
                                           {"weight", 0}, {"tokens", 0}, {"head", 0}, {"x", 0},
                                           {"xt", 1},     {"stats", 0},  {"alone", 0}};
  for (const auto& [name, axis] : axes) config.sample_axes.push_back({name, axis});
  config.sequence.tensors = {{"tokens", 1, 0}};
  config.sequence.lengths = "lengths";
  auto store = BatchStore::open(config);
  const std::vector<int64_t> cut_samples = {0, 1, 2, 7, 8, 20, 33, 34, 35, 39};
  const std::map<std::string, std::vector<int64_t>> edits = {
      {"a", {3, 21}}, {"features", {0, 9, 100}}, {"alone", {5}}, {"x", {1, 2}}, {"xt", {2, 7}}, {"tokens", {31, 62}}};
  std::vector<Selection> selections(5, fullSelection(*store));
  for (std::size_t k : {1, 2, 4}) selections[k].samples = cut_samples;
  for (std::size_t k : {2, 4}) selections[k].seq_begin = 4, selections[k].seq_end = 17;
  for (std::size_t k : {3, 4}) selections[k].values_kept = edits;
  selections[4].lengths = {{7, 9}};
  const std::vector<std::vector<std::string>> shared = {
      {"a", "b", "c"}, {"features", "weight"}, {"tokens", "head"}, {"x", "xt"}};
  const auto index = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(b.names.begin(), b.names.end(), name) - b.names.begin());
  };
  for (const Selection& s : selections) {
    const fs::path out = dir.path() / "candidate.pt";
    store->writeCandidate(s, out);
    const NamedTensors written = readBatchFile(out), in_memory = candidateTensors(*store, s);
    const auto kept = static_cast<int64_t>(s.samples.size());
    const bool samples_cut = kept != 40;
    for (std::size_t i = 0; i < b.names.size(); ++i) {
      const at::Tensor &file = written.tensors[i], &memory = in_memory.tensors[i];
      const std::string what = b.names[i] + " in " + selectionKey(s);
      EXPECT_EQ(file.sizes().vec(), memory.sizes().vec()) << what;
      EXPECT_EQ(file.strides().vec(), memory.strides().vec()) << what;
      EXPECT_EQ(file.strides().vec(), b.tensors[i].strides().vec()) << what;
      EXPECT_EQ(file.storage_offset(), memory.storage_offset()) << what;
      ASSERT_EQ(file.storage().nbytes(), memory.storage().nbytes()) << what;
      EXPECT_TRUE(at::equal(storageBytes(file), storageBytes(memory))) << what;
      for (std::size_t j = 0; j < b.names.size(); ++j)
        EXPECT_EQ(file.storage().is_alias_of(written.tensors[j].storage()),
                  memory.storage().is_alias_of(in_memory.tensors[j].storage()))
            << what << " and " << b.names[j];
      std::optional<int> axis;
      if (axes.count(b.names[i])) axis = axes.at(b.names[i]);
      const auto seq = b.names[i] == "tokens" ? std::optional<int>(1) : std::nullopt;
      const auto edit = s.values_kept.find(b.names[i]);
      // Not checked: overlapping views both edited, tokens' head (tokens'
      // edits write through it), and what lengths change.
      const bool through = b.names[i] == "head" && s.values_kept.count("tokens");
      if (b.names[i] != "x" && b.names[i] != "xt" && b.names[i] != "lengths" && !through &&
          !(b.names[i] == "tokens" && !s.lengths.empty())) {
        EXPECT_TRUE(at::equal(
            file, expectedValues(b.tensors[i], axis, seq, s, edit == s.values_kept.end() ? nullptr : &edit->second)))
            << what;
      }
    }
    for (const auto& group : shared)
      for (const std::string& name : group)
        EXPECT_TRUE(written.tensors[index(name)].storage().is_alias_of(written.tensors[index(group[0])].storage()))
            << name << " shares " << group[0] << "'s storage in " << selectionKey(s);
    EXPECT_EQ(written.tensors[index("a")].storage().nbytes(), static_cast<std::size_t>(12 * kept));
    EXPECT_EQ(written.tensors[index("c")].storage_offset(), 2);
    EXPECT_EQ(written.tensors[index("features")].storage().nbytes(), static_cast<std::size_t>(44 * kept + 20))
        << "whole records, and the tail after the last";
    EXPECT_EQ(written.tensors[index("stats")].storage().is_alias_of(written.tensors[index("stats_head")].storage()),
              !samples_cut)
        << "a view without a sample axis cannot be cut by samples: each keeps its own";
    if (!samples_cut) {
      EXPECT_EQ(written.tensors[index("alone")].storage().nbytes(), 520u) << "edited in place";
    }
    if (!s.lengths.empty()) {
      const at::Tensor sample7 = written.tensors[index("tokens")][3];  // sample 7, positions 4..16
      EXPECT_TRUE(at::equal(sample7.narrow(0, 5, 8), at::zeros({8}, at::kLong))) << "padded past length 9";
      EXPECT_EQ(written.tensors[index("lengths")][3].item<int64_t>(), 5);
    }
  }
}

// The size a run logs is counted a slab at a time; it must be the count of
// the units the values pass would list.
TEST_F(BatchFixture, NonTrivialValuesAreCountedWithoutListingThem) {
  NamedTensors b;
  b.names = {"x", "lengths"};
  b.tensors = {at::tensor(std::vector<float>{0, 1, 2, 0, 3, 0, 0, 4, 5, 6, 0, 7}).view({4, 3}),
               at::tensor(std::vector<int64_t>{3, 2, 1, 3})};
  write(b);
  config.sample_axes = {{"x", 0}};
  config.sequence.tensors = {{"x", 1, 0}};
  config.sequence.lengths = "lengths";
  auto store = BatchStore::open(config);
  setSlabBytes(8);
  for (Selection s :
       {fullSelection(*store), Selection{{1, 3}, 0, 3, {}, {}, {}}, Selection{{0, 2, 3}, 1, 3, {{3, 2}}, {}, {}},
        Selection{{0, 1, 3}, 0, 3, {}, {}, {{"x", {1, 2, 11}}}}}) {
    EXPECT_EQ(store->nonTrivialValueCount(s), static_cast<std::int64_t>(store->nonTrivialValues(s).size()))
        << selectionKey(s);
  }
  setSlabBytes(32 << 20);
}

// Records over 4 GiB need zip64 fields; forced on a small file, both
// readers of torch.save files (LibTorch's, Python's zipfile) take them,
// CRCs included, and every record's data starts at a multiple of 64 bytes.
TEST_F(BatchFixture, Zip64RecordsAreReadByLibTorchAndPython) {
  const fs::path file = dir.path() / "zip64.pt";
  {
    StoredZipWriter zip(file, /*force_zip64=*/true);
    zip.addRecord("archive/data.bin", 10000, [](const ByteSink& sink) {
      for (int i = 0; i < 100; ++i) {
        const std::string piece(100, static_cast<char>('a' + i % 26));
        sink(piece.data(), piece.size());
      }
    });
    zip.addRecord("archive/version", 2, [](const ByteSink& sink) { sink("3\n", 2); });
    zip.finish();
  }
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  const auto [data, size] = reader.getRecord("data.bin");
  ASSERT_EQ(size, 10000u);
  EXPECT_EQ(static_cast<const char*>(data.get())[150], 'b');
  std::string output;
  const std::string script =
      "import struct, sys, zipfile\n"
      "z = zipfile.ZipFile(sys.argv[1]); raw = open(sys.argv[1], 'rb').read()\n"
      "starts = [i.header_offset + 30 + sum(struct.unpack('<HH', raw[i.header_offset + 26:i.header_offset + 30])) "
      "for i in z.infolist()]\n"
      "print(z.testzip(), [s % 64 for s in starts], z.read('archive/version'), z.infolist()[0].file_size)\n";
  testing::writeFile(dir.path() / "check.py", script);
  ASSERT_EQ(
      testing::runCommand(testing::python() + " " + (dir.path() / "check.py").string() + " " + file.string(), &output),
      0)
      << output;
  EXPECT_EQ(output, "None [0, 0] b'3\\n' 10000\n");
  // The directory reader behind the checks of crafted files reads the
  // zip64 fields as LibTorch does: names, sizes and where each record is.
  const ZipDirectory directory = readZipDirectory(file);
  EXPECT_EQ(directory.unreadable, "");
  ASSERT_EQ(directory.entries.size(), 2u);
  EXPECT_EQ(directory.entries[0].name, "archive/data.bin");
  EXPECT_EQ(directory.entries[0].size, 10000u);
  EXPECT_EQ(directory.entries[0].compressed, 10000u);
  EXPECT_EQ(directory.entries[0].header_offset, 0u);
  EXPECT_EQ(directory.entries[1].size, 2u);
  EXPECT_GT(directory.entries[1].header_offset, 10000u);
}

}  // namespace
}  // namespace minrepro
