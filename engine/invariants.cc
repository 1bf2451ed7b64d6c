#include "engine/invariants.h"

namespace minrepro {

namespace {

const TensorInfo* findTensor(const std::vector<TensorInfo>& tensors, const std::string& name) {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::string> sampleAxisDisagreement(const std::vector<TensorInfo>& candidate) {
  const TensorInfo* first = nullptr;
  for (const auto& t : candidate) {
    if (!t.has_sample_axis) continue;
    const auto n = t.shape[static_cast<std::size_t>(t.sample_axis)];
    if (!first)
      first = &t;
    else if (n != first->shape[static_cast<std::size_t>(first->sample_axis)])
      return "sample counts disagree: " + first->name + " has " +
             std::to_string(first->shape[static_cast<std::size_t>(first->sample_axis)]) + ", " + t.name + " has " +
             std::to_string(n);
  }
  return std::nullopt;
}

// Transposed and otherwise strided tensors are one class: dropping samples
// can turn one name into the other (a [1, L, F] slice of a transposed batch
// looks "transposed"), while the kernels only care whether it is contiguous
// in the default or the channels-last format.
std::string layoutClass(const std::string& layout) {
  return layout == "contiguous" || layout == "channels_last" ? layout : "non-contiguous";
}

}  // namespace

std::optional<std::string> brokenInvariant(const Invariants& invariants, const std::vector<TensorInfo>& original,
                                           const std::vector<TensorInfo>& candidate) {
  for (const auto& t : candidate) {
    const TensorInfo* o = findTensor(original, t.name);
    if (!o) return t.name + ": not in the original batch";
    if (invariants.dtype && t.dtype != o->dtype) return t.name + ": dtype " + o->dtype + " became " + t.dtype;
    // A non-contiguous tensor cut so far that it counts as contiguous (a
    // transposed tensor with one row left) takes the contiguous kernel paths:
    // it is not the same input any more.
    // One element or none has no layout a kernel could tell apart (a strided
    // 1-D target cut to one sample is as contiguous as it can be).
    std::int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    if (invariants.layout && numel > 1 && layoutClass(t.layout) != layoutClass(o->layout))
      return t.name + ": layout " + o->layout + " became " + t.layout;
  }
  if (invariants.sample_axis) return sampleAxisDisagreement(candidate);
  return std::nullopt;
}

}  // namespace minrepro
