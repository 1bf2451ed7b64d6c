#include "core/process/job_slots.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

namespace minrepro {

JobSlots::JobSlots(std::size_t slots) : size_(std::max<std::size_t>(slots, 1)), free_(size_) {}

std::size_t JobSlots::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return size_;
}

void JobSlots::grow() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++size_;
    ++free_;
  }
  freed_.notify_one();
}

void JobSlots::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [this] { return free_ > 0; });
  --free_;
}

void JobSlots::give() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  freed_.notify_one();
}

JobSlots::Held::Held(JobSlots& slots) : slots_(slots) { slots_.take(); }
JobSlots::Held::~Held() { slots_.give(); }

void runInSlots(std::size_t count, JobSlots& slots, const std::function<void(std::size_t)>& work,
                const std::function<bool()>& stop, std::vector<bool>* ran) {
  std::vector<char> started(count, 0);  // not vector<bool>: its bits share bytes between threads
  // One thread per run, each waiting for a slot in turn: the runs are
  // processes of a second or more, so a thread each costs nothing that
  // matters, and the order in which slots free up is the order runs start.
  std::vector<std::thread> threads;
  std::mutex order_mutex;
  std::condition_variable order_cv;
  std::size_t next = 0;  // runs start in index order
  std::exception_ptr thrown;
  for (std::size_t i = 0; i < count; ++i)
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(order_mutex);
        order_cv.wait(lock, [&] { return next == i; });
      }
      JobSlots::Held slot(slots);
      bool skip = stop && stop();
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        ++next;
        skip = skip || thrown;
      }
      order_cv.notify_all();
      if (skip) return;
      started[i] = 1;
      try {
        work(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(order_mutex);
        if (!thrown) thrown = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (thrown) std::rethrow_exception(thrown);
  if (ran) ran->assign(started.begin(), started.end());
}

}  // namespace minrepro
