// A reducer only enumerates what could go and applies a choice; the engine's
// delta core (engine/delta.h) owns the search, as in llvm-reduce's deltas/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minrepro {

// What a candidate keeps of the original case. Later reducers add fields
// (lengths, branches, values); every reducer leaves the others' fields alone.
struct Selection {
  std::vector<std::int64_t> samples;  // indices into the original batch, ascending
};

// A stable text key of what the selection keeps: candidates with the same
// key are the same trial input (cache, journal).
std::string selectionKey(const Selection& selection);

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string name() const = 0;
  // How many units this pass could remove from `current`.
  virtual std::size_t unitCount(const Selection& current) const = 0;
  // `current` keeping only the given units (ascending indices < unitCount).
  virtual Selection apply(const Selection& current, const std::vector<std::size_t>& keep) const = 0;
};

struct ReducerInfo {
  const char* name;
  std::unique_ptr<Reducer> (*create)();
  const char* description;
};

// Every reducer, in the order of reducers/reducers.def.
const std::vector<ReducerInfo>& reducerRegistry();
const ReducerInfo* findReducer(const std::string& name);

}  // namespace minrepro
