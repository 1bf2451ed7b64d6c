// The search for one setting (an integer setting that is simpler when smaller,
// such as a sequence length): the smallest value in [min, current] that
// still fails, given that `current` fails. The minimum is tried first (a
// length that does not matter costs one trial), then bisection: 1 +
// ceil(log2(current - min)) trials when the failure is monotone in the setting.
// When it is not (a failure at one exact length), every probe below passes
// and the search keeps `current`: the trigger is never lost.
// A query / answer step machine like DeltaSearch, for the same reasons.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minrepro {

class SettingSearch {
 public:
  SettingSearch(std::int64_t min, std::int64_t current) : lo_(min), hi_(current) {}
  bool done() const { return lo_ >= hi_; }
  std::int64_t query() const { return first_ ? lo_ : lo_ + (hi_ - lo_) / 2; }
  void answer(bool fails) {
    const std::int64_t probe = query();
    first_ = false;
    if (fails)
      hi_ = probe;
    else
      lo_ = probe + 1;
  }
  std::int64_t result() const { return hi_; }
  // Answers still needed (at most; the first query may end it early).
  std::size_t remainingEstimate() const {
    std::size_t n = first_ ? 1 : 0;
    for (std::int64_t span = hi_ - lo_; span > 0; span /= 2) ++n;
    return n;
  }

 private:
  std::int64_t lo_, hi_;  // hi_ fails; every value below lo_ was shown to pass
  bool first_ = true;
};

}  // namespace minrepro
