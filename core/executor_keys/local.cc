// executor: {devices, trials_per_device}: which accelerator each running
// trial on this machine gets (engine/executors/device_pool.h).
#include <algorithm>

#include "core/executor_keys/executor_keys.h"

namespace minrepro {

namespace {

using namespace case_yaml;

void readLocalKeys(const Loader& l, const MapView& m, ExecutorConfig& e) {
  if (const Value* x = m.find("devices")) {
    if (e.kind == ExecutorKind::Slurm)
      fail(l, *x, "no 'devices' with kind: slurm", "it", "ask Slurm for GPUs with 'gres: gpu:1'");
    e.devices = stringList(l, *x, "device ids (e.g. [0, 1])");
    for (std::size_t i = 0; i < e.devices.size(); ++i)
      if (std::find(e.devices.begin(), e.devices.begin() + i, e.devices[i]) != e.devices.begin() + i)
        fail(l, itemOf(*x, i), "each device once", inQuotes(e.devices[i]) + " again", "remove it");
  }
  if (const Value* x = m.find("trials_per_device"))
    e.trials_per_device = static_cast<std::size_t>(integer(l, *x, "an integer from 1 to 64", 1, 64));
}

}  // namespace

const ExecutorKeys& localExecutorKeys() {
  static const ExecutorKeys keys{{"devices", "trials_per_device"}, readLocalKeys};
  return keys;
}

}  // namespace minrepro
