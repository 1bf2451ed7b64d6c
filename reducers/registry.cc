#include "reducers/reducer.h"

#include <algorithm>

#include "core/content_hash.h"

namespace minrepro {

#define MINREPRO_REDUCER(name, factory, key_writer, description) \
  std::unique_ptr<Reducer> factory(const CaseView&);             \
  void key_writer(const Selection&, std::string&);
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER

const SetReducer* Reducer::asSet() const { return dynamic_cast<const SetReducer*>(this); }
const SettingReducer* Reducer::asSettings() const { return dynamic_cast<const SettingReducer*>(this); }

std::string selectionKey(const Selection& selection) {
  std::string text;
  for (const auto& info : reducerRegistry()) info.write_key(selection, text);
  return contentHash(text);
}

bool keepsAllOf(const Selection& big, const Selection& small) {
  if (!std::includes(big.samples.begin(), big.samples.end(), small.samples.begin(), small.samples.end())) return false;
  if (big.seq_begin > small.seq_begin || big.seq_end < small.seq_end) return false;
  for (const auto& [sample, length] : big.lengths) {  // a sample big shortens, small keeps at least as short
    const auto it = small.lengths.find(sample);
    if (std::binary_search(small.samples.begin(), small.samples.end(), sample) &&
        (it == small.lengths.end() || it->second > length))
      return false;
  }
  for (const auto& branch : big.branches_off)
    if (!small.branches_off.count(branch)) return false;
  for (const auto& [tensor, kept] : big.values_kept) {  // big edits values of `tensor`: small keeps no more
    const auto it = small.values_kept.find(tensor);
    if (it == small.values_kept.end() || !std::includes(kept.begin(), kept.end(), it->second.begin(), it->second.end()))
      return false;
  }
  return true;
}

Selection fullSelection(const CaseView& view) {
  Selection s;
  for (std::int64_t i = 0; i < view.sampleCount(); ++i) s.samples.push_back(i);
  s.seq_end = view.sequenceLength();
  return s;
}

double CaseSize::product() const {
  return static_cast<double>(samples) * static_cast<double>(std::max<std::int64_t>(length, 1)) *
         static_cast<double>(std::max<std::int64_t>(branches, 1)) *
         static_cast<double>(std::max<std::int64_t>(values, 1));
}

std::string CaseSize::describe() const {
  auto plural = [](std::int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string text = plural(samples, "sample", "samples");
  if (length > 0) text += " x length " + std::to_string(length);
  text += " x " + plural(branches, "branch", "branches") + " on x " +
          plural(values, "non-trivial value", "non-trivial values");
  return text;
}

CaseSize measureSize(const Selection& selection, const CaseView& view) {
  CaseSize size;
  size.samples = static_cast<std::int64_t>(selection.samples.size());
  size.length = selection.seq_end - selection.seq_begin;
  for (const auto& b : view.optionalBranches()) size.branches += selection.branches_off.count(b) ? 0 : 1;
  size.values = view.nonTrivialValueCount(selection);
  return size;
}

const std::vector<ReducerInfo>& reducerRegistry() {
  static const std::vector<ReducerInfo> registry{
#define MINREPRO_REDUCER(name, factory, key_writer, description) {#name, &factory, &key_writer, description},
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER
  };
  return registry;
}

const ReducerInfo* findReducer(const std::string& name) {
  for (const auto& info : reducerRegistry())
    if (name == info.name) return &info;
  return nullptr;
}

}  // namespace minrepro
