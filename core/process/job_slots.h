// The --jobs slots, shared by the runs that are not the search's trials.
//
// After the search, the self-check runs repro.py K times and the op step
// runs the failing call alone and its own small reduction; before it, the
// original runs in forked and plain processes. Each is a fresh Python that
// imports torch (about a second), and they are independent of one another:
// run one after another they were most of a small case's time. They run
// beside each other now, but never more processes at once than the user
// allowed: every such run holds a slot of one JobSlots while it runs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "core/process/process.h"

namespace minrepro {

class JobSlots {
 public:
  explicit JobSlots(std::size_t slots);
  JobSlots(const JobSlots&) = delete;
  JobSlots& operator=(const JobSlots&) = delete;

  // A slot, held until destroyed.
  class Held {
   public:
    explicit Held(JobSlots& slots);
    ~Held();
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    JobSlots& slots_;
  };

  std::size_t size() const;
  // One slot more from now on: the self-check's own bound, once the op
  // step beside it has ended and left its slot free.
  void grow();

 private:
  void take();
  void give();
  std::size_t size_;
  std::size_t free_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
};

// An executor whose every run holds a slot of `slots` while it runs: the
// op step's own small reduction shares --jobs with the self-check beside it.
class SlotExecutor : public Executor {
 public:
  SlotExecutor(Executor& inner, JobSlots& slots) : inner_(inner), slots_(slots) {}
  bool buildsBatch(const TrialSpec& spec) const override { return inner_.buildsBatch(spec); }
  TrialOutcome run(const TrialSpec& spec) override {
    JobSlots::Held slot(slots_);
    return inner_.run(spec);
  }

 private:
  Executor& inner_;
  JobSlots& slots_;
};

// Runs work(i) for every i in [0, count), each holding a slot of `slots`
// (so at most slots.size() at once), and returns when all have ended.
// Once `stop` returns true, runs not yet started are skipped (`ran` tells
// which did). The first exception a run throws stops the runs not yet
// started and is thrown again here once every started run has ended.
void runInSlots(std::size_t count, JobSlots& slots, const std::function<void(std::size_t)>& work,
                const std::function<bool()>& stop = {}, std::vector<bool>* ran = nullptr);

}  // namespace minrepro
