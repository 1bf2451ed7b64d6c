#include "engine/archive/sample_panels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace minrepro {

namespace fs = std::filesystem;

const char* sampleKindName(SampleKind kind) {
  switch (kind) {
    case SampleKind::Scalar:
      return "scalar";
    case SampleKind::Tokens:
      return "tokens";
    case SampleKind::Row:
      return "row";
    case SampleKind::Signal:
      return "signal";
    case SampleKind::Image:
      return "image";
    case SampleKind::Lengths:
      return "lengths";
    case SampleKind::Other:
      return "other";
  }
  return "other";
}

namespace {

bool integralDtype(const std::string& dtype) {
  return dtype.rfind("int", 0) == 0 || dtype.rfind("uint", 0) == 0 || dtype == "bool";
}

std::vector<std::int64_t> sampleShape(const TensorInfo& t) {
  std::vector<std::int64_t> shape = t.shape;
  shape.erase(shape.begin() + t.sample_axis);
  return shape;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

SampleKind kindOf(const CaseConfig& config, const TensorInfo& t, const std::vector<std::int64_t>& shape) {
  if (t.name == config.sequence.lengths) return SampleKind::Lengths;
  const bool integral = integralDtype(t.dtype);
  const std::int64_t n = numel(shape);
  if (n == 1) return SampleKind::Scalar;
  const bool image_like = (shape.size() == 3 && (shape[0] == 1 || shape[0] == 3) && shape[1] >= 4 && shape[2] >= 4) ||
                          (shape.size() == 2 && shape[0] >= 8 && shape[1] >= 8 && !integral);
  if (image_like) return SampleKind::Image;
  if (shape.size() == 1 && integral) return SampleKind::Tokens;
  if (shape.size() == 1 && n <= static_cast<std::int64_t>(kMaxShown)) return SampleKind::Row;
  if (shape.size() == 1) return SampleKind::Signal;
  return SampleKind::Other;
}

std::size_t valuesToRead(SampleKind kind) {
  return kind == SampleKind::Image ? kMaxImage : kind == SampleKind::Signal ? kMaxSignal : kMaxShown;
}

// Two samples the reduction cut, next to the first kept one: what a sample
// that is not the culprit looks like.
std::vector<std::int64_t> cutNeighbours(std::int64_t samples, const std::vector<std::int64_t>& kept) {
  std::vector<std::int64_t> out;
  if (kept.empty()) return out;
  for (std::int64_t d = 1; d < samples && out.size() < 2; ++d)
    for (std::int64_t s : {kept.front() - d, kept.front() + d})
      if (s >= 0 && s < samples && out.size() < 2 && std::find(kept.begin(), kept.end(), s) == kept.end())
        out.push_back(s);
  std::sort(out.begin(), out.end());
  return out;
}

// A value the values pass set to its tensor's trivial value (0 unless
// case.yaml says otherwise) is the reduction's, not the culprit: not marked.
void markOutliers(SampleRow& row, const ValueRange& range, bool per_position, double trivial) {
  if (range.lo.empty()) return;
  for (std::size_t i = 0; i < row.values.size(); ++i) {
    const std::size_t j = per_position ? i : 0;
    if (j >= range.lo.size()) break;
    const double v = row.values[i];
    // NaN and inf are outside every range (a comparison with NaN is false).
    if ((!std::isfinite(v) || v < range.lo[j] || v > range.hi[j]) && !(row.kept && v == trivial))
      row.outliers.push_back(i);
  }
}

std::string describeRange(const ValueRange& range, bool per_position) {
  if (range.lo.empty()) return "";
  if (per_position) return "marked: a value outside what its column spans in the rest of the batch";
  auto text = [](double x) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", x);
    return std::string(buffer);
  };
  return "the rest of the batch spans " + text(range.lo[0]) + " .. " + text(range.hi[0]) +
         "; marked: values outside it";
}

}  // namespace

std::vector<SamplePanel> collectSamplePanels(const CaseConfig& config, const BatchStore& original,
                                             const fs::path& minimal_batch, const std::vector<std::int64_t>& kept,
                                             std::size_t max_panels) {
  CaseConfig minimal_config = config;
  minimal_config.batch = minimal_batch;
  const auto minimal = BatchStore::open(minimal_config);
  const std::vector<std::int64_t> ids = original.sampleIds();
  const std::vector<std::int64_t> cut = cutNeighbours(original.sampleCount(), kept);
  std::vector<SamplePanel> panels;
  const std::vector<TensorInfo> as_original = original.describe();
  for (const TensorInfo& t : minimal->describe()) {
    if (!t.has_sample_axis || t.name == config.sample_ids || panels.size() >= max_panels) continue;
    SamplePanel p{t.name, t, sampleShape(t), SampleKind::Other, integralDtype(t.dtype), {}, "", {}, false};
    // The kind is the original's: a token row cut to one position is still tokens.
    const auto before = std::find_if(as_original.begin(), as_original.end(),
                                     [&](const TensorInfo& o) { return o.name == t.name && o.has_sample_axis; });
    p.kind =
        before == as_original.end() ? kindOf(config, t, p.sample_shape) : kindOf(config, *before, sampleShape(*before));
    const bool per_position = p.kind == SampleKind::Row;
    // A kept length is the window the reduction cut (shorter than any is no clue); a waveform is drawn, not ranged.
    const bool ranged = p.kind != SampleKind::Signal && p.kind != SampleKind::Lengths;
    const ValueRange range = ranged ? original.restRange(t.name, kept, per_position) : ValueRange{};
    p.range = describeRange(range, per_position);
    p.rest = range;
    p.per_position = per_position;
    const auto set_trivial = config.values.trivial.find(t.name);
    const double trivial = set_trivial == config.values.trivial.end() ? 0.0 : set_trivial->second;
    for (std::size_t i = 0; i < kept.size() && i < 4; ++i) {
      SampleRow row{"kept: id " + std::to_string(ids[static_cast<std::size_t>(kept[i])]),
                    true,
                    minimal->sampleValues(t.name, static_cast<std::int64_t>(i), valuesToRead(p.kind)),
                    {}};
      markOutliers(row, range, per_position, trivial);
      p.rows.push_back(std::move(row));
    }
    for (std::int64_t s : cut) {
      SampleRow row{"cut: id " + std::to_string(ids[static_cast<std::size_t>(s)]),
                    false,
                    original.sampleValues(t.name, s, valuesToRead(p.kind)),
                    {}};
      markOutliers(row, range, per_position, trivial);
      p.rows.push_back(std::move(row));
    }
    panels.push_back(std::move(p));
  }
  return panels;
}

std::vector<std::string> outlierLines(const std::vector<SamplePanel>& panels) {
  constexpr std::size_t kListed = 4;
  std::vector<std::string> lines;
  for (const SamplePanel& p : panels) {
    if (p.integral) continue;  // the integer contrast says those
    for (const SampleRow& row : p.rows) {
      if (!row.kept || row.outliers.empty()) continue;
      std::string line = "`" + p.tensor + "`: sample " + row.label.substr(6) + " holds ";
      for (std::size_t k = 0; k < row.outliers.size() && k < kListed; ++k) {
        const std::size_t i = row.outliers[k], j = p.per_position ? i : 0;
        char text[96];
        std::snprintf(text, sizeof text, "%s%.6g at position %zu (the rest spans %.6g .. %.6g there)", k ? ", " : "",
                      row.values[i], i, p.rest.lo[j], p.rest.hi[j]);
        line += text;
      }
      if (row.outliers.size() > kListed) line += " and " + std::to_string(row.outliers.size() - kListed) + " more";
      lines.push_back(line);
    }
  }
  return lines;
}

}  // namespace minrepro
