// One accelerator per running trial on a machine with several: a decorator
// Executor that leases a device for each trial and hands it over through
// CUDA_VISIBLE_DEVICES (HIP_VISIBLE_DEVICES on ROCm), so with --jobs N the
// trials never share a device unless asked (trials_per_device > 1). A trial
// that finds every device busy waits for one (or for the run to stop).
//
// Put it above the fork servers: the variable is part of a trial's
// environment changes, so each device gets its own server (whose parent
// never initialises CUDA; fork_server.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/process/process.h"

namespace minrepro {

struct DeviceList {
  std::string variable = "CUDA_VISIBLE_DEVICES";  // or HIP_VISIBLE_DEVICES
  std::vector<std::string> ids;                   // as the variable takes them: "0", "GPU-<uuid>"
  std::string source;                             // where they came from, for the log
};

// "0,1,3" -> {"0","1","3"}; throws BadInputError (naming the item)
// on an empty item or a repeated one.
std::vector<std::string> parseDeviceList(const std::string& text);

// The devices trials may use: those CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES
// already allow (the user's choice wins), else every GPU `nvidia-smi -L` or
// `rocm-smi --showid` lists; empty on a machine without either.
DeviceList detectDevices();
// The variable this machine's runtime reads: HIP_VISIBLE_DEVICES when only
// ROCm is present (rocm-smi and no nvidia-smi), else CUDA_VISIBLE_DEVICES.
std::string deviceVariable();

// Counting leases, least-loaded device first so trials spread out.
class DevicePool {
 public:
  DevicePool(std::vector<std::string> ids, std::size_t per_device);
  // Blocks until a device has a free slot; nullopt once *cancel is true.
  std::optional<std::size_t> acquire(const std::atomic<bool>* cancel);
  void release(std::size_t device);
  const std::string& id(std::size_t device) const { return ids_.at(device); }
  std::size_t size() const { return ids_.size(); }

 private:
  std::vector<std::string> ids_;
  std::size_t per_device_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::size_t> load_;
};

class DevicePoolExecutor : public Executor {
 public:
  DevicePoolExecutor(Executor& inner, DeviceList devices, std::size_t trials_per_device);
  TrialOutcome run(const TrialSpec& spec) override;  // thread-safe
  bool buildsBatch(const TrialSpec& spec) const override { return inner_.buildsBatch(spec); }
  const DeviceList& devices() const { return devices_; }

 private:
  Executor& inner_;
  DeviceList devices_;
  DevicePool pool_;
};

}  // namespace minrepro
