#include "harness/case_inference.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "core/errors.h"
#include "harness/batch_io.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

bool isInteger(const at::Tensor& t) { return at::isIntegralType(t.scalar_type(), /*includeBool=*/false); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// The sample count: the most common size of dimension 0 (ties: the larger).
std::int64_t sampleCount(const NamedTensors& batch, std::vector<std::string>& notes) {
  std::map<std::int64_t, int> votes;
  for (const auto& t : batch.tensors)
    if (t.dim() >= 1) ++votes[t.size(0)];
  if (votes.empty()) return -1;
  auto best = votes.begin();
  for (auto it = votes.begin(); it != votes.end(); ++it)
    if (it->second >= best->second) best = it;
  if (votes.size() > 1)
    notes.push_back("tensors disagree on dimension 0; the samples are taken as its most common size, " +
                    std::to_string(best->first) + " (edit samples.tensors if another is)");
  return best->first;
}

// A 1-D integer tensor of one value per sample.
bool perSampleInteger(const at::Tensor& t, std::int64_t n) { return t.dim() == 1 && t.size(0) == n && isInteger(t); }

std::string findIds(const NamedTensors& batch, std::int64_t n, std::vector<std::string>& notes) {
  static const std::vector<std::string> kNames = {
      "sample_id", "sample_ids", "ids", "id", "index", "indices", "idx", "sample_index", "dataset_index", "uid"};
  for (const auto& wanted : kNames) {
    for (std::size_t i = 0; i < batch.names.size(); ++i) {
      if (lower(batch.names[i]) != wanted || !perSampleInteger(batch.tensors[i], n)) continue;
      const at::Tensor values = std::get<0>(at::_unique(batch.tensors[i]));
      if (values.numel() != n) {
        notes.push_back("'" + batch.names[i] + "' is named like sample ids but repeats values: not taken as ids");
        continue;
      }
      notes.push_back("sample ids: '" + batch.names[i] + "' (the report names kept samples by them)");
      return batch.names[i];
    }
  }
  notes.push_back(
      "no sample ids found (a 1-D integer tensor named sample_id or ids with one unique value per "
      "sample): kept samples are numbered by their position in the batch");
  return "";
}

// Per-sample integer tensors whose values lie in [0, length], the longest
// at it: a padded batch is as long as its longest sample.
std::vector<std::string> lengthTensors(const NamedTensors& batch, std::int64_t n, std::int64_t length,
                                       const std::string& ids) {
  std::vector<std::string> fits;
  for (std::size_t i = 0; i < batch.names.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    if (batch.names[i] == ids || !perSampleInteger(t, n) || n == 0) continue;
    if (at::min(t).item<std::int64_t>() >= 0 && at::max(t).item<std::int64_t>() == length)
      fits.push_back(batch.names[i]);
  }
  return fits;
}

// The size of dimension 1 the padded sample tensors share: one that a
// lengths tensor fits first (a [B, 4] feature tensor beside [B, 20] tokens
// is not the sequence), then the one most tensors have, then the longest.
std::int64_t paddedLength(const NamedTensors& batch, std::int64_t n, const std::string& ids) {
  std::map<std::int64_t, int> votes;
  for (const auto& t : batch.tensors)
    if (t.dim() >= 2 && t.size(0) == n) ++votes[t.size(1)];
  std::int64_t best = -1;
  std::tuple<bool, int, std::int64_t> best_key{false, 0, -1};
  for (const auto& [size, count] : votes) {
    const std::tuple<bool, int, std::int64_t> key{!lengthTensors(batch, n, size, ids).empty(), count, size};
    if (key > best_key) best = size, best_key = key;
  }
  return best;
}

// A short axis 1 of floats ([B, 16] features of a tabular model, the
// [B, 3, H, W] channels of images) is no sequence when no lengths tensor
// says it is padded: cutting its window only breaks the model's input size
// (a different failure, trial after trial). A waveform or a sequence of
// frames or embeddings is long along it.
constexpr std::int64_t kShortestFloatSequence = 64;
bool featureAxis(const at::Tensor& t) {
  return at::isFloatingType(t.scalar_type()) && t.dim() >= 2 && t.size(1) < kShortestFloatSequence;
}

std::string findLengths(const NamedTensors& batch, std::int64_t n, std::int64_t length, const std::string& ids,
                        std::vector<std::string>& notes) {
  const std::vector<std::string> fits = lengthTensors(batch, n, length, ids);
  std::vector<std::string> named;
  for (const std::string& name : fits)
    if (lower(name).find("len") != std::string::npos) named.push_back(name);
  if (fits.empty()) return "";
  const std::string chosen = named.empty() ? fits.front() : named.front();
  notes.push_back("lengths: '" + chosen + "' (values within the padded length " + std::to_string(length) +
                  ", the longest at it)" +
                  (fits.size() > 1 ? "; also possible: " + joined(fits) + " (edit sequence.lengths)" : ""));
  return chosen;
}

// The value every position past its sample's length holds, if there is one.
std::optional<double> paddingOf(const at::Tensor& t, const at::Tensor& lengths) {
  const std::int64_t length = t.size(1);
  const at::Tensor positions = at::arange(length, at::kLong).unsqueeze(0);
  at::Tensor past = positions >= lengths.to(at::kLong).unsqueeze(1);  // [n, length]
  for (std::int64_t d = 2; d < t.dim(); ++d) past = past.unsqueeze(-1);
  const at::Tensor padded = t.masked_select(past.expand(t.sizes()));
  if (padded.numel() == 0) return std::nullopt;
  const at::Tensor as_double = padded.to(at::kDouble);
  const double first = as_double[0].item<double>();
  if (!at::all(as_double == first).item<bool>()) return std::nullopt;
  return first;
}

void inferSequences(const NamedTensors& batch, InferredCase& out) {
  const std::int64_t length = paddedLength(batch, out.samples, out.ids);
  if (length < 0) return;
  out.lengths = findLengths(batch, out.samples, length, out.ids, out.notes);
  // Reduced with the samples, as the ids are (case.yaml's sequence.lengths).
  if (const auto it = std::find(out.sample_tensors.begin(), out.sample_tensors.end(), out.lengths);
      it != out.sample_tensors.end())
    out.sample_tensors.erase(it);
  const at::Tensor* lengths = out.lengths.empty() ? nullptr : batch.find(out.lengths);
  for (std::size_t i = 0; i < batch.names.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    if (t.dim() < 2 || t.size(0) != out.samples || t.size(1) != length) continue;
    if (!lengths && featureAxis(t)) {
      out.notes.push_back("'" + batch.names[i] + "': floats whose axis 1 has " + std::to_string(length) +
                          " entries and no lengths tensor: taken as features or channels, not a sequence (add it "
                          "under sequence.tensors if it is one)");
      continue;
    }
    const std::optional<double> pad = lengths ? paddingOf(t, *lengths) : std::nullopt;
    if (lengths && !pad) {
      out.notes.push_back("'" + batch.names[i] +
                          "' is not padded with one value past each sample's length: no "
                          "sequence axis for it (add it under sequence.tensors if it has one)");
      continue;
    }
    out.sequence_tensors.push_back(batch.names[i]);
    out.padding[batch.names[i]] = pad.value_or(0);
  }
  if (out.sequence_tensors.empty()) return;
  std::string pads;
  for (const auto& name : out.sequence_tensors)
    pads += (pads.empty() ? "" : ", ") + name + " " + number(out.padding[name]);
  out.notes.push_back("sequence axis 1 (length " + std::to_string(length) + ") of: " + pads +
                      (lengths ? " (the padding values seen past each sample's length)"
                               : " (no lengths tensor found: padding taken as 0; the lengths pass cuts the "
                                 "window only)"));
}

}  // namespace

InferredCase inferCase(const fs::path& file) {
  const NamedTensors batch = readBatchFile(file);
  InferredCase out;
  for (std::size_t i = 0; i < batch.names.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    out.tensors.push_back({batch.names[i], dtypeName(t.scalar_type()), t.sizes().vec()});
  }
  out.samples = sampleCount(batch, out.notes);
  if (out.samples < 0)
    throw BadInputError(file.string() +
                        ": no tensor of the batch has a dimension to take samples from (all are "
                        "scalars); write case.yaml by hand (see minrepro init --help)");
  std::vector<std::string> whole;
  for (std::size_t i = 0; i < batch.names.size(); ++i) {
    if (batch.tensors[i].dim() >= 1 && batch.tensors[i].size(0) == out.samples)
      out.sample_tensors.push_back(batch.names[i]);
    else
      whole.push_back(batch.names[i]);
  }
  out.notes.insert(out.notes.begin(), std::to_string(out.samples) +
                                          " samples along dimension 0 of: " + joined(out.sample_tensors) +
                                          (whole.empty() ? "" : "; kept whole in every candidate: " + joined(whole)));
  out.ids = findIds(batch, out.samples, out.notes);
  if (!out.ids.empty())
    out.sample_tensors.erase(std::find(out.sample_tensors.begin(), out.sample_tensors.end(), out.ids));
  inferSequences(batch, out);
  return out;
}

}  // namespace minrepro
