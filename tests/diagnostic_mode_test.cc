// Diagnostic mode wired into shrink (docs/method.md, "Diagnostic mode", "Confirmation in the normal configuration",
// "ROCm"): trial.diagnostic in case.yaml, the plan by backend, and a whole shrink with an executor that records every
// trial's environment: the original's re-run and the reduction's trials get the backend's variables, the final
// confirmation runs without any, and the report says both.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <mutex>

#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"
#include "engine/shrink.h"
#include "harness/batch_io.h"
#include "tests/fake_trials.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

// The context: section of a fixture, as text to append to a case.yaml.
std::string contextSection(const std::string& fixture) {
  const std::string text = testing::readFile(std::string(MINREPRO_TEST_FIXTURES) + "/context/" + fixture);
  return text.substr(text.find("\ncontext:") + 1);  // not the comment line, which names it too
}

std::vector<std::int64_t> sampleIds(const TrialSpec& spec) {
  for (const auto& arg : spec.argv) {
    if (!arg.ends_with("batch.pt")) continue;
    const NamedTensors batch = readBatchFile(arg);
    if (!batch.find("sample_id")) return {};  // the probe's empty batch (engine/batch_dependence.h)
    const at::Tensor ids = batch.find("sample_id")->contiguous();
    return {ids.data_ptr<std::int64_t>(), ids.data_ptr<std::int64_t>() + ids.numel()};
  }
  return {};
}

// Fails while sample id 3 is in the batch; records every spec (thread safe).
class RecordingExecutor : public Executor {
 public:
  TrialOutcome run(const TrialSpec& spec) override {
    const auto ids = sampleIds(spec);
    {
      std::lock_guard lock(mutex_);
      // The file trace of the minimal case (engine/archive/bundle.h) is no trial of
      // the search: kept apart.
      if (spec.env_set.count("MINREPRO_FILE_TRACE")) {
        traces.push_back(spec);
        trace_batches.push_back(ids);
      } else {
        specs.push_back(spec);
        batches.push_back(ids);
      }
    }
    return std::count(ids.begin(), ids.end(), 3) ? testing::indexError(4) : testing::exitedWith(0, "");
  }
  std::vector<TrialSpec> specs;
  std::vector<TrialSpec> traces;
  std::vector<std::vector<std::int64_t>> trace_batches;
  std::vector<std::vector<std::int64_t>> batches;  // the sample ids of each spec's batch

 private:
  std::mutex mutex_;
};

struct DiagnosticShrink : ::testing::Test {
  testing::TempDir dir;
  ShrinkOptions options;

  void makeCase(const std::string& trial_extra, const std::string& context_fixture, const std::string& extra = "") {
    NamedTensors b;
    b.names = {"input", "sample_id"};
    b.tensors = {at::zeros({16, 2}), at::arange(16, at::kLong)};
    writeBatchFile(b, dir.path() / "batch.pt");
    testing::writeFile(dir.path() / "case.yaml",
                       "batch: batch.pt\nsamples: {tensors: {input: 0}, ids: sample_id}\n"
                       "trial: {command: [/bin/false, '{batch}']" +
                           trial_extra +
                           "}\n"
                           "flaky: {enabled: false}\n" +
                           extra + (context_fixture.empty() ? "" : contextSection(context_fixture)));
    options.config = dir.path() / "case.yaml";
    options.quiet = true;
    options.python = "/bin/true";
    // A fake executor scripts the trials: there is no real program for the
    // archive's repro.py to run, so the self-check (tested end to end) is off.
    options.self_check = false;
  }
  std::string report() {
    for (const auto& e : readTarGz(dir.path() / "repro.tar.gz"))
      if (e.name == "REPORT.md") return e.contents;
    return "";
  }
  // Every trial but the last (the confirmation) has exactly `env` among the
  // diagnostic variables; the last has none, and unsets them.
  void expectTrialsThenCleanConfirmation(const RecordingExecutor& exec, const Env& env) {
    ASSERT_GE(exec.specs.size(), 3u);
    for (std::size_t i = 0; i + 1 < exec.specs.size(); ++i) {
      for (const auto& [name, value] : env) EXPECT_EQ(exec.specs[i].env_set.at(name), value) << "trial " << i;
      for (const auto& name : {"CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL", "HIP_LAUNCH_BLOCKING"}) {
        const bool wanted = std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
        EXPECT_EQ(exec.specs[i].env_set.count(name) > 0, wanted) << name << " trial " << i;
      }
    }
    const TrialSpec& confirm = exec.specs.back();
    for (const auto& name :
         {"CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL", "AMD_SERIALIZE_COPY", "HIP_LAUNCH_BLOCKING"}) {
      EXPECT_FALSE(confirm.env_set.count(name)) << name;
      EXPECT_NE(std::find(confirm.env_unset.begin(), confirm.env_unset.end(), name), confirm.env_unset.end()) << name;
    }
  }
};

TEST_F(DiagnosticShrink, CudaTrialsGetLaunchBlockingAndTheConfirmationDoesNot) {
  makeCase("", "cuda.yaml");
  RecordingExecutor exec;
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  expectTrialsThenCleanConfirmation(exec, {{"CUDA_LAUNCH_BLOCKING", "1"}});
  // The file trace runs the minimal case as the confirmation does: plain, clean.
  ASSERT_EQ(exec.traces.size(), 1u);
  EXPECT_FALSE(exec.traces[0].env_set.count("CUDA_LAUNCH_BLOCKING"));
  EXPECT_TRUE(exec.traces[0].fresh_process);
  EXPECT_EQ(exec.trace_batches[0], (std::vector<std::int64_t>{3}));
  const std::string text = report();
  EXPECT_NE(text.find("- Diagnostic variables of the trials and the first re-run: CUDA_LAUNCH_BLOCKING=1 (auto: "
                      "backend CUDA 12.1 from the captured context); the final confirmation ran without any "
                      "diagnostic variable"),
            std::string::npos)
      << text;
  // A command picks its own device: the report says so, and what the captured run used.
  EXPECT_NE(text.find("Backend of the trials: chosen by the trial command; this machine offers "), std::string::npos)
      << text;
  EXPECT_NE(text.find("; the captured run used CUDA 12.1"), std::string::npos) << text;
}

TEST_F(DiagnosticShrink, ParallelTrialsRunTheConfirmationAheadAndStillWithoutThem) {
  // With free job slots the confirmation of the case the search is about
  // to end with runs beside its last trials (one pass: the search's end is
  // the run's), still without the variables.
  makeCase("", "cuda.yaml", "reducers: [samples]\n");
  options.jobs = 4;
  RecordingExecutor exec;
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  std::size_t confirmations = 0, last_trial = 0, confirmation_trial = 0;
  for (std::size_t i = 0; i < exec.specs.size(); ++i) {
    const TrialSpec& spec = exec.specs[i];
    const std::size_t number = std::stoul(spec.env_set.at("MINREPRO_TRIAL"));
    last_trial = std::max(last_trial, number);
    const auto& unset = spec.env_unset;
    if (std::find(unset.begin(), unset.end(), "CUDA_LAUNCH_BLOCKING") == unset.end()) {
      EXPECT_EQ(spec.env_set.at("CUDA_LAUNCH_BLOCKING"), "1") << "trial " << number;
      continue;
    }
    ++confirmations;
    confirmation_trial = number;
    EXPECT_FALSE(spec.env_set.count("CUDA_LAUNCH_BLOCKING"));
    EXPECT_EQ(exec.batches[i], (std::vector<std::int64_t>{3})) << "a confirmation of another case than the result";
  }
  EXPECT_EQ(confirmations, 1u);
  EXPECT_EQ(confirmation_trial, last_trial);
  // Run ahead: its result was in before the search ended.
  const std::string log = testing::readFile(dir.path() / "minrepro-work" / "minrepro.log");
  EXPECT_LT(log.find("trial " + std::to_string(confirmation_trial) + ":"), log.find("pass samples:")) << log;
  EXPECT_NE(report().find("Kept sample ids: [3]"), std::string::npos) << report();
}

TEST_F(DiagnosticShrink, RocmTrialsGetHipSwitchesNeverTheNvidiaVariable) {
  makeCase("", "rocm.yaml");
  RecordingExecutor exec;
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  expectTrialsThenCleanConfirmation(
      exec, {{"AMD_SERIALIZE_KERNEL", "3"}, {"AMD_SERIALIZE_COPY", "3"}, {"HIP_LAUNCH_BLOCKING", "1"}});
  EXPECT_NE(report().find("AMD_SERIALIZE_KERNEL=3 AMD_SERIALIZE_COPY=3 HIP_LAUNCH_BLOCKING=1 (auto: backend ROCm "
                          "5.6.31061-8c743ae5d from the captured context)"),
            std::string::npos)
      << report();
}

TEST_F(DiagnosticShrink, CpuTrialsGetNothing) {
  makeCase("", "cpu.yaml");
  RecordingExecutor exec;
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  expectTrialsThenCleanConfirmation(exec, {});
  EXPECT_NE(report().find("first re-run: none (auto: backend CPU from the captured context)"), std::string::npos)
      << report();
}

TEST_F(DiagnosticShrink, OffTurnsItOffAndOnWithoutAnAcceleratorIsBadInput) {
  makeCase(", diagnostic: off", "cuda.yaml");
  RecordingExecutor exec;
  ASSERT_EQ(runShrink(options, &exec), ExitStatus::Reduced);
  expectTrialsThenCleanConfirmation(exec, {});
  EXPECT_NE(report().find("first re-run: none (trial.diagnostic: off)"), std::string::npos) << report();

  makeCase(", diagnostic: on", "cpu.yaml");
  RecordingExecutor none;
  EXPECT_THROW(runShrink(options, &none), BadInputError);
  EXPECT_TRUE(none.specs.empty());
}

// ------------------------------------------------------------ the plan

CaseConfig withContext(bool harness, const std::map<std::string, std::string>& context, DiagnosticSetting s) {
  CaseConfig c;
  if (harness)
    c.harness = HarnessTrial{};
  else
    c.command = CommandTrial{{"/bin/false", "{batch}"}, {}, {}};
  c.context = context;
  c.diagnostic = s;
  return c;
}

TEST(DiagnosticPlan, ByTrialKindSettingAndBackend) {
  testing::TempDir dev;
  const std::map<std::string, std::string> cuda{{"backend", "cuda 12.1"}};
  // The built-in harness never leaves the CPU: auto gives nothing, on forces the recorded backend.
  EXPECT_TRUE(planDiagnostics(withContext(true, cuda, DiagnosticSetting::Auto), dev.path()).env.empty());
  EXPECT_EQ(planDiagnostics(withContext(true, cuda, DiagnosticSetting::On), dev.path()).env,
            (Env{{"CUDA_LAUNCH_BLOCKING", "1"}}));
  EXPECT_EQ(planDiagnostics(withContext(false, {}, DiagnosticSetting::Rocm), dev.path()).env.size(), 3u);
  EXPECT_THROW(planDiagnostics(withContext(false, {{"backend", "cpu"}}, DiagnosticSetting::On), dev.path()),
               BadInputError);
  // No backend recorded: the machine's device nodes decide (a fake /dev).
  EXPECT_TRUE(planDiagnostics(withContext(false, {}, DiagnosticSetting::Auto), dev.path()).env.empty());
  testing::writeFile(dev.path() / "kfd", "");
  const DiagnosticPlan rocm = planDiagnostics(withContext(false, {}, DiagnosticSetting::Auto), dev.path());
  EXPECT_EQ(rocm.backend.kind, Backend::Rocm);
  EXPECT_NE(rocm.describe().find("ROCm detected on this machine"), std::string::npos) << rocm.describe();
  testing::writeFile(dev.path() / "nvidiactl", "");
  EXPECT_EQ(detectMachineBackend(dev.path()).kind, Backend::Unknown);  // both: cannot tell
}

TEST(DiagnosticPlan, CaseYamlKeyIsCheckedAndWrittenBack) {
  testing::TempDir dir;
  NamedTensors b;
  b.names = {"input", "sample_id"};
  b.tensors = {at::zeros({2, 2}), at::arange(2, at::kLong)};
  writeBatchFile(b, dir.path() / "batch.pt");
  const std::string head =
      "batch: batch.pt\nsamples: {tensors: {input: 0}}\ntrial:\n  command: [/bin/false, '{batch}']\n";
  testing::writeFile(dir.path() / "case.yaml", head + "  diagnostic: sometimes\n");
  try {
    loadCase(dir.path() / "case.yaml");
    FAIL() << "accepted 'sometimes'";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("case.yaml:5:15: trial.diagnostic: expected one of auto, on, off, cuda, rocm, "
                                         "found 'sometimes'"),
              std::string::npos)
        << e.what();
  }
  testing::writeFile(dir.path() / "case.yaml", head + "  diagnostic: rocm\n");
  const CaseConfig c = loadCase(dir.path() / "case.yaml");
  EXPECT_EQ(c.diagnostic, DiagnosticSetting::Rocm);
  EXPECT_NE(renderCase(c, dir.path(), "batch.pt", "").find("diagnostic: rocm"), std::string::npos);
  EXPECT_EQ(loadCase(dir.path() / "case.yaml").diagnostic, DiagnosticSetting::Rocm);
}

}  // namespace
}  // namespace minrepro
