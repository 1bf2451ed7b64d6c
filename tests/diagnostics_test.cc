// Diagnostic mode by backend, chosen from captured contexts (fixtures under
// tests/fixtures/context/, as minrepro_capture writes them).
#include "engine/diagnostics.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace minrepro {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::map<std::string, std::string> context(const std::string& fixture) {
  const YAML::Node root = YAML::LoadFile(std::string(MINREPRO_TEST_FIXTURES) + "/context/" + fixture);
  std::map<std::string, std::string> out;
  for (const auto& entry : root["context"]) out[entry.first.as<std::string>()] = entry.second.as<std::string>();
  return out;
}

bool hasName(const Env& env, const std::string& name) {
  for (const auto& [key, value] : env)
    if (key == name) return true;
  return false;
}

TEST(Diagnostics, CpuContextGetsNothing) {
  const BackendInfo b = backendFromContext(context("cpu.yaml"));
  EXPECT_EQ(b.kind, Backend::Cpu);
  EXPECT_TRUE(diagnosticEnvironment(b).empty());
  EXPECT_NE(describeDiagnosticMode(b).find("CPU: no diagnostic variables"), std::string::npos);
}

TEST(Diagnostics, CudaContextGetsSynchronousLaunchesOnly) {
  const BackendInfo b = backendFromContext(context("cuda.yaml"));
  EXPECT_EQ(b.kind, Backend::Cuda);
  EXPECT_EQ(b.version, "12.1");
  EXPECT_EQ(diagnosticEnvironment(b), (Env{{"CUDA_LAUNCH_BLOCKING", "1"}}));
  EXPECT_EQ(describeDiagnosticMode(b), "CUDA 12.1: CUDA_LAUNCH_BLOCKING=1");
}

TEST(Diagnostics, RocmContextGetsHipSwitchesAndNeverTheNvidiaVariable) {
  // Its devices are named cuda:0 (PyTorch keeps the name on ROCm): the backend decides.
  const auto ctx = context("rocm.yaml");
  EXPECT_NE(ctx.at("devices").find("cuda:0"), std::string::npos);
  const BackendInfo b = backendFromContext(ctx);
  EXPECT_EQ(b.kind, Backend::Rocm);
  EXPECT_EQ(b.version, "5.6.31061-8c743ae5d");
  const Env env = diagnosticEnvironment(b);
  EXPECT_EQ(env, (Env{{"AMD_SERIALIZE_KERNEL", "3"}, {"AMD_SERIALIZE_COPY", "3"}, {"HIP_LAUNCH_BLOCKING", "1"}}));
  EXPECT_FALSE(hasName(env, "CUDA_LAUNCH_BLOCKING"));
  EXPECT_EQ(describeDiagnosticMode(b).rfind("ROCm 5.6.31061-8c743ae5d:", 0), 0u) << describeDiagnosticMode(b);
}

TEST(Diagnostics, RocmBuildWithoutBackendEntryIsStillRocm) {
  const BackendInfo b = backendFromContext(context("rocm-build-only.yaml"));
  EXPECT_EQ(b.kind, Backend::Rocm);
  EXPECT_FALSE(hasName(diagnosticEnvironment(b), "CUDA_LAUNCH_BLOCKING"));
}

TEST(Diagnostics, BackendTexts) {
  EXPECT_EQ(parseBackend("cpu").kind, Backend::Cpu);
  EXPECT_EQ(parseBackend("CUDA").kind, Backend::Cuda);
  EXPECT_EQ(parseBackend("cuda 11.8").version, "11.8");
  EXPECT_EQ(parseBackend("hip 5.7").kind, Backend::Rocm);
  EXPECT_EQ(parseBackend("ROCm 6.0").version, "6.0");
  EXPECT_EQ(parseBackend("cpu, cuda 12.1").kind, Backend::Cuda);  // the accelerator wins
  EXPECT_EQ(parseBackend("cuda, rocm 5.7").kind, Backend::Rocm);  // a ROCm build names its devices cuda
  EXPECT_EQ(parseBackend("nocuda").kind, Backend::Unknown);       // whole words only
  EXPECT_EQ(parseBackend("tpu").kind, Backend::Unknown);
  EXPECT_EQ(parseBackend("").kind, Backend::Unknown);
  EXPECT_TRUE(diagnosticEnvironment(parseBackend("tpu")).empty());
  EXPECT_TRUE(backendFromContext({}).kind == Backend::Unknown);
  // A CUDA build running on the CPU gets nothing: torch_build alone does not make it CUDA.
  EXPECT_EQ(backendFromContext({{"torch_build", "cuda 12.1"}}).kind, Backend::Unknown);
  EXPECT_EQ(backendFromContext({{"backend", "cpu"}, {"torch_build", "cuda 12.1"}}).kind, Backend::Cpu);
}

}  // namespace
}  // namespace minrepro
