#include "core/delta.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace minrepro {
namespace {

// The union of ascending unit lists, ascending: merged in linear time (a
// million-unit candidate is not sorted again at every query).
Units merged(const Units& a, const Units& b, const Units& c = {}) {
  Units ab;
  ab.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(ab));
  if (c.empty()) return ab;
  Units out;
  out.reserve(ab.size() + c.size());
  std::merge(ab.begin(), ab.end(), c.begin(), c.end(), std::back_inserter(out));
  return out;
}

Units without(const Units& units, std::size_t index) {
  Units out = units;
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(index));
  return out;
}

// Culprits found before group sizes follow their density: until then, each
// round first asks whether the needed units alone suffice.
constexpr std::size_t kDensityAfter = 3;

}  // namespace

// FNV-1a over the units' values, and a multiply-xorshift mix: two hashes
// that do not collide together by chance (2^-128 per pair of candidates).
DeltaSearch::CandidateId DeltaSearch::idOf(const Units& units) {
  std::uint64_t h1 = 1469598103934665603ULL, h2 = 0x9E3779B97F4A7C15ULL;
  for (std::size_t u : units) {
    h1 = (h1 ^ u) * 1099511628211ULL;
    h2 ^= u + 0x9E3779B97F4A7C15ULL + (h2 << 6) + (h2 >> 2);
    h2 *= 0xBF58476D1CE4E5B9ULL;
    h2 ^= h2 >> 31;
  }
  return {units.size(), h1, h2};
}

DeltaSearch::DeltaSearch(std::size_t n, DeltaOptions options) : total_(n), options_(options) {
  unknown_.resize(n);
  for (std::size_t i = 0; i < n; ++i) unknown_[i] = i;
  // The empty set is assumed not interesting, so the full set holds a needed
  // unit: the first step is a bisection over everything.
  if (n <= 1) {
    needed_ = unknown_;
    phase_ = Phase::Done;
  }
  advance();
}

void DeltaSearch::answer(bool interesting) {
  ++stats_.tests;
  if (interesting) ++stats_.accepted;
  cache_.emplace(idOf(pending_), interesting);
  apply(interesting);
  advance();
}

// Moves through the phases until a trial is needed or the search is done.
void DeltaSearch::advance() {
  for (bool asked = false; !asked;) {
    switch (phase_) {
      case Phase::Outer:
        asked = stepOuter();
        break;
      case Phase::Bisect:
        asked = stepBisect();
        break;
      case Phase::FinalCheck:
        asked = stepFinal();
        break;
      case Phase::Done:
        return;
      default:
        return;  // awaiting an answer
    }
  }
}

// Returns true when the caller must answer; answers from the cache (and the
// empty set, never interesting) are applied at once.
bool DeltaSearch::propose(Units candidate, Phase awaiting) {
  pending_ = std::move(candidate);
  phase_ = awaiting;
  if (pending_.empty()) {
    apply(false);
    return false;
  }
  if (auto it = cache_.find(idOf(pending_)); it != cache_.end()) {
    ++stats_.cache_hits;
    apply(it->second);
    return false;
  }
  return true;
}

bool DeltaSearch::stepOuter() {
  if (unknown_.empty()) {
    phase_ = options_.final_check && needed_.size() > 1 ? Phase::FinalCheck : Phase::Done;
    final_index_ = 0;
    return false;
  }
  const std::size_t g = unknown_holds_culprit_ ? unknown_.size() : groupSize();
  group_.assign(unknown_.begin(), unknown_.begin() + static_cast<std::ptrdiff_t>(g));
  rest_.assign(unknown_.begin() + static_cast<std::ptrdiff_t>(g), unknown_.end());
  if (unknown_holds_culprit_) {
    unknown_holds_culprit_ = false;
    phase_ = Phase::Bisect;
    return false;
  }
  return propose(merged(needed_, rest_), Phase::AwaitGroup);
}

// `group_` holds a needed unit given needed_ + rest_: try removing its first
// part; whichever part must hold the unit is bisected further.
bool DeltaSearch::stepBisect() {
  if (group_.size() <= 1) {
    needed_ = merged(needed_, group_);
    unknown_ = rest_;
    phase_ = Phase::Outer;
    return false;
  }
  const auto size = group_.size();
  const auto cut = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::lround(static_cast<double>(size) * options_.split_fraction)), 1, size - 1);
  first_.assign(group_.begin(), group_.begin() + static_cast<std::ptrdiff_t>(cut));
  second_.assign(group_.begin() + static_cast<std::ptrdiff_t>(cut), group_.end());
  return propose(merged(needed_, second_, rest_), Phase::AwaitBisect);
}

bool DeltaSearch::stepFinal() {
  if (final_index_ >= needed_.size() || needed_.size() <= 1) {
    phase_ = Phase::Done;
    return false;
  }
  return propose(without(needed_, final_index_), Phase::AwaitFinal);
}

void DeltaSearch::apply(bool interesting) {
  switch (phase_) {
    case Phase::AwaitGroup:
      if (interesting) {
        unknown_ = rest_;
        phase_ = Phase::Outer;
      } else {
        if (rest_.empty()) needed_alone_failed_ = true;
        phase_ = Phase::Bisect;
      }
      break;
    case Phase::AwaitBisect:
      if (interesting) {
        group_ = second_;
      } else {
        rest_ = merged(second_, rest_);
        group_ = first_;
      }
      phase_ = Phase::Bisect;
      break;
    case Phase::AwaitFinal:
      if (interesting) {
        needed_ = pending_;  // a unit kept by mistake: drop it and start over
        final_index_ = 0;
      } else {
        ++final_index_;
      }
      phase_ = Phase::FinalCheck;
      break;
    default:
      break;
  }
}

// While few needed units are known, the group is everything unknown (asking
// whether the needed units alone suffice). After that, groups are sized to
// hold about one culprit, estimating the culprits left from the density seen.
std::size_t DeltaSearch::groupSize() const {
  if (!needed_alone_failed_ || needed_.size() < kDensityAfter) return unknown_.size();
  const double u = static_cast<double>(unknown_.size());
  const double k = static_cast<double>(needed_.size());
  const double resolved = std::max(1.0, static_cast<double>(total_) - u);
  const double left = std::max(1.0, k * u / resolved);
  const double ratio = std::max(1.0, (u - left + 1.0) / left);
  const auto g = static_cast<std::size_t>(std::exp2(std::floor(std::log2(ratio))));
  return std::clamp<std::size_t>(g, 1, unknown_.size());
}

Units minimizeUnits(std::size_t n, const UnitOracle& oracle, DeltaStats* stats, DeltaOptions options) {
  DeltaSearch search(n, options);
  while (!search.done()) search.answer(oracle(search.query()));
  if (stats) *stats = search.stats();
  return search.result();
}

namespace {

std::size_t log2Ceil(std::size_t n) {
  std::size_t bits = 0;
  while ((std::size_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

std::size_t DeltaSearch::remainingEstimate() const {
  switch (phase_) {
    case Phase::Done:
      return 0;
    case Phase::FinalCheck:
    case Phase::AwaitFinal:
      return needed_.size() - std::min(final_index_, needed_.size());
    default:
      break;
  }
  const bool bisecting = phase_ == Phase::Bisect || phase_ == Phase::AwaitBisect;
  const std::size_t left = bisecting ? rest_.size() : unknown_.size();
  const std::size_t culprits = std::max<std::size_t>(needed_.size(), 1);
  std::size_t estimate = bisecting ? log2Ceil(group_.size()) : 0;
  if (left > 0) estimate += 1 + culprits * log2Ceil(left / culprits + 1);
  return estimate + (options_.final_check ? culprits : 0);
}

}  // namespace minrepro
