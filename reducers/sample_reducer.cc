// Samples: each kept sample is a unit. The batch store removes the dropped
// samples from every tensor with a sample axis (and from the ids) at once,
// so the tensors never disagree on the batch size.
#include "reducers/reducer.h"

namespace minrepro {
namespace {

class SampleReducer : public SetReducer {
 public:
  std::string name() const override { return "samples"; }
  std::size_t unitCount(const Selection& current) const override { return current.samples.size(); }
  Selection apply(const Selection& current, const std::vector<std::size_t>& keep) const override {
    Selection next = current;
    next.samples.clear();
    for (std::size_t unit : keep) next.samples.push_back(current.samples[unit]);
    return next;
  }
};

}  // namespace

std::unique_ptr<Reducer> createSampleReducer(const CaseView&) { return std::make_unique<SampleReducer>(); }

// Always written, even for every sample: every key starts with the samples.
void writeSamplesKey(const Selection& selection, std::string& key) {
  key += "samples";
  for (auto i : selection.samples) key += "," + std::to_string(i);
}

}  // namespace minrepro
