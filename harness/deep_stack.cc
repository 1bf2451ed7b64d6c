#include "harness/deep_stack.h"

#include <ATen/ThreadLocalState.h>
#include <pthread.h>

#include <exception>

namespace minrepro {

namespace {

constexpr std::size_t kDeepStackBytes = std::size_t{256} << 20;

struct Job {
  const std::function<void()>* work;
  // The caller's grad mode, dispatch keys and the like, as at::launch
  // carries them to its threads: the work runs as if on the caller's.
  at::ThreadLocalState caller;
  std::exception_ptr thrown;
};

void* runJob(void* arg) {
  auto* job = static_cast<Job*>(arg);
  try {
    at::ThreadLocalStateGuard as_the_caller(job->caller);
    (*job->work)();
  } catch (...) {
    job->thrown = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void runOnDeepStack(const std::function<void()>& work) {
  Job job{&work, at::ThreadLocalState(), nullptr};
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    started =
        pthread_attr_setstacksize(&attr, kDeepStackBytes) == 0 && pthread_create(&thread, &attr, runJob, &job) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) {
    work();
    return;
  }
  pthread_join(thread, nullptr);
  if (job.thrown) std::rethrow_exception(job.thrown);
}

}  // namespace minrepro
