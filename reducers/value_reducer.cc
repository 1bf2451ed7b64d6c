// Values: each element that is not yet trivial is a unit; dropping it sets it
// to its tensor's trivial value (engine side: the batch store decides what
// trivial is per dtype, and never changes a dtype or a layout). The delta
// search first tries all of them at once, so a failure that needs no value
// costs one trial, and one that needs a single value (the class-4 target)
// about log2(n).
#include "reducers/reducer.h"

#include <algorithm>

namespace minrepro {
namespace {

class ValueReducer : public SetReducer {
 public:
  explicit ValueReducer(const CaseView& view) : view_(view) {}
  std::string name() const override { return "values"; }
  bool allowsEmpty() const override { return true; }

  std::size_t unitCount(const Selection& current) const override { return units(current).size(); }

  std::vector<std::string> describe(const Selection& minimal, const std::vector<std::int64_t>&) const override {
    if (minimal.values_kept.empty()) return {};
    // The tensors the pass went over, by name: a per-sample list's entries
    // (a detection target's boxes) are not among them and keep their values.
    std::string covered;
    std::size_t named = 0;
    for (const auto& [tensor, kept] : minimal.values_kept)
      if (++named <= 6) covered += (named > 1 ? ", " : "") + tensor;
    if (named > 6) covered += " and " + std::to_string(named - 6) + " more";
    return {"Values: " + std::to_string(view_.nonTrivialValueCount(minimal)) + " non-trivial value(s) left among " +
            covered +
            "; every other value there is its tensor's trivial value (floats 0, integers 0 or "
            "the value nearest 0 the tensor holds, or its median where only one element held that, masks all-ones; "
            "configs/README.md, values), dtypes and layouts unchanged: such a value is not the sample's own"};
  }

  Selection apply(const Selection& current, const std::vector<std::size_t>& keep) const override {
    const std::vector<ValueUnit>& all = units(current);
    // Every tensor with a unit gets an explicit kept list: its trivial
    // elements stay trivial, the dropped units join them.
    std::map<std::string, std::vector<std::int64_t>> kept;
    for (const ValueUnit& u : all) kept[u.tensor];
    for (std::size_t k : keep) kept[all[k].tensor].push_back(all[k].index);
    Selection next = current;
    for (auto& [tensor, indices] : kept) {
      std::sort(indices.begin(), indices.end());
      next.values_kept[tensor] = std::move(indices);
    }
    return next;
  }

 private:
  // The units of one `current` are asked for again with every candidate of a
  // pass: compute them once per selection.
  const std::vector<ValueUnit>& units(const Selection& current) const {
    const std::string key = selectionKey(current);
    if (key != cached_key_) {
      cached_units_ = view_.nonTrivialValues(current);
      cached_key_ = key;
    }
    return cached_units_;
  }

  const CaseView& view_;
  mutable std::string cached_key_;
  mutable std::vector<ValueUnit> cached_units_;
};

}  // namespace

std::unique_ptr<Reducer> createValueReducer(const CaseView& view) { return std::make_unique<ValueReducer>(view); }

void writeValuesKey(const Selection& selection, std::string& key) {
  for (const auto& [tensor, kept] : selection.values_kept) {
    key += "|values " + tensor + ":";
    for (auto i : kept) key += std::to_string(i) + ",";
  }
}

}  // namespace minrepro
