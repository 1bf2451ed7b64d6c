// Lengths: settings, not units. The window kept on the declared sequence axes
// is shortened from the end, then from the start; then each kept sample's
// own length (when the case declares a length tensor) is shortened from its
// end, its cut positions taking the padding value. The engine searches each
// setting for its smallest failing value by bisection: O(log L) trials when the
// failure is monotone in the length, and a failure that needs one exact
// length keeps it (every shorter probe passes).
#include "reducers/reducer.h"

#include <algorithm>

namespace minrepro {
namespace {

class LengthReducer : public SettingReducer {
 public:
  explicit LengthReducer(const CaseView& view) : view_(view), lengths_(view.sampleLengths()) {}
  std::string name() const override { return "lengths"; }

  std::vector<Setting> settings(const Selection& current) const override {
    std::vector<Setting> out;
    const std::int64_t window = current.seq_end - current.seq_begin;
    if (view_.sequenceLength() == 0 || window <= 0) return out;
    const std::int64_t min = std::min(view_.minLength(), window);
    out.push_back({"end", min, window});
    out.push_back({"start", min, window});
    if (lengths_.empty()) return out;
    for (std::int64_t s : current.samples) {
      const std::int64_t visible = visibleLength(current, s);
      if (visible > min) out.push_back({"sample " + std::to_string(s), min, visible});
    }
    return out;
  }

  std::vector<std::string> describe(const Selection& minimal,
                                    const std::vector<std::int64_t>& sample_ids) const override {
    const std::int64_t length = view_.sequenceLength();
    if (length == 0) return {};
    // Both ends included, as a reader counts ("11..12 of 40" left them to guess).
    const std::string window = minimal.seq_end > minimal.seq_begin
                                   ? std::to_string(minimal.seq_begin) + " to " + std::to_string(minimal.seq_end - 1)
                                   : std::string("none");
    std::vector<std::string> lines{"Sequence window: positions " + window + " of 0 to " + std::to_string(length - 1) +
                                   " (length " + std::to_string(minimal.seq_end - minimal.seq_begin) + ")"};
    for (const auto& [sample, cut] : minimal.lengths)
      lines.push_back("Sample id " + std::to_string(sample_ids[static_cast<std::size_t>(sample)]) + ": length " +
                      std::to_string(lengths_[static_cast<std::size_t>(sample)]) + " shortened to " +
                      std::to_string(cut - minimal.seq_begin));
    return lines;
  }

  Selection withSetting(const Selection& current, const Setting& setting, std::int64_t value) const override {
    Selection next = current;
    if (setting.name == "end") {
      next.seq_end = current.seq_begin + value;
    } else if (setting.name == "start") {
      next.seq_begin = current.seq_end - value;
    } else {
      const std::int64_t sample = std::stoll(setting.name.substr(setting.name.find(' ') + 1));
      next.lengths[sample] = current.seq_begin + value;
    }
    return next;
  }

 private:
  // The sample's length inside the window, as the trial will see it.
  std::int64_t visibleLength(const Selection& current, std::int64_t sample) const {
    std::int64_t length = lengths_[static_cast<std::size_t>(sample)];
    if (auto it = current.lengths.find(sample); it != current.lengths.end()) length = std::min(length, it->second);
    return std::clamp<std::int64_t>(length - current.seq_begin, 0, current.seq_end - current.seq_begin);
  }

  const CaseView& view_;
  std::vector<std::int64_t> lengths_;
};

}  // namespace

std::unique_ptr<Reducer> createLengthReducer(const CaseView& view) { return std::make_unique<LengthReducer>(view); }

void writeLengthsKey(const Selection& selection, std::string& key) {
  if (selection.seq_end > 0)
    key += "|window " + std::to_string(selection.seq_begin) + ":" + std::to_string(selection.seq_end);
  for (const auto& [sample, length] : selection.lengths)
    key += "|len " + std::to_string(sample) + "=" + std::to_string(length);
}

}  // namespace minrepro
