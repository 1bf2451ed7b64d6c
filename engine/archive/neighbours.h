// Neighbour cases (docs/method.md, "Neighbour cases"): batches next to the minimal one that a fix
// must also pass: the minimal batch plus one more sample, the shortest and
// the longest entries of the original, and the last batch-sized slice.
// Which samples each holds is decided here (no LibTorch); shrink writes them
// with BatchStore::writeSubset into the archive's neighbours/ folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minrepro {

struct NeighbourCase {
  std::string name;                       // "plus_one"
  std::string file;                       // "neighbours/plus_one.pt", inside the archive
  std::vector<std::int64_t> samples;      // indices into the original batch, ascending
  std::vector<std::int64_t> ids;          // their sample ids
  std::optional<std::int64_t> processed;  // what a correct run must process; absent if unknown
};

struct NeighbourPlan {
  std::vector<NeighbourCase> cases;
  std::vector<std::string> skipped;  // "shortest, longest: the case declares no length tensor"
};

// `minimal`: indices of the minimal batch in the original (ascending), of
// `original` samples. `lengths`: per-sample lengths from a declared length
// tensor, or null when the case has none (the shortest and longest are then
// skipped, and the plan says so). Fills name, file and samples.
NeighbourPlan planNeighbours(std::int64_t original, const std::vector<std::int64_t>& minimal,
                             const std::vector<std::int64_t>* lengths = nullptr);

}  // namespace minrepro
