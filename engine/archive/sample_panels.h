// The kept samples as REPORT.html shows them (engine/archive/report_html.h):
// for each tensor with a sample axis, the minimal case's samples (as the
// candidate has them: cut window, reduced values) beside up to two samples
// of the original batch that the reduction cut, with each value that lies
// outside what the rest of the original batch spans marked. How a tensor is
// drawn follows from its per-sample shape and dtype (SampleKind).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "harness/batch_store.h"

namespace minrepro {

enum class SampleKind {
  Scalar,   // one value per sample (a target, a label, a length)
  Tokens,   // integers in a row (token ids)
  Row,      // a few floats (a tabular row): the range is per column
  Signal,   // a long 1-D float series (audio-like): a waveform
  Image,    // [C,H,W] with C of 1 or 3, or [H,W]: a thumbnail
  Lengths,  // the case's sequence lengths: bars
  Other,    // anything else: its first values
};
const char* sampleKindName(SampleKind kind);

struct SampleRow {
  std::string label;  // "kept: id 137", "cut: id 136"
  bool kept = false;
  std::vector<double> values;         // at most kMaxShown (an image: the whole sample, up to kMaxImage)
  std::vector<std::size_t> outliers;  // positions outside the rest's range
};

struct SamplePanel {
  std::string tensor;
  TensorInfo info;                         // of the minimal batch: dtype, shape, strides, storage sharing
  std::vector<std::int64_t> sample_shape;  // one sample's shape
  SampleKind kind = SampleKind::Other;
  bool integral = false;
  std::vector<SampleRow> rows;
  std::string range;  // "the rest of the batch spans 0 .. 3"; "" when unknown
  ValueRange rest;    // that range: one pair, or one per position of a row
  bool per_position = false;
};

inline constexpr std::size_t kMaxShown = 64;       // values of a row shown
inline constexpr std::size_t kMaxImage = 1 << 16;  // values of an image read (then drawn at most 32x32)
inline constexpr std::size_t kMaxSignal = 4096;    // values of a waveform read

// What sets the kept samples apart that the integer contrast
// (engine/archive/minimal_batch_contrast.h) does not say: for each float
// tensor, the kept values outside what the rest of the batch spans ("`tabular`:
// the kept sample id 45 holds 10 at position 0, outside 0 .. 9 there").
std::vector<std::string> outlierLines(const std::vector<SamplePanel>& panels);

// The panels for the minimal batch file `minimal_batch` (the kept samples,
// whose indices into `original` are `kept`), at most `max_panels`.
std::vector<SamplePanel> collectSamplePanels(const CaseConfig& config, const BatchStore& original,
                                             const std::filesystem::path& minimal_batch,
                                             const std::vector<std::int64_t>& kept, std::size_t max_panels = 12);

}  // namespace minrepro
