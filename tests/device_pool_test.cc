// One device per running trial (engine/executors/device_pool.h), on a fake device list
// and a fake executor that checks, while trials overlap, that no device is
// in use twice (or more than trials_per_device times).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/executors/device_pool.h"
#include "engine/trial_executors.h"

namespace minrepro {
namespace {

using namespace std::chrono_literals;

// Holds each trial for a while and records how many trials use each device at once.
class DeviceCheckingExecutor : public Executor {
 public:
  explicit DeviceCheckingExecutor(std::string variable = "CUDA_VISIBLE_DEVICES") : variable_(std::move(variable)) {}
  TrialOutcome run(const TrialSpec& spec) override {
    const auto it = spec.env_set.find(variable_);
    const std::string device = it == spec.env_set.end() ? "<none>" : it->second;
    {
      std::lock_guard lock(mutex_);
      const std::size_t now = ++busy_[device];
      max_per_device_[device] = std::max(max_per_device_[device], now);
      max_total_ = std::max(max_total_, ++running_);
      unset_seen_ =
          unset_seen_ || std::find(spec.env_unset.begin(), spec.env_unset.end(), variable_) != spec.env_unset.end();
    }
    std::this_thread::sleep_for(30ms);
    {
      std::lock_guard lock(mutex_);
      --busy_[device];
      --running_;
    }
    TrialOutcome o;
    o.end = TrialEnd::Exited;
    return o;
  }
  std::map<std::string, std::size_t> max_per_device_;
  std::size_t max_total_ = 0;
  bool unset_seen_ = false;

 private:
  std::string variable_;
  std::mutex mutex_;
  std::map<std::string, std::size_t> busy_;
  std::size_t running_ = 0;
};

void runConcurrently(Executor& executor, std::size_t trials, const TrialSpec& spec = {}) {
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < trials; ++i)
    threads.emplace_back([&] { EXPECT_EQ(executor.run(spec).end, TrialEnd::Exited); });
  for (auto& t : threads) t.join();
}

TEST(DevicePool, ConcurrentTrialsNeverShareADevice) {
  DeviceCheckingExecutor fake;
  DevicePoolExecutor pool(fake, DeviceList{"CUDA_VISIBLE_DEVICES", {"0", "1", "2"}, "test"}, 1);
  runConcurrently(pool, 12);
  EXPECT_EQ(fake.max_per_device_.size(), 3u) << "every device is used";
  for (const auto& [device, max] : fake.max_per_device_) {
    EXPECT_TRUE(device == "0" || device == "1" || device == "2") << device;
    EXPECT_EQ(max, 1u) << "two trials at once on device " << device;
  }
  EXPECT_EQ(fake.max_total_, 3u) << "12 trials on 3 devices: 3 at a time";
}

TEST(DevicePool, TrialsPerDeviceAllowsThatManyOnOneDeviceAndNoMore) {
  DeviceCheckingExecutor fake;
  DevicePoolExecutor pool(fake, DeviceList{"CUDA_VISIBLE_DEVICES", {"GPU-a", "GPU-b"}, "test"}, 2);
  runConcurrently(pool, 10);
  ASSERT_EQ(fake.max_per_device_.size(), 2u);
  for (const auto& [device, max] : fake.max_per_device_) EXPECT_EQ(max, 2u) << device;
  EXPECT_EQ(fake.max_total_, 4u);
}

TEST(DevicePool, RocmTrialsGetHipVisibleDevicesEvenWhenTheCaseUnsetsIt) {
  DeviceCheckingExecutor fake("HIP_VISIBLE_DEVICES");
  DevicePoolExecutor pool(fake, DeviceList{"HIP_VISIBLE_DEVICES", {"0", "1"}, "test"}, 1);
  TrialSpec spec;
  spec.env_unset = {"HIP_VISIBLE_DEVICES"};
  runConcurrently(pool, 4, spec);
  EXPECT_EQ(fake.max_per_device_.count("<none>"), 0u);
  EXPECT_EQ(fake.max_per_device_.size(), 2u);
  EXPECT_FALSE(fake.unset_seen_) << "the lease must not be removed again by env_unset";
}

// A trial waiting for a device while the run is interrupted ends as
// cancelled without ever running.
TEST(DevicePool, TrialWaitingForABusyDeviceIsCancelledWithoutRunning) {
  DevicePool pool({"0"}, 1);
  ASSERT_EQ(pool.acquire(nullptr), std::optional<std::size_t>(0));
  std::atomic<bool> cancel{false};
  std::optional<std::size_t> got{42};
  std::thread waiter([&] { got = pool.acquire(&cancel); });
  std::this_thread::sleep_for(100ms);
  cancel = true;
  waiter.join();
  EXPECT_FALSE(got.has_value());
  pool.release(0);
  EXPECT_EQ(pool.acquire(nullptr), std::optional<std::size_t>(0)) << "released devices are leased again";
}

TEST(DevicePool, DeviceListsAreParsedAndBadOnesRefused) {
  EXPECT_EQ(parseDeviceList("0,1, 3"), (std::vector<std::string>{"0", "1", "3"}));
  EXPECT_EQ(parseDeviceList("GPU-1f2e"), (std::vector<std::string>{"GPU-1f2e"}));
  EXPECT_THROW(parseDeviceList("0,,1"), BadInputError);
  EXPECT_THROW(parseDeviceList("0,1,0"), BadInputError);
  EXPECT_THROW(parseExecutorOverrides("kubernetes", "", 0), BadInputError);
  const ExecutorOverrides o = parseExecutorOverrides("local", "2,3", 2);
  EXPECT_EQ(*o.devices, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(*o.trials_per_device, 2u);
}

// The user's CUDA_VISIBLE_DEVICES is the list to share out (its ids, not 0..N-1).
TEST(DevicePool, DetectionTakesTheDevicesCudaVisibleDevicesAllows) {
  const char* old = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = old ? old : "";
  ::setenv("CUDA_VISIBLE_DEVICES", "2,5", 1);
  const DeviceList list = detectDevices();
  if (old)
    ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  else
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(list.variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(list.ids, (std::vector<std::string>{"2", "5"}));
}

}  // namespace
}  // namespace minrepro
