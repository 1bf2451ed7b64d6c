#include "engine/archive/neighbours.h"

#include <algorithm>
#include <set>

namespace minrepro {

namespace {

NeighbourCase named(const std::string& name, std::vector<std::int64_t> samples) {
  std::sort(samples.begin(), samples.end());
  return {name, "neighbours/" + name + ".pt", std::move(samples), {}, std::nullopt};
}

}  // namespace

NeighbourPlan planNeighbours(std::int64_t original, const std::vector<std::int64_t>& minimal,
                             const std::vector<std::int64_t>* lengths) {
  NeighbourPlan plan;
  const std::set<std::int64_t> kept(minimal.begin(), minimal.end());
  // The next original sample not in the minimal set: after its last sample,
  // wrapping around to the start when the minimal set ends the batch.
  std::optional<std::int64_t> next;
  const std::int64_t after = minimal.empty() ? 0 : *std::max_element(minimal.begin(), minimal.end()) + 1;
  for (std::int64_t k = 0; k < original && !next; ++k)
    if (const std::int64_t i = (after + k) % original; !kept.count(i)) next = i;
  if (next) {
    std::vector<std::int64_t> plus(minimal);
    plus.push_back(*next);
    plan.cases.push_back(named("plus_one", std::move(plus)));
  } else {
    plan.skipped.push_back("plus_one: the minimal batch holds every sample of the original");
  }

  if (lengths && static_cast<std::int64_t>(lengths->size()) == original && original > 0) {
    const auto shortest = std::min_element(lengths->begin(), lengths->end()) - lengths->begin();
    const auto longest = std::max_element(lengths->begin(), lengths->end()) - lengths->begin();
    plan.cases.push_back(named("shortest", {shortest}));
    plan.cases.push_back(named("longest", {longest}));
  } else {
    plan.skipped.push_back("shortest, longest: the case declares no length tensor");
  }

  // What a last incomplete batch of the minimal size would hold.
  const std::int64_t size = std::min<std::int64_t>(static_cast<std::int64_t>(minimal.size()), original);
  if (size > 0) {
    std::vector<std::int64_t> last;
    for (std::int64_t i = original - size; i < original; ++i) last.push_back(i);
    plan.cases.push_back(named("last_batch", std::move(last)));
  }
  return plan;
}

}  // namespace minrepro
