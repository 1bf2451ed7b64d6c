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

// Always written, even for every sample: every key starts with the samples,
// runs of consecutive ones as ranges ("samples,0-4999999,5000002"): the key
// of a candidate of millions of samples is short, and cheap to make at
// every trial.
void writeSamplesKey(const Selection& selection, std::string& key) {
  key += "samples";
  const auto& s = selection.samples;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t j = i;
    while (j + 1 < s.size() && s[j + 1] == s[j] + 1) ++j;
    key += "," + std::to_string(s[i]);
    if (j > i) key += "-" + std::to_string(s[j]);
    i = j + 1;
  }
}

}  // namespace minrepro
