#include "engine/timeline.h"
#include <iomanip>
#include <sstream>

#include <algorithm>

namespace minrepro {

const char* markOutcomeName(MarkOutcome outcome) {
  switch (outcome) {
    case MarkOutcome::Same:
      return "same";
    case MarkOutcome::Passed:
      return "passed";
    case MarkOutcome::Different:
      return "different";
    case MarkOutcome::TimedOut:
      return "timed-out";
    case MarkOutcome::Cached:
      return "cached";
  }
  return "passed";
}

void Timeline::add(TrialMark mark) {
  marks_.push_back(mark);
  if (!passes_.empty()) {
    passes_.back().end_mark = marks_.size();
    passes_.back().end_seconds = mark.seconds;
  }
  if (marks_.size() > kMaxMarks) thin();
}

std::string secondsText(double seconds) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << seconds;
  return out.str();
}

void Timeline::startPass(const std::string& name, double seconds) {
  if (!passes_.empty() && passes_.back().first_mark == marks_.size() && passes_.back().name == name) return;
  passes_.push_back({name, marks_.size(), marks_.size(), seconds, seconds});
}

void Timeline::accept(std::int64_t samples, double size, double seconds) {
  steps_.push_back({marks_.empty() ? 0 : marks_.size() - 1, seconds, samples, size});
}

std::size_t Timeline::count(MarkOutcome outcome) const {
  return static_cast<std::size_t>(
      std::count_if(marks_.begin(), marks_.end(), [&](const TrialMark& m) { return m.outcome == outcome; }));
}

// Drops every other mark of the oldest half; indices held by passes and
// steps move with the marks they point at.
void Timeline::thin() {
  const std::size_t half = marks_.size() / 2;
  std::vector<std::size_t> new_index(marks_.size() + 1);
  std::vector<TrialMark> kept;
  kept.reserve(marks_.size());
  for (std::size_t i = 0; i < marks_.size(); ++i) {
    new_index[i] = kept.size();
    if (i >= half || i % 2 == 0)
      kept.push_back(marks_[i]);
    else
      ++thinned_;
  }
  new_index[marks_.size()] = kept.size();
  for (PassBand& p : passes_) {
    p.first_mark = new_index[p.first_mark];
    p.end_mark = new_index[p.end_mark];
  }
  for (AcceptedStep& s : steps_) s.mark = std::min(new_index[s.mark], kept.empty() ? 0 : kept.size() - 1);
  marks_ = std::move(kept);
}

}  // namespace minrepro
