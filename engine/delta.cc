#include "engine/delta.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace minrepro {
namespace {

using Units = std::vector<std::size_t>;

Units merged(const Units& a, const Units& b, const Units& c = {}) {
  Units out;
  out.reserve(a.size() + b.size() + c.size());
  out.insert(out.end(), a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), c.begin(), c.end());
  std::sort(out.begin(), out.end());
  return out;
}

// State of one search: needed units (proven), unknown units, and the oracle
// wrapped with a cache so that a candidate is never run twice.
class Search {
 public:
  Search(std::size_t n, const UnitOracle& oracle, DeltaStats& stats)
      : total_(n), oracle_(oracle), stats_(stats) {
    unknown_.resize(n);
    for (std::size_t i = 0; i < n; ++i) unknown_[i] = i;
  }

  Units run() {
    // The empty set is assumed not interesting, so the full set is known to
    // hold a needed unit: the first step is a binary search over everything.
    bool unknown_holds_culprit = true;
    bool needed_alone_failed = false;
    while (!unknown_.empty()) {
      const std::size_t g = unknown_holds_culprit ? unknown_.size() : groupSize(needed_alone_failed);
      Units group(unknown_.begin(), unknown_.begin() + g);
      Units rest(unknown_.begin() + g, unknown_.end());
      if (!unknown_holds_culprit && interesting(merged(needed_, rest))) {
        unknown_ = std::move(rest);
        continue;
      }
      if (!unknown_holds_culprit && rest.empty()) needed_alone_failed = true;
      findOneNeeded(std::move(group), std::move(rest));
      unknown_holds_culprit = false;
    }
    return needed_;
  }

 private:
  // While few needed units are known, ask first whether they suffice (the
  // group is everything unknown). After that, size groups so that each holds
  // about one culprit, estimating the culprits left from the density seen.
  std::size_t groupSize(bool needed_alone_failed) const {
    const double u = static_cast<double>(unknown_.size());
    const double k = static_cast<double>(needed_.size());
    if (!needed_alone_failed || needed_.size() < kDensityAfter) return unknown_.size();
    const double resolved = std::max(1.0, static_cast<double>(total_) - u);
    const double left = std::max(1.0, k * u / resolved);
    const double ratio = std::max(1.0, (u - left + 1.0) / left);
    const auto g = static_cast<std::size_t>(std::exp2(std::floor(std::log2(ratio))));
    return std::clamp<std::size_t>(g, 1, unknown_.size());
  }

  // `group` holds a needed unit given needed_ + rest; binary search for it,
  // dropping each half whose removal keeps the failure.
  void findOneNeeded(Units group, Units rest) {
    while (group.size() > 1) {
      const auto mid = group.begin() + static_cast<std::ptrdiff_t>(group.size() / 2);
      Units first(group.begin(), mid), second(mid, group.end());
      if (interesting(merged(needed_, second, rest))) {
        group = std::move(second);
      } else {
        rest = merged(second, rest);
        group = std::move(first);
      }
    }
    needed_ = merged(needed_, group);
    unknown_ = std::move(rest);
  }

  bool interesting(const Units& keep) {
    if (keep.empty()) return false;
    auto it = cache_.find(keep);
    if (it != cache_.end()) {
      ++stats_.cache_hits;
      return it->second;
    }
    ++stats_.tests;
    const bool result = oracle_(keep);
    if (result) ++stats_.accepted;
    cache_.emplace(keep, result);
    return result;
  }

  static constexpr std::size_t kDensityAfter = 3;
  std::size_t total_;
  const UnitOracle& oracle_;
  DeltaStats& stats_;
  Units needed_;
  Units unknown_;
  std::map<Units, bool> cache_;
};

}  // namespace

std::vector<std::size_t> minimizeUnits(std::size_t n, const UnitOracle& oracle, DeltaStats* stats) {
  DeltaStats local;
  DeltaStats& s = stats ? *stats : local;
  if (n <= 1) return n == 1 ? Units{0} : Units{};
  return Search(n, oracle, s).run();
}

}  // namespace minrepro
