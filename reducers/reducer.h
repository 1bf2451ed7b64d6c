// A reducer only enumerates what could go and applies a choice; the engine
// owns the search (core/delta.h for sets of units, a binary search for
// settings), as in llvm-reduce's deltas/. Reducers never see LibTorch: what they
// need to know about the batch comes through CaseView.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace minrepro {

// What a candidate keeps of the original case, always in the original's
// coordinates, so that every pass can run again after the others. Each
// reducer changes its own fields and leaves the others' alone.
struct Selection {
  std::vector<std::int64_t> samples;  // indices into the original batch, ascending
  // The window kept on the declared sequence axes: positions [seq_begin, seq_end)
  // of the original. Both 0 when the case declares no sequence axis.
  std::int64_t seq_begin = 0;
  std::int64_t seq_end = 0;
  // Per-sample lengths shortened below the original (sample index -> length,
  // counted from the original position 0); positions past it hold the padding.
  std::map<std::int64_t, std::int64_t> lengths;
  std::set<std::string> branches_off;  // optional branches switched off
  // Tensor -> flat indices (row-major, in the original tensor) of the elements
  // that keep their value; every other element holds the tensor's trivial
  // value. A tensor not listed keeps all its values.
  std::map<std::string, std::vector<std::int64_t>> values_kept;
};

// A stable key of what the selection keeps: candidates with the same key are
// the same trial input (cache, journal). Each pass writes its own fields
// (ReducerInfo::write_key), in the order of reducers/reducers.def.
std::string selectionKey(const Selection& selection);

// Whether `big` keeps everything `small` keeps: its samples, window,
// per-sample lengths, branches on and kept values (a superset in every
// field). A deterministic failure seen on `small` that passes on `big`
// is evidence that it is not deterministic (core/flaky.h).
bool keepsAllOf(const Selection& big, const Selection& small);

// One element of a batch tensor, by its flat index in the original tensor.
struct ValueUnit {
  std::string tensor;
  std::int64_t index = 0;
};

// What reducers may ask about the case and the batch (the batch store answers).
class CaseView {
 public:
  virtual ~CaseView() = default;
  virtual std::int64_t sampleCount() const = 0;
  // Length of the declared sequence axes in the original; 0 when none is declared.
  virtual std::int64_t sequenceLength() const = 0;
  // Per-sample lengths from the declared length tensor (original samples); empty when none.
  virtual std::vector<std::int64_t> sampleLengths() const = 0;
  virtual std::int64_t minLength() const = 0;
  // Names of the optional branches (transforms, switches), in declared order.
  virtual std::vector<std::string> optionalBranches() const = 0;
  // The elements of the candidate that the values pass may still simplify:
  // inside the kept samples and window, not padding, not yet trivial.
  virtual std::vector<ValueUnit> nonTrivialValues(const Selection& selection) const = 0;
  // How many there are; a view of a large batch counts them without
  // listing them.
  virtual std::int64_t nonTrivialValueCount(const Selection& selection) const {
    return static_cast<std::int64_t>(nonTrivialValues(selection).size());
  }
};

// The whole selection: every sample, the full sequence window, every branch on.
Selection fullSelection(const CaseView& view);

// The size a run reports after each accepted step; smaller in every field is smaller.
struct CaseSize {
  std::int64_t samples = 0;
  std::int64_t length = 0;    // window length (1 without a sequence axis)
  std::int64_t branches = 0;  // optional branches still on
  std::int64_t values = 0;    // non-trivial values
  double product() const;
  std::string describe() const;  // "1 sample x length 513 x 1 branch x 3 values"
};
CaseSize measureSize(const Selection& selection, const CaseView& view);

// An integer setting of the case that is simpler when smaller (a length).
struct Setting {
  std::string name;        // "end", "sample 313"
  std::int64_t min = 0;    // smallest allowed value
  std::int64_t value = 0;  // the current value
};

class SetReducer;
class SettingReducer;

// A pass. Its kind is its type: a SetReducer has units that can go (delta
// debugging over them), a SettingReducer has integer settings that are simpler
// when smaller (a binary search each). Either knows its own fields of the
// Selection, and says what it changed for the report.
class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string name() const = 0;
  // REPORT.md's lines on what this pass changed in `minimal` (none when it
  // changed nothing); sample ids name samples the way the user knows them.
  virtual std::vector<std::string> describe(const Selection& minimal,
                                            const std::vector<std::int64_t>& sample_ids) const {
    return {};
  }
  // The pass as its kind; null when it is the other one.
  const SetReducer* asSet() const;
  const SettingReducer* asSettings() const;
};

class SetReducer : public Reducer {
 public:
  // How many units could be removed from `current`, and `current` keeping
  // only the given units (ascending indices < unitCount).
  virtual std::size_t unitCount(const Selection& current) const = 0;
  virtual Selection apply(const Selection& current, const std::vector<std::size_t>& keep) const = 0;
  // Whether keeping no unit at all is a valid candidate (all branches off,
  // all values trivial); an empty batch is not.
  virtual bool allowsEmpty() const { return false; }
};

class SettingReducer : public Reducer {
 public:
  // The settings of `current` (searched one after the other, each for its
  // smallest value that still fails), and `current` with one set.
  virtual std::vector<Setting> settings(const Selection& current) const = 0;
  virtual Selection withSetting(const Selection& current, const Setting& setting, std::int64_t value) const = 0;
};

struct ReducerInfo {
  const char* name;
  std::unique_ptr<Reducer> (*create)(const CaseView&);
  // Appends the pass's own fields of a selection to its key (selectionKey):
  // nothing when they are at their defaults.
  void (*write_key)(const Selection&, std::string&);
  const char* description;
};

// Every reducer, in the order of reducers/reducers.def.
const std::vector<ReducerInfo>& reducerRegistry();
const ReducerInfo* findReducer(const std::string& name);

}  // namespace minrepro
