// The failing operator call as the op recorder writes it (call.txt, by
// harness/python/op_recorder/minrepro_op.py), and what the op step
// (engine/op_step/op_step.h) made of it. Plain data, here below the engine:
// the op step makes it, the archive's reports and `compare` read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace minrepro {

// One tensor argument of the call, as call.txt describes it.
struct OpTensor {
  std::string name;  // the schema's argument name ("self", "target"), numbered inside lists
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::string layout;  // "stride [4,1] offset 0"
  std::string device;
  std::string storage;  // "own" or "shared with mat2"

  std::string describe() const;  // "self float32 [3,4] stride [4,1] offset 0 cpu, own storage"
};

struct OpCall {
  std::string op;                 // "aten::nll_loss_forward.default"
  std::string call;               // "torch.ops.aten.nll_loss_forward.default"
  std::string phase;              // "forward", "backward", "unknown" (torch 1.13 cannot tell for most calls)
  std::size_t index = 0;          // its place among the process's operator calls, from 1
  std::string error;              // "IndexError: Target 4 is out of bounds."; empty for a fatal signal
  std::vector<std::string> args;  // Python source, tensors as T['name']
  std::vector<OpTensor> tensors;
  std::string unsupported;  // an argument that cannot be written as source; empty when none
};

// Reads call.txt; nullopt when the file is missing or names no operator.
std::optional<OpCall> readOpCall(const std::filesystem::path& file);

enum class OpStepStatus {
  Made,         // op/repro_op.py fails alone like the case
  NotIsolated,  // no call fails alone like the case: `why`
  NotTried,     // --no-op-repro, an interrupted run, a family no call explains (a timeout): `why`
};

struct OpStepResult {
  OpStepStatus status = OpStepStatus::NotTried;
  std::string why;
  std::optional<OpCall> found;    // the call as recorded
  std::optional<OpCall> reduced;  // the call repro_op.py makes (Made)
  std::string script;             // repro_op.py (Made)
  std::filesystem::path dir;      // holds repro_op.py and inputs.pt (Made)
  std::size_t processes = 0;      // runs of the step besides the reduction's trials
  std::size_t reduction_trials = 0;
  double reduction_seconds = 0;  // the bound its reduction had (OpStep::reduction_seconds)
  std::string not_reduced;       // why the call's inputs stayed as recorded; empty when reduced
  std::string alone;             // "failed alone in 3 of 3 runs"
  int alone_runs = 0;            // of the last check alone (the script kept, when Made)
  int alone_failed = 0;          // of those, failed like the case
};

}  // namespace minrepro
