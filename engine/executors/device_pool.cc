#include "engine/executors/device_pool.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace minrepro {

std::vector<std::string> parseDeviceList(const std::string& text) {
  std::vector<std::string> ids;
  std::stringstream items(text);
  std::set<std::string> seen;
  for (std::string item; std::getline(items, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) throw BadInputError("an empty device id in '" + text + "' (write e.g. 0,1,2)");
    if (!seen.insert(item).second) throw BadInputError("device '" + item + "' twice in '" + text + "'");
    ids.push_back(item);
  }
  if (ids.empty()) throw BadInputError("no device ids in '" + text + "' (write e.g. 0,1,2)");
  return ids;
}

namespace {

// A tool's standard output, "" when it is missing or fails (no GPUs is normal).
std::string toolOutput(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return "";
  std::array<char, 4096> buf;
  std::string text;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;) text.append(buf.data(), n);
  return ::pclose(pipe) == 0 ? text : "";
}

bool onPath(const std::string& program) { return !resolveProgram(program).empty(); }

// The distinct numbers a pattern's first group matches, in order.
std::vector<std::string> indices(const std::string& text, const std::regex& pattern) {
  std::vector<std::string> ids;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
    if (std::find(ids.begin(), ids.end(), (*it)[1].str()) == ids.end()) ids.push_back((*it)[1].str());
  return ids;
}

}  // namespace

std::string deviceVariable() {
  return !onPath("nvidia-smi") && onPath("rocm-smi") ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
}

DeviceList detectDevices() {
  DeviceList list;
  for (const char* variable : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}) {
    const char* value = std::getenv(variable);
    if (!value) continue;
    list.variable = variable;
    list.source = variable;
    try {
      list.ids = parseDeviceList(value);
    } catch (const BadInputError&) {
      list.ids.clear();  // "" or "-1": no device allowed; trials get none to share
    }
    return list;
  }
  list.variable = deviceVariable();
  if (onPath("nvidia-smi")) {
    list.source = "nvidia-smi -L";
    list.ids = indices(toolOutput("nvidia-smi -L"), std::regex(R"(^GPU (\d+):)", std::regex::multiline));
  } else if (onPath("rocm-smi")) {
    list.source = "rocm-smi --showid";
    list.ids = indices(toolOutput("rocm-smi --showid"), std::regex(R"(GPU\[(\d+)\])"));
  }
  return list;
}

DevicePool::DevicePool(std::vector<std::string> ids, std::size_t per_device)
    : ids_(std::move(ids)), per_device_(std::max<std::size_t>(per_device, 1)), load_(ids_.size(), 0) {
  if (ids_.empty()) throw std::invalid_argument("a device pool needs at least one device");
}

std::optional<std::size_t> DevicePool::acquire(const std::atomic<bool>* cancel) {
  std::unique_lock lock(mutex_);
  while (true) {
    if (cancel && cancel->load()) return std::nullopt;
    const auto least = std::min_element(load_.begin(), load_.end());
    if (*least < per_device_) {
      ++*least;
      return static_cast<std::size_t>(least - load_.begin());
    }
    // Bounded waits: the cancel flag is set from a signal handler, which
    // cannot notify a condition variable.
    freed_.wait_for(lock, std::chrono::milliseconds(50));
  }
}

void DevicePool::release(std::size_t device) {
  {
    std::lock_guard lock(mutex_);
    --load_.at(device);
  }
  freed_.notify_one();
}

DevicePoolExecutor::DevicePoolExecutor(Executor& inner, DeviceList devices, std::size_t trials_per_device)
    : inner_(inner), devices_(std::move(devices)), pool_(devices_.ids, trials_per_device) {}

TrialOutcome DevicePoolExecutor::run(const TrialSpec& spec) {
  const std::optional<std::size_t> device = pool_.acquire(spec.cancel);
  if (!device) {
    TrialOutcome cancelled;
    cancelled.end = TrialEnd::Cancelled;
    return cancelled;
  }
  struct Lease {
    DevicePool& pool;
    std::size_t device;
    ~Lease() { pool.release(device); }
  } lease{pool_, *device};
  TrialSpec leased = spec;
  leased.env_set[devices_.variable] = pool_.id(*device);
  std::erase(leased.env_unset, devices_.variable);
  return inner_.run(leased);
}

}  // namespace minrepro
