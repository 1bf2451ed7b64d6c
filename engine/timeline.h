// The run as it happened, trial by trial, for the reports people look at
// (engine/archive/report_html.h): each trial's candidate size and outcome
// at the time it ended, the passes as bands, the accepted steps. The oracle
// appends every trial (and every answer taken from the journal or an
// earlier run of the same candidate); the pipeline marks passes and steps.
// Bounded: past kMaxMarks the oldest marks of each outcome are thinned, so
// an overnight run of 100,000 trials draws in the same few hundred KiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace minrepro {

enum class MarkOutcome {
  Same,       // failed the same way as the original
  Passed,     // ran to the end without failing
  Different,  // failed another way (kept apart, never accepted)
  TimedOut,   // ran into the trial timeout (the failure only of a case declared a hang)
  Cached,     // answered from an earlier run of the same candidate, or the journal of an interrupted run
};
const char* markOutcomeName(MarkOutcome outcome);  // "same", "passed", "different", "timed-out", "cached"

struct TrialMark {
  std::size_t number = 0;  // the trial's number (0 for a cached answer)
  double seconds = 0;      // since the run started, when the answer came
  double duration = 0;     // of the trial process; 0 when cached
  std::int64_t samples = 0;
  double size = 0;  // samples x length x branches x values (CaseSize::product)
  MarkOutcome outcome = MarkOutcome::Passed;
};

struct PassBand {
  std::string name;            // "samples", "values", "original", "confirmation"
  std::size_t first_mark = 0;  // index of its first mark
  std::size_t end_mark = 0;    // one past its last mark (== first_mark when it asked nothing)
  double start_seconds = 0, end_seconds = 0;
};

struct AcceptedStep {
  std::size_t mark = 0;  // index of the mark after which the case was this size
  double seconds = 0;
  std::int64_t samples = 0;
  double size = 0;
};

// The pass under way and its search's estimate of what it has left.
struct PassEstimate {
  std::string pass;
  std::size_t trials_left = 0;
  double seconds_left = 0;  // at the last trial's pace
};

// A phase of the run and when it ran, for the time account in REPORT.md
// and the log; phases may overlap (the self-check and the op step run side
// by side).
struct Phase {
  std::string name;  // "original", "search", "file trace", "self-check", "op step", "archive"
  double start_seconds = 0, end_seconds = 0;
  double seconds() const { return end_seconds - start_seconds; }
};

// "3.4": seconds with one decimal, as the log and the reports give them.
std::string secondsText(double seconds);

class Timeline {
 public:
  static constexpr std::size_t kMaxMarks = 20000;

  void add(TrialMark mark);
  void startPass(const std::string& name, double seconds);
  void accept(std::int64_t samples, double size, double seconds);
  void setEstimate(PassEstimate estimate) { estimate_ = std::move(estimate); }
  const PassEstimate& estimate() const { return estimate_; }

  void addPhase(Phase phase) { phases_.push_back(std::move(phase)); }
  const std::vector<Phase>& phases() const { return phases_; }

  const std::vector<TrialMark>& marks() const { return marks_; }
  const std::vector<PassBand>& passes() const { return passes_; }
  const std::vector<AcceptedStep>& steps() const { return steps_; }
  // Marks dropped to stay within kMaxMarks (every other one of the oldest half).
  std::size_t thinned() const { return thinned_; }
  std::size_t count(MarkOutcome outcome) const;

 private:
  void thin();

  std::vector<TrialMark> marks_;
  std::vector<PassBand> passes_;
  std::vector<AcceptedStep> steps_;
  std::vector<Phase> phases_;
  std::size_t thinned_ = 0;
  PassEstimate estimate_;
};

}  // namespace minrepro
