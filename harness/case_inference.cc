#include "harness/case_inference.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/errors.h"
#include "harness/batch_io.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

using Kind = BatchNode::Kind;

bool isInteger(const at::Tensor& t) { return at::isIntegralType(t.scalar_type(), /*includeBool=*/false); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool named(const std::string& path, const std::string& part) { return lower(path).find(part) != std::string::npos; }

// The last component of a path: "attention_mask" of "inputs.attention_mask".
std::string leafName(const std::string& path) {
  const auto at = path.find_last_of(".[");
  return at == std::string::npos ? path : path.substr(at + 1);
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

std::string shapeText(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

// ---------------------------------------------------------------- samples

// What the entries of a list or tuple have in common: tensors of one dtype
// and rank, dicts that all hold one key at least (a record per sample whose
// other fields are optional: one image's entry with a URL the others lack
// kept the whole list, every sample's record, in the minimal batch), or
// strings and numbers, or lists of them (one sentence's words per sample:
// taken apart, a list of 32 words in a batch of 32 had been taken for the
// samples and every other word listed as kept).
enum class Alike { No, Tensors, Dicts, Values };

bool listOfValues(const BatchNode& node) {
  if (node.kind != Kind::List && node.kind != Kind::Tuple) return false;
  return std::all_of(node.children.begin(), node.children.end(),
                     [](const BatchNode& c) { return c.kind == Kind::Value && !c.value.isNone(); });
}

bool shareAKey(const BatchNode& node) {
  const auto holds = [](const BatchNode& dict, const c10::IValue& key) {
    for (const c10::IValue& k : dict.keys)
      if (k == key) return true;
    return false;
  };
  for (const c10::IValue& key : node.children.front().keys) {
    bool everywhere = true;
    for (const BatchNode& c : node.children) everywhere = everywhere && c.kind == Kind::Dict && holds(c, key);
    if (everywhere) return true;
  }
  return false;
}

Alike entriesAlike(const BatchNode& node, const NamedTensors& b) {
  if ((node.kind != Kind::List && node.kind != Kind::Tuple) || node.children.empty()) return Alike::No;
  const BatchNode& first = node.children.front();
  if (first.kind == Kind::Dict && !shareAKey(node)) return Alike::No;
  for (const BatchNode& c : node.children) {
    if (c.kind != first.kind) return Alike::No;
    if (c.kind == Kind::Tensor) {
      const at::Tensor &x = b.tensors[c.tensor], &y = b.tensors[first.tensor];
      if (x.scalar_type() != y.scalar_type() || x.dim() != y.dim() || x.dim() == 0) return Alike::No;
    } else if (c.kind == Kind::Dict) {
      continue;  // a key they all hold: shareAKey
    } else if (c.kind == Kind::Value) {
      if (c.value.isString() != first.value.isString() || c.value.isNone()) return Alike::No;
    } else if (!listOfValues(c)) {
      return Alike::No;
    }
  }
  return first.kind == Kind::Tensor ? Alike::Tensors : first.kind == Kind::Dict ? Alike::Dicts : Alike::Values;
}

// Dimension 0 that every tensor entry shares, or -1.
std::int64_t sharedFirstDim(const BatchNode& node, const NamedTensors& b) {
  std::int64_t size = -1;
  for (const BatchNode& c : node.children) {
    const std::int64_t s = b.tensors[c.tensor].size(0);
    if (size >= 0 && s != size) return -1;
    size = s;
  }
  return size;
}

// Each entry votes for the batch size it shows: a tensor outside lists its
// dimension 0 (its dimension 1 a little: sequence-first); a list of alike
// entries its length, and, when its tensor entries share a dimension 0,
// that too: (x, y) of one dtype and rank is two batches, not two samples.
void collectVotes(const BatchNode& node, const NamedTensors& b, std::map<std::int64_t, double>& votes) {
  if (node.kind == Kind::Tensor) {
    const at::Tensor& t = b.tensors[node.tensor];
    if (t.dim() >= 1) votes[t.size(0)] += 1;
    if (t.dim() >= 2) votes[t.size(1)] += 0.25;
    return;
  }
  const Alike alike = entriesAlike(node, b);
  if (alike == Alike::No) {
    for (const BatchNode& c : node.children) collectVotes(c, b, votes);
    return;
  }
  votes[static_cast<std::int64_t>(node.children.size())] += alike == Alike::Values ? 0.5 : 1;
  if (alike == Alike::Tensors)
    if (const std::int64_t m = sharedFirstDim(node, b); m >= 0 && m != static_cast<std::int64_t>(node.children.size()))
      votes[m] += 1;
}

std::int64_t batchSize(const NamedTensors& b) {
  std::map<std::int64_t, double> votes;
  collectVotes(*b.tree, b, votes);
  std::int64_t best = -1;
  double best_votes = 0;
  for (const auto& [size, weight] : votes)  // ascending: a tie goes to the larger
    if (size > 0 && weight >= best_votes) best = size, best_votes = weight;
  return best;
}

bool isPerSampleList(const BatchNode& node, const NamedTensors& b, std::int64_t n) {
  const Alike alike = entriesAlike(node, b);
  if (alike == Alike::No || static_cast<std::int64_t>(node.children.size()) != n) return false;
  return !(alike == Alike::Tensors && sharedFirstDim(node, b) == n);
}

void markListEntries(const BatchNode& node, InferredCase& out) {
  if (node.kind == Kind::Tensor) out.tensors[node.tensor].role = "list entry";
  for (const BatchNode& c : node.children) markListEntries(c, out);
}

// Sample tensors, per-sample lists, and what is kept whole, with why.
void assignRoles(const BatchNode& node, const NamedTensors& b, InferredCase& out) {
  if (node.kind == Kind::List || node.kind == Kind::Tuple) {
    if (isPerSampleList(node, b, out.samples)) {
      out.sample_lists.push_back(node.path);
      markListEntries(node, out);
      return;
    }
  }
  if (node.kind == Kind::Value) out.kept_values.push_back(node.path);
  if (node.kind != Kind::Tensor) {
    for (const BatchNode& c : node.children) assignRoles(c, b, out);
    return;
  }
  const at::Tensor& t = b.tensors[node.tensor];
  InferredTensor& info = out.tensors[node.tensor];
  if (t.dim() >= 1 && t.size(0) == out.samples) {
    info.role = "sample";
    out.sample_axes.push_back({node.path, 0});
  } else if (t.dim() >= 2 && t.size(1) == out.samples) {
    info.role = "sample";
    info.reason = "sequence-first: samples along dimension 1";
    out.sample_axes.push_back({node.path, 1});
  } else {
    info.role = "whole";
    info.reason = t.dim() == 0 ? "a scalar"
                               : "dimension 0 is " + std::to_string(t.size(0)) + ", not the batch's " +
                                     std::to_string(out.samples) + " (shape " + shapeText(t) + ")";
  }
}

// ---------------------------------------------------------------- ids

// The tensor of sample axis `a` when its samples lie along dimension 0.
const at::Tensor* perSampleTensor(const NamedTensors& b, const SampleAxis& a) {
  return a.axis == 0 ? b.find(a.tensor) : nullptr;
}

bool perSampleInteger(const at::Tensor& t, std::int64_t n) { return t.dim() == 1 && t.size(0) == n && isInteger(t); }

// The names ids go by, the usual first, and the endings of "utt_id", "image_id".
const std::vector<std::string> kIdNames = {"sample_id", "sample_ids",   "ids",           "id", "index", "indices",
                                           "idx",       "sample_index", "dataset_index", "uid"};
const std::vector<std::string> kIdSuffixes = {"_id", "_ids", "_idx", "_index"};

bool endsLikeIds(const std::string& leaf) {
  return std::any_of(kIdSuffixes.begin(), kIdSuffixes.end(),
                     [&](const std::string& suffix) { return leaf.size() > suffix.size() && leaf.ends_with(suffix); });
}

bool namedLikeIds(const std::string& path) {
  const std::string leaf = lower(leafName(path));
  return std::find(kIdNames.begin(), kIdNames.end(), leaf) != kIdNames.end() || endsLikeIds(leaf);
}

// Sample ids held in the records of a per-sample list, one integer per
// entry (torchvision's detection targets: {"boxes", "labels",
// "image_id"}): "[1][*].image_id", when exactly one field is named like
// ids and unique over the entries.
void findIdsInRecords(const NamedTensors& b, InferredCase& c) {
  std::vector<std::string> fitting;
  for (const std::string& list : c.sample_lists) {
    const std::string first = (list == kRootPath ? "" : list) + "[0]";
    for (const std::string& name : b.names) {
      if (name.rfind(first, 0) != 0 || !namedLikeIds(name)) continue;
      const std::string pattern = first.substr(0, first.size() - 3) + "[*]" + name.substr(first.size());
      std::set<std::int64_t> values;
      for (std::int64_t i = 0; i < c.samples; ++i) {
        const at::Tensor* id = b.find(entryPath(pattern, i));
        if (!id || id->numel() != 1 || !isInteger(*id)) break;
        values.insert(id->reshape({}).item<std::int64_t>());
      }
      if (static_cast<std::int64_t>(values.size()) == c.samples) fitting.push_back(pattern);
    }
  }
  if (fitting.size() == 1) c.ids = fitting.front();
}

// Sample ids: a per-sample integer tensor named like them, one unique value
// per sample; the usual names first, then one "*_id" ("utt_id",
// "image_id"). Two such ("user.user_id", "item.item_id": a recommender's
// features, each unique in its batch by chance) name no samples: neither
// is taken, and the doubt says so.
void findIds(const NamedTensors& b, InferredCase& c) {
  const auto unique = [&](const SampleAxis& a, const at::Tensor& t) {
    if (std::get<0>(at::_unique(t)).numel() == c.samples) return true;
    c.doubts.push_back("'" + a.tensor + "' is named like sample ids but repeats values: not taken as ids");
    return false;
  };
  for (const auto& wanted : kIdNames)
    for (const SampleAxis& a : c.sample_axes) {
      const at::Tensor* t = perSampleTensor(b, a);
      if (t && lower(leafName(a.tensor)) == wanted && perSampleInteger(*t, c.samples) && unique(a, *t)) {
        c.ids = a.tensor;
        return;
      }
    }
  std::vector<std::string> fitting;
  for (const SampleAxis& a : c.sample_axes) {
    const at::Tensor* t = perSampleTensor(b, a);
    if (t && endsLikeIds(lower(leafName(a.tensor))) && perSampleInteger(*t, c.samples) && unique(a, *t))
      fitting.push_back(a.tensor);
  }
  if (fitting.size() == 1) c.ids = fitting.front();
  if (fitting.size() > 1)
    c.doubts.push_back(
        joined(fitting) +
        " are each named like ids with one value per sample: features such as a user's or an item's "
        "id are named so too, so none of them is taken as the samples' ids (name yours under samples.ids)");
  if (c.ids.empty() && fitting.empty()) findIdsInRecords(b, c);
}

// ---------------------------------------------------------------- sequences

// The one value every position of axis `axis` past each sample's length
// holds (samples along dimension 0), if there is one and any such position.
std::optional<double> paddingAlong(const at::Tensor& t, int64_t axis, const at::Tensor& lengths) {
  const at::Tensor moved = t.movedim(axis, 1);
  const at::Tensor positions = at::arange(moved.size(1), at::kLong).unsqueeze(0);
  at::Tensor past = positions >= lengths.to(at::kLong).unsqueeze(1);  // [n, length]
  for (int64_t d = 2; d < moved.dim(); ++d) past = past.unsqueeze(-1);
  const at::Tensor padded = moved.masked_select(past.expand(moved.sizes()));
  if (padded.numel() == 0) return std::nullopt;
  const at::Tensor as_double = padded.to(at::kDouble);
  const double first = as_double[0].item<double>();
  if (!at::all(as_double == first).item<bool>()) return std::nullopt;
  return first;
}

// The value most positions past each sample's length hold along `axis`.
double commonPadding(const at::Tensor& t, int64_t axis, const at::Tensor& lengths) {
  const at::Tensor moved = t.movedim(axis, 1);
  at::Tensor past = at::arange(moved.size(1), at::kLong).unsqueeze(0) >= lengths.to(at::kLong).unsqueeze(1);
  for (int64_t d = 2; d < moved.dim(); ++d) past = past.unsqueeze(-1);
  const at::Tensor padded = moved.masked_select(past.expand(moved.sizes())).to(at::kDouble);
  if (padded.numel() == 0) return 0;
  return std::get<0>(at::mode(padded)).item<double>();
}

// The axes a lengths tensor or a mask may pad, by their size: axis d >= 1 of
// each sample tensor (samples along dimension 0, not the ids), in the
// batch's order. Made once, so that each candidate for the lengths looks
// only at the axes as long as its largest value: a batch of 20 000 small
// per-sample tensors took init 82 s when each candidate went over every
// tensor (probe 36). Each check of an axis costs a few tensor operations;
// past kMaxChecks the search stops, and a doubt says so.
struct PaddableAxes {
  struct Axis {
    std::size_t tensor;  // position in the order the axes were found
    const std::string* name;
    const at::Tensor* t;
    int d;
  };
  static constexpr std::size_t kMaxChecks = 20'000;
  std::unordered_map<std::int64_t, std::vector<Axis>> by_size;
  std::size_t checks = 0;

  PaddableAxes(const NamedTensors& b, const InferredCase& c) {
    std::size_t position = 0;
    for (const SampleAxis& a : c.sample_axes) {
      const at::Tensor* t = perSampleTensor(b, a);
      if (!t || a.tensor == c.ids) continue;
      for (int d = 1; d < t->dim(); ++d) by_size[t->size(d)].push_back({position, &a.tensor, t, d});
      ++position;
    }
  }
  bool exhausted() const { return checks > kMaxChecks; }
};

// The sample tensors that `lengths` pads: an axis as long as its largest
// value, uniform past each sample's length (the first such axis of each).
std::vector<SequenceTensor> paddedBy(PaddableAxes& axes, const at::Tensor& lengths, std::int64_t length,
                                     const std::string& except) {
  std::vector<SequenceTensor> found;
  const auto of_size = axes.by_size.find(length);
  if (of_size == axes.by_size.end()) return found;
  std::size_t done = SIZE_MAX;  // the tensor whose padded axis was found
  for (const PaddableAxes::Axis& a : of_size->second) {
    if (a.tensor == done || *a.name == except) continue;
    if (++axes.checks > PaddableAxes::kMaxChecks) break;
    if (auto pad = paddingAlong(*a.t, a.d, lengths)) {
      found.push_back({*a.name, a.d, *pad});
      done = a.tensor;
    }
  }
  return found;
}

// A sample tensor along whose axis 1 the sequence runs too, but which holds
// other values past some sample's length (a token where padding should be,
// the very value that may be the bug): cut with the others all the same, so
// that shortening the window keeps every tensor the same length, padded
// with the value most of its padding holds. Said in the notes.
void joinSameLengthTensors(const NamedTensors& b, const at::Tensor& lengths, std::int64_t length, InferredCase& c) {
  for (const SampleAxis& a : c.sample_axes) {
    const at::Tensor* t = perSampleTensor(b, a);
    const bool taken = std::any_of(c.sequence.begin(), c.sequence.end(),
                                   [&](const SequenceTensor& s) { return s.tensor == a.tensor; });
    if (!t || taken || a.tensor == c.ids || a.tensor == c.lengths || t->dim() < 2 || t->size(1) != length) continue;
    const double pad = commonPadding(*t, 1, lengths);
    c.sequence.push_back({a.tensor, 1, pad});
    c.doubts.push_back("'" + a.tensor + "' holds other values than " + number(pad) +
                       " past some sample's length: cut with the other sequence tensors all the same, padded with " +
                       number(pad) + " (edit sequence.tensors and padding if that is wrong)");
  }
}

bool preferred(const std::string& name, const std::string& part, std::size_t found, const std::string& best_name,
               std::size_t best_found) {
  const bool a = named(leafName(name), part), b = named(leafName(best_name), part);
  return a != b ? a : found > best_found;
}

// A lengths tensor, only when some tensor is padded past its lengths.
bool findLengths(const NamedTensors& b, InferredCase& c, PaddableAxes& axes) {
  std::string best;
  std::vector<SequenceTensor> best_padded;
  std::vector<std::string> fits;
  for (const SampleAxis& a : c.sample_axes) {
    const at::Tensor* t = perSampleTensor(b, a);
    if (!t || a.tensor == c.ids || !perSampleInteger(*t, c.samples) || t->min().item<std::int64_t>() < 0) continue;
    const std::vector<SequenceTensor> padded = paddedBy(axes, *t, t->max().item<std::int64_t>(), a.tensor);
    if (padded.empty()) continue;
    fits.push_back(a.tensor);
    if (best.empty() || preferred(a.tensor, "len", padded.size(), best, best_padded.size()))
      best = a.tensor, best_padded = padded;
  }
  if (best.empty()) return false;
  c.lengths = best;
  c.sequence = best_padded;
  joinSameLengthTensors(b, *b.find(best), b.find(best)->max().item<std::int64_t>(), c);
  fits.erase(std::remove(fits.begin(), fits.end(), best), fits.end());
  if (!fits.empty())
    c.doubts.push_back("lengths: also possible: " + joined(fits) +
                       " (edit sequence.lengths); the values pass leaves their values as they are");
  c.values_kept = fits;
  return true;
}

// Each row a prefix of ones, some row shorter than the whole, some row not
// empty: a right-padded mask. A row of zeros is an empty text (length 0),
// often the very sample that fails, so it does not disqualify the mask.
bool prefixMask(const at::Tensor& m) {
  if (m.dim() != 2 || m.size(1) < 2 || !at::isIntegralType(m.scalar_type(), /*includeBool=*/true)) return false;
  if (!at::logical_or(m.eq(0), m.eq(1)).all().item<bool>()) return false;
  const at::Tensor on = m.ne(0), count = on.sum(1, true);
  const at::Tensor prefix = at::arange(m.size(1), at::kLong).unsqueeze(0) < count;
  return at::equal(on, prefix) && count.max().item<std::int64_t>() > 0 && count.min().item<std::int64_t>() < m.size(1);
}

// Without a lengths tensor: an attention mask gives the lengths, when its
// name says so or some tensor is padded past them.
bool findMask(const NamedTensors& b, InferredCase& c, PaddableAxes& axes) {
  std::string best;
  std::vector<SequenceTensor> best_padded;
  for (const SampleAxis& a : c.sample_axes) {
    const at::Tensor* t = perSampleTensor(b, a);
    if (!t) continue;
    if (!prefixMask(*t)) {
      if (named(leafName(a.tensor), "mask") && t->dim() == 2)
        c.doubts.push_back("'" + a.tensor +
                           "' is named like a mask but is not a right-padded 0/1 integer or bool mask (each row "
                           "ones then zeros, some row shorter than the whole): not used for the samples' lengths");
      continue;
    }
    const at::Tensor lengths = t->ne(0).sum(1);
    std::vector<SequenceTensor> padded = paddedBy(axes, lengths, t->size(1), a.tensor);
    if (padded.empty() && !named(leafName(a.tensor), "mask")) continue;
    if (best.empty() || preferred(a.tensor, "mask", padded.size(), best, best_padded.size()))
      best = a.tensor, best_padded = std::move(padded);
  }
  if (best.empty()) return false;
  c.mask = best;
  c.sequence = best_padded;
  c.sequence.insert(c.sequence.begin(), SequenceTensor{best, 1, 0});
  joinSameLengthTensors(b, b.find(best)->ne(0).sum(1), b.find(best)->size(1), c);
  return true;
}

bool oneHot(const at::Tensor& t) {
  return t.dim() == 2 && at::logical_or(t.eq(0), t.eq(1)).all().item<bool>() && t.ne(0).sum(1).eq(1).all().item<bool>();
}

// Without lengths: the axis a window may be cut along, if any: integer
// [B, T] tensors of 8 positions or more (tokens; not one-hot, and not a few
// categorical columns such as a store and a promotion id, whose cut is
// another feature set, not a shorter sequence), and float axes of 64 or
// more (a waveform, frames); short float axes are features or channels.
std::optional<int> windowAxis(const at::Tensor& t) {
  constexpr std::int64_t kShortestTokens = 8;
  if (t.dim() == 2 && isInteger(t) && !oneHot(t))
    return t.size(1) >= kShortestTokens ? std::optional<int>(1) : std::nullopt;
  if (!at::isFloatingType(t.scalar_type()) || t.dim() < 2 || t.dim() > 3) return std::nullopt;
  const int axis = t.dim() == 3 && t.size(2) > t.size(1) ? 2 : 1;
  if (t.size(axis) < 64) return std::nullopt;
  return axis;
}

void findWindow(const NamedTensors& b, InferredCase& c) {
  std::map<std::int64_t, std::vector<SequenceTensor>> by_length;
  for (const SampleAxis& a : c.sample_axes) {
    const at::Tensor* t = perSampleTensor(b, a);
    if (!t || a.tensor == c.ids) continue;
    if (auto axis = windowAxis(*t)) by_length[t->size(*axis)].push_back({a.tensor, *axis, 0});
  }
  for (const auto& [length, tensors] : by_length)
    if (tensors.size() > c.sequence.size()) c.sequence = tensors;
}

// ---------------------------------------------------------------- refusals

// The dict, list or tuple a path is in: "[1]" of "[1][0]", "" at the top.
std::string parentPath(const std::string& path) {
  const auto at = path.find_last_of(".[");
  return at == std::string::npos ? std::string() : path.substr(0, at);
}

// The batch's 1-D tensors by their length, in the batch's order: each
// refusal below asks for "a 1-D tensor of length n", once per integer
// vector, which a search of every tensor made quadratic (probe 36).
struct VectorsByLength {
  std::map<std::int64_t, std::vector<std::size_t>> positions;
  std::map<std::pair<std::int64_t, std::string>, std::size_t> first_in_parent;  // (length, parentPath): first
  explicit VectorsByLength(const NamedTensors& b) {
    for (std::size_t j = 0; j < b.tensors.size(); ++j) {
      if (b.tensors[j].dim() != 1) continue;
      positions[b.tensors[j].size(0)].push_back(j);
      first_in_parent.emplace(std::pair{b.tensors[j].size(0), parentPath(b.names[j])}, j);
    }
  }
};

// Whether the integer vector b.tensors[i] starts at 0, never goes down and
// ends within another 1-D tensor of the batch of another length: where each
// sample's values start in that flat tensor.
bool startsEachSampleOfAnother(const NamedTensors& b, const VectorsByLength& vectors, std::size_t i) {
  const at::Tensor& t = b.tensors[i];
  if (t[0].item<std::int64_t>() != 0 || !t.diff().ge(0).all().item<bool>()) return false;
  const std::int64_t last = t[-1].item<std::int64_t>();
  for (auto at = vectors.positions.lower_bound(last); at != vectors.positions.end(); ++at)
    if (at->first != t.size(0)) return true;  // at most two lengths are looked at
  return false;
}

// The name of a 1-D tensor whose length is the sum of b.tensors[i] (a
// per-sample integer vector), when that is not the batch's size: the
// samples' values joined end to end. The vector is named as lengths, or
// lies beside the joined values in their dict or tuple (a collate's
// `(targets, target_lengths)`, which names nothing).
std::optional<std::string> valuesJoinedBy(const NamedTensors& b, const VectorsByLength& vectors, std::size_t i) {
  const at::Tensor& t = b.tensors[i];
  const std::string leaf = lower(leafName(b.names[i]));
  const bool named_as_lengths = leaf.find("len") != std::string::npos || leaf.find("count") != std::string::npos;
  if (t.min().item<std::int64_t>() < 0) return std::nullopt;
  const std::int64_t total = t.sum().item<std::int64_t>();
  const auto of_total = vectors.positions.find(total);
  if (total == t.size(0) || of_total == vectors.positions.end()) return std::nullopt;
  // Of another length than t's, so never t itself.
  if (named_as_lengths) return b.names[of_total->second.front()];
  const auto beside = vectors.first_in_parent.find({total, parentPath(b.names[i])});
  if (beside == vectors.first_in_parent.end()) return std::nullopt;
  return b.names[beside->second];
}

// Layouts whose samples are ranges of one axis: no sample axis to cut.
void refuseRangeLayouts(const NamedTensors& b, const fs::path& file) {
  const VectorsByLength vectors(b);
  for (std::size_t i = 0; i < b.names.size(); ++i) {
    const at::Tensor& t = b.tensors[i];
    const std::string leaf = lower(leafName(b.names[i]));
    if (!isInteger(t) || t.dim() != 1 || t.numel() < 2) continue;
    if (leaf.find("cu_seqlens") != std::string::npos || leaf == "cu_seq_lens" || leaf == "offsets_packed")
      throw BadInputError(
          file.string() + ": '" + b.names[i] +
          "' marks packed sequences (sample i is positions cu_seqlens[i] to cu_seqlens[i+1] of one axis), which "
          "minrepro cannot cut into samples: save the batch padded, one row per sample with a lengths tensor, or "
          "write case.yaml by hand with samples.tensors naming only tensors that have a sample axis");
    // A tuple's entry as Python reaches it: batch[1][0].
    const auto expr = [](const std::string& name) { return name.front() == '[' ? "batch" + name : name; };
    if (const auto joined_values = valuesJoinedBy(b, vectors, i))
      throw BadInputError(
          file.string() + ": '" + *joined_values + "' holds the samples' values joined end to end, sample i's " +
          "being the next " + b.names[i] + "[i] of them (CTC's concatenated targets), which minrepro cannot cut " +
          "into samples: save them as a list of one tensor per sample (list(" + expr(*joined_values) + ".split(" +
          expr(b.names[i]) + ".tolist()))), or padded into one [samples, length] tensor beside " + b.names[i] +
          ", and join them in the step (torch.cat). A case.yaml that names only the other tensors under " +
          "samples.tensors keeps every sample's values in every candidate");
    if (leaf.find("offset") != std::string::npos && startsEachSampleOfAnother(b, vectors, i))
      throw BadInputError(
          file.string() + ": '" + b.names[i] + "' gives where each sample's values start in one flat tensor (" +
          "EmbeddingBag's offsets: sample i is flat[offsets[i]:offsets[i+1]]), which minrepro cannot cut into "
          "samples: save each sample's values padded into one [samples, length] tensor with a lengths tensor "
          "beside it (or a list of one tensor per sample), and pack them in the step (torch.cat, and the offsets "
          "from the lengths). A case.yaml that names only the other tensors under samples.tensors keeps the flat "
          "values whole, and the offsets cut with the samples stop pointing at their values");
    if (leaf == "batch" || leaf == "batch_vector" || leaf == "node_graph") {
      const at::Tensor sorted = t.diff().ge(0).all();
      if (sorted.item<bool>() && t[0].item<std::int64_t>() == 0)
        throw BadInputError(
            file.string() + ": '" + b.names[i] + "' assigns " + std::to_string(t.numel()) + " nodes to " +
            std::to_string(t.max().item<std::int64_t>() + 1) +
            " graphs (a graph batch), which minrepro cannot cut into samples: save one dict of tensors per graph in "
            "a list, as your dataset returns them before they are joined (with PyTorch Geometric: "
            "[g.to_dict() for g in batch.to_data_list()]), and join them in the step (your collate function, or "
            "Batch.from_data_list). A case.yaml that names only the per-graph tensors (y) under samples.tensors "
            "keeps the nodes and edges whole, and cannot find the graph that fails");
    }
  }
}

}  // namespace

InferredCase inferCase(const fs::path& file) {
  const NamedTensors b = readBatchFile(file);
  if (b.tensors.empty())
    throw BadInputError(file.string() +
                        ": the batch holds no tensor; save the batch your step is given, with its "
                        "tensors");
  refuseRangeLayouts(b, file);
  InferredCase c;
  for (std::size_t i = 0; i < b.names.size(); ++i)
    c.tensors.push_back({b.names[i], dtypeName(b.tensors[i].scalar_type()), b.tensors[i].sizes().vec(), "", ""});
  c.samples = batchSize(b);
  if (c.samples < 0)
    throw BadInputError(file.string() +
                        ": no entry of the batch has a dimension to take samples from (all are scalars); write "
                        "case.yaml by hand (see minrepro init --help)");
  if (const std::string what = samplesPastTheirData(c.samples, b); !what.empty())
    throw BadInputError(file.string() + ": " + what);
  assignRoles(*b.tree, b, c);
  findIds(b, c);
  PaddableAxes axes(b, c);
  if (!findLengths(b, c, axes) && !findMask(b, c, axes)) findWindow(b, c);
  if (axes.exhausted())
    c.doubts.push_back(
        "the batch has too many tensors to pair each with each in the search for a lengths tensor "
        "or a mask (more than " +
        std::to_string(PaddableAxes::kMaxChecks) +
        " checks): the search stopped there; name them under sequence if it missed them");
  const auto drop = [&](const std::string& name, const char* role) {
    if (name.empty()) return;
    c.sample_axes.erase(std::remove_if(c.sample_axes.begin(), c.sample_axes.end(),
                                       [&](const SampleAxis& a) { return a.tensor == name; }),
                        c.sample_axes.end());
    for (auto& t : c.tensors)
      if (t.name == name) t.role = role;
  };
  drop(c.ids, "ids");  // ids and lengths go with the samples (samples.ids, sequence.lengths)
  drop(c.lengths, "lengths");
  for (auto& t : c.tensors)
    if (t.name == c.mask) t.role = "mask";
  return c;
}

namespace {

std::string sampleLine(const InferredCase& c) {
  // In the batch's own order, the ids and the lengths among the others.
  std::vector<std::string> first, second;
  std::unordered_multimap<std::string, int> axes;  // by name: one pass, not one a tensor
  for (const SampleAxis& a : c.sample_axes) axes.emplace(a.tensor, a.axis);
  for (const auto& t : c.tensors) {
    if (t.name == c.ids || t.name == c.lengths) {
      first.push_back(t.name);
      continue;
    }
    const auto [from, to] = axes.equal_range(t.name);
    for (auto a = from; a != to; ++a) (a->second == 0 ? first : second).push_back(t.name);
  }
  std::string line = std::to_string(c.samples) + " samples";
  std::vector<std::string> parts;
  if (!first.empty()) parts.push_back("along dimension 0 of: " + joined(first));
  if (!second.empty()) parts.push_back("along dimension 1 (sequence-first) of: " + joined(second));
  if (!c.sample_lists.empty()) {
    std::vector<std::string> lists;
    for (const auto& l : c.sample_lists) lists.push_back(l == kRootPath ? "the batch itself" : l);
    parts.push_back("one entry per sample in: " + joined(lists));
  }
  for (std::size_t i = 0; i < parts.size(); ++i)
    line += (i ? "; " : parts[i].rfind("along", 0) == 0 ? " " : ", ") + parts[i];
  return line;
}

std::string sequenceLine(const InferredCase& c) {
  if (c.sequence.empty())
    return "no sequence axis (no tensor is padded past a lengths tensor or a mask, and none is a sequence of "
           "tokens or of 64 or more steps)";
  std::string pads;
  for (const SequenceTensor& s : c.sequence)
    pads += (pads.empty() ? "" : ", ") + s.tensor + " axis " + std::to_string(s.axis) + " pad " + number(s.pad);
  if (!c.lengths.empty())
    return "lengths: '" + c.lengths + "' (the tensors padded past each sample's length: " + pads + ")";
  if (!c.mask.empty())
    return "lengths from the mask '" + c.mask + "' (each row's ones; padded past them: " + pads + ")";
  return "no lengths tensor or mask: a window of " + pads + " that the lengths pass may cut (padding 0)";
}

}  // namespace

std::vector<std::string> describeInference(const InferredCase& c) {
  std::vector<std::string> lines{sampleLine(c)};
  std::vector<std::string> whole;
  for (const InferredTensor& t : c.tensors)
    if (t.role == "whole") whole.push_back(t.name + " (" + t.reason + ")");
  if (!whole.empty()) lines.push_back("kept whole in every candidate: " + joined(whole));
  for (const InferredTensor& t : c.tensors)
    if (t.role == "sample" && !t.reason.empty()) lines.push_back("'" + t.name + "': " + t.reason);
  lines.push_back(c.ids.empty() ? "no sample ids found (a 1-D integer tensor named sample_id, ids, idx or NAME_id, or "
                                  "such a field of every per-sample record, "
                                  "with one unique value per sample): kept samples are numbered by their position "
                                  "in the batch"
                                : "sample ids: '" + c.ids + "' (the report names kept samples by them)");
  lines.push_back(sequenceLine(c));
  if (!c.kept_values.empty()) {
    constexpr std::size_t kNamed = 12;  // a list of 500 words is not read line by line
    std::vector<std::string> named(c.kept_values.begin(),
                                   c.kept_values.begin() + std::min(kNamed, c.kept_values.size()));
    if (c.kept_values.size() > kNamed)
      named.push_back("and " + std::to_string(c.kept_values.size() - kNamed) + " more");
    lines.push_back("kept as they are (not tensors): " + joined(named));
  }
  for (const auto& d : c.doubts) lines.push_back(d);
  return lines;
}

void applyInference(const InferredCase& inferred, CaseConfig& config) {
  config.sample_axes = inferred.sample_axes;
  config.sample_lists = inferred.sample_lists;
  config.sample_ids = inferred.ids;
  for (const std::string& name : inferred.values_kept)
    if (std::find(config.values.exclude.begin(), config.values.exclude.end(), name) == config.values.exclude.end())
      config.values.exclude.push_back(name);
  if (!config.sequence.tensors.empty()) return;
  config.sequence.tensors = inferred.sequence;
  config.sequence.lengths = inferred.lengths;
  config.sequence.mask = inferred.mask;
}

void completeCase(CaseConfig& config) {
  if (!config.infer_samples) return;
  const InferredCase inferred = inferCase(config.batch);
  applyInference(inferred, config);
  config.inference_notes = describeInference(inferred);
  config.infer_samples = false;
}

}  // namespace minrepro
