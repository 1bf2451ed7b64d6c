// "What sets the minimal batch apart" (issue 5, docs/method.md, "What sets the minimal batch apart"): the kept
// samples' values of each small per-sample integer tensor against the rest
// of the original, whether they are the original's last samples (a last
// incomplete batch), and their ids. No LibTorch: values come in as vectors.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "reducers/reducer.h"

namespace minrepro {

// The values of an integer tensor with a sample axis, `row` per sample (1 for
// a 1-D tensor; a [N, L] token tensor has rows of L), samples in order.
struct SampleValues {
  std::string name;
  std::vector<std::int64_t> values;
  std::size_t row = 1;
  // When not empty, the sample of each value instead of `row`: a field of
  // the records of a per-sample list ("[1][*].labels", a detection
  // target's k labels per image, k varying).
  std::vector<std::int64_t> owner;
};

// "-100, 0..3": distinct values, consecutive runs as ranges; at most
// `max_items` items, then "... (N distinct values in [lo, hi])".
std::string formatValueSet(const std::set<std::int64_t>& values, std::size_t max_items = 16);

// Report lines (no leading "- "). `kept`: indices of the minimal batch in
// the original, ascending; `kept_ids` their sample ids.
std::vector<std::string> describeApart(std::int64_t original, const std::vector<std::int64_t>& kept,
                                       const std::vector<std::int64_t>& kept_ids,
                                       const std::vector<SampleValues>& tensors);

// What the passes beyond samples kept (report lines): the sequence window,
// shortened sample lengths, the branches needed and those switched off, and
// how many values are still non-trivial.
std::vector<std::string> describeReduction(const CaseView& view, const Selection& minimal,
                                           const std::vector<std::int64_t>& sample_ids);

}  // namespace minrepro
