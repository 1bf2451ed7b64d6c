// Diagnostic mode by backend (docs/method.md, "Diagnostic mode", "ROCm"): the environment variables a
// diagnostic re-run of a captured case gets, chosen from the backend the
// capture recorded. NVIDIA: synchronous launches (CUDA_LAUNCH_BLOCKING=1).
// ROCm: HIP's own serialization switches, never the NVIDIA variable (on ROCm
// PyTorch keeps the `cuda` device name; the recorded `backend` says "rocm").
// CPU: nothing. These variables are for diagnosis only: the final
// confirmation of a reduced case runs without them. No LibTorch.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/case_config.h"
#include "core/process/process.h"

namespace minrepro {

enum class Backend { Cpu, Cuda, Rocm, Unknown };

struct BackendInfo {
  Backend kind = Backend::Unknown;
  std::string version;  // "12.1", "5.7.31921-d1770ee1b"; empty when not given
};

// Reads a backend text as minrepro_capture records it: "cpu", "cuda 12.1",
// "rocm 5.7.31921", also "hip 5.7", "ROCm 6.0", "CUDA" and lists such as
// "cpu, cuda 12.1" (the accelerator wins; ROCm wins over CUDA, as a ROCm
// build reports its devices as `cuda`). Anything else is Unknown.
BackendInfo parseBackend(std::string_view text);

// "CPU", "CUDA 12.1", "ROCm 5.7"; "unknown".
std::string backendName(const BackendInfo& backend);

// The backend of a captured context (case.yaml `context:`): its `backend`
// entry; without one, `torch_build` when it names ROCm (a ROCm build always
// runs on HIP); Unknown otherwise.
BackendInfo backendFromContext(const std::map<std::string, std::string>& context);

// name=value pairs for a diagnostic re-run: CUDA_LAUNCH_BLOCKING=1 on CUDA;
// AMD_SERIALIZE_KERNEL=3, AMD_SERIALIZE_COPY=3, HIP_LAUNCH_BLOCKING=1 on
// ROCm; none on CPU or an unknown backend.
std::vector<std::pair<std::string, std::string>> diagnosticEnvironment(const BackendInfo& backend);

// One line for logs and reports: "ROCm 5.7: AMD_SERIALIZE_KERNEL=3 ...",
// "CPU: no diagnostic variables", ...
std::string describeDiagnosticMode(const BackendInfo& backend);

// This machine's accelerator, from its device nodes under `dev_root`:
// kfd (ROCm), nvidiactl or nvidia0 (NVIDIA); Cpu when there is neither,
// Unknown when there are both (which one the trials use cannot be told).
BackendInfo detectMachineBackend(const std::filesystem::path& dev_root = "/dev");

// What `trial.diagnostic` gives the trials of a shrink (docs/method.md, "Diagnostic mode", "ROCm"):
// the variables, for the original's first re-run and every trial of the
// reduction; the final confirmation and `verify` run without them.
struct DiagnosticPlan {
  BackendInfo backend;
  std::vector<std::pair<std::string, std::string>> env;  // empty: no diagnostic mode
  std::string why;                                       // how the backend was chosen, for logs and the report
  // "CUDA 12.1: CUDA_LAUNCH_BLOCKING=1 (auto: backend from the captured context)"
  std::string describe() const;
};

// auto: the backend the trials run on: the built-in harness runs on the CPU
// (nothing); a command, the captured context's backend, else this machine's.
// on: the captured context's backend (else this machine's) even for the
// harness; a BadInputError when that backend has no diagnostic variables.
// off: nothing. cuda / rocm: that backend's variables.
DiagnosticPlan planDiagnostics(const CaseConfig& config, const std::filesystem::path& dev_root = "/dev");

// Every variable that changes how a GPU program runs, for diagnosis only
// (any backend's): a confirmation, a self-check or a verify run goes without them.
const std::vector<std::string>& diagnosticVariables();

// The normal configuration: none of diagnosticVariables() set, not even one
// the parent's environment or the case's env sets.
void removeDiagnosticVariables(TrialSpec& spec);

}  // namespace minrepro
