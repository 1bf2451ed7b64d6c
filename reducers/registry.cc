#include "reducers/reducer.h"

#include "engine/journal.h"

namespace minrepro {

#define MINREPRO_REDUCER(name, factory, description) std::unique_ptr<Reducer> factory();
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER

std::string selectionKey(const Selection& selection) {
  std::string text = "samples";
  for (auto i : selection.samples) text += "," + std::to_string(i);
  return contentHash(text);
}

const std::vector<ReducerInfo>& reducerRegistry() {
  static const std::vector<ReducerInfo> registry{
#define MINREPRO_REDUCER(name, factory, description) {#name, &factory, description},
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
