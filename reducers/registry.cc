#include "reducers/reducer.h"

namespace minrepro {

#define MINREPRO_REDUCER(name, factory, description) std::unique_ptr<Reducer> factory();
#include "reducers/reducers.def"
#undef MINREPRO_REDUCER

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
