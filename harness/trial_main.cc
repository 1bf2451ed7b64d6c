#include "harness/trial_main.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Logging.h>
#include <c10/util/Type.h>
#include <torch/script.h>
#include <torch/version.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "harness/batch_io.h"
#include "harness/batch_store.h"
#include "harness/case_inference.h"
#include "harness/contract_tensors.h"
#include "harness/precision.h"
#include "harness/transforms.h"
#include "reducers/selection_text.h"

namespace minrepro {

std::vector<std::string> harnessArgv(const std::string& trial_binary, const HarnessTrial& h,
                                     const std::string& batch_path) {
  std::vector<std::string> argv{trial_binary, "--model", h.model.string(), "--batch", batch_path, "--input", h.input};
  if (!h.target.empty()) {
    argv.insert(argv.end(), {"--target", h.target, "--loss", h.loss, "--ignore-index", std::to_string(h.ignore_index)});
  }
  for (const TransformSpec& t : h.transforms) argv.insert(argv.end(), {"--transform", transformArg(t)});
  return argv;
}

namespace {

struct TrialArgs {
  std::string model, batch, input = "input", target, loss = "none";
  int64_t ignore_index = -100;
  int threads = 1;
  int64_t check_classes = 0;              // > 0: check the target contract for this many classes first
  std::string ids;                        // names offending samples in that check
  std::vector<TransformStep> transforms;  // applied to the batch first, in order
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "minrepro-trial: " << why << "\n"
            << "usage: minrepro-trial --model M.pt --batch B.pt [--input NAME] [--target NAME]\n"
            << "                      [--loss cross_entropy|nll|none] [--ignore-index N] [--threads N]\n"
            << "                      [--check-targets CLASSES [--ids NAME]] [--transform SPEC]...\n";
  std::exit(2);
}

TrialArgs parseArgs(int argc, char** argv) {
  TrialArgs a;
  std::map<std::string, std::string*> strings{{"--model", &a.model},   {"--batch", &a.batch}, {"--input", &a.input},
                                              {"--target", &a.target}, {"--loss", &a.loss},   {"--ids", &a.ids}};
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) usage("missing value after " + key);
    const std::string value = argv[i + 1];
    if (auto it = strings.find(key); it != strings.end())
      *it->second = value;
    else if (key == "--ignore-index")
      a.ignore_index = std::stoll(value);
    else if (key == "--threads")
      a.threads = std::stoi(value);
    else if (key == "--check-targets")
      a.check_classes = std::stoll(value);
    else if (key == "--transform") {
      try {
        a.transforms.push_back(parseTransformArg(value));
      } catch (const std::invalid_argument& e) {
        usage(e.what());
      }
    } else
      usage("unknown option " + key);
  }
  if (a.model.empty() || a.batch.empty()) usage("--model and --batch are required");
  if (a.check_classes != 0 && (a.check_classes < 1 || a.target.empty()))
    usage("--check-targets needs a number of classes >= 1 and --target");
  if (a.loss != "cross_entropy" && a.loss != "nll" && a.loss != "none") usage("unknown loss " + a.loss);
  return a;
}

const at::Tensor& requireTensor(const NamedTensors& batch, const std::string& name) {
  const at::Tensor* t = batch.find(name);
  if (!t) throw std::invalid_argument("the batch has no tensor named '" + name + "'");
  return *t;
}

at::Tensor computeLoss(const TrialArgs& a, const at::Tensor& output, const at::Tensor& target) {
  if (a.loss == "cross_entropy")
    return at::cross_entropy_loss(output, target, {}, at::Reduction::Mean, a.ignore_index, 0.0);
  return at::nll_loss(output, target, {}, at::Reduction::Mean, a.ignore_index);
}

// The model as a fork server's parent loaded it (empty outside one, or when
// it did not load: each child then meets and reports the error itself).
struct PreloadedModel {
  std::string path;
  off_t size = -1;
  struct timespec mtime {};
  std::optional<torch::jit::Module> module;
};

PreloadedModel& preloaded() {
  static PreloadedModel model;
  return model;
}

bool unchangedSincePreload(const PreloadedModel& p, const std::string& path) {
  struct stat st {};
  return !p.path.empty() && p.path == path && ::stat(path.c_str(), &st) == 0 && st.st_size == p.size &&
         st.st_mtim.tv_sec == p.mtime.tv_sec && st.st_mtim.tv_nsec == p.mtime.tv_nsec;
}

// In a forked child the parent's module is this process's own copy-on-write
// copy: what its forward changes stays here, as in a freshly loaded one.
torch::jit::Module loadModel(const std::string& path) {
  const PreloadedModel& p = preloaded();
  if (p.module && unchangedSincePreload(p, path)) return *p.module;
  return torch::jit::load(path);
}

// A batch that breaks the target contract fails here, naming the samples,
// instead of deep inside the loss (docs/method.md, "Target contracts"). Exit 1, like a failed step.
bool targetsViolateContract(const TrialArgs& a, const NamedTensors& batch) {
  if (a.check_classes <= 0) return false;
  const TargetContract contract{a.target, a.check_classes, a.ignore_index, a.ids};
  const ContractResult result = checkClassTargets(batch, contract, a.batch);
  if (result.ok()) return false;
  std::cout.flush();
  std::cerr << "minrepro-trial: error: target contract violated: " << result.violations.front() << "\n"
            << renderContractResult(result, contract, a.batch);
  return true;
}

// The preloaded original (a fork server's), and the candidate a child cut from it.
std::unique_ptr<CaseConfig>& preloadedCase() {
  static std::unique_ptr<CaseConfig> config;
  return config;
}
std::unique_ptr<BatchStore>& preloadedBatch() {
  static std::unique_ptr<BatchStore> store;
  return store;
}
std::optional<NamedTensors>& candidateInMemory() {
  static std::optional<NamedTensors> batch;
  return batch;
}

int runTrial(const TrialArgs& a) {
  NamedTensors batch = candidateInMemory() ? std::move(*candidateInMemory()) : readBatchFile(a.batch);
  for (const TransformStep& step : a.transforms) applyTransform(batch, step);
  if (targetsViolateContract(a, batch)) return 1;
  torch::jit::Module model = loadModel(a.model);
  // minrepro compare's float32 variant: the batch is cast already, the
  // model's half parameters follow (else the variant only meets a dtype mismatch).
  if (const char* f = std::getenv("MINREPRO_FLOAT32"); f && std::string(f) == "1") castHalfModuleToFloat32(model);
  model.eval();
  torch::NoGradGuard no_grad;
  at::Tensor output = model.forward({requireTensor(batch, a.input)}).toTensor();
  std::cout << "minrepro-trial: forward ok, output " << dtypeName(output.scalar_type()) << output.sizes() << "\n";
  if (a.loss != "none" && !a.target.empty()) {
    at::Tensor loss = computeLoss(a, output, requireTensor(batch, a.target));
    std::cout << "minrepro-trial: " << a.loss << " loss " << loss.item<double>() << "\n";
  }
  return 0;
}

// Prints what an uncaught exception prints (the first line of the c10
// context included, since it names the operator) and dies as such a
// program dies: the signature sees the same family, operator and message.
[[noreturn]] void dieLikeUncaught(const std::string& type, const std::string& message, const std::string& raised_from) {
  std::cout.flush();
  std::cerr << "terminate called after throwing an instance of '" << type << "'\n"
            << "  what():  " << message << "\n";
  if (!raised_from.empty()) std::cerr << raised_from << "\n";
  std::cerr.flush();
  std::abort();
}

std::string raisedFromLine(const std::string& what) {
  const auto pos = what.find("Exception raised from ");
  if (pos == std::string::npos) return "";
  return what.substr(pos, what.find('\n', pos) - pos);
}

}  // namespace

void preloadModelFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // a child then reads (and reports) it itself
  // Deserialised once here (it also builds the TorchScript compiler's lazy
  // tables); never run here. A model that does not load is left for each
  // child to meet and report as a fresh process would.
  try {
    torch::jit::Module module = torch::jit::load(path);
    preloaded() = PreloadedModel{path, st.st_size, st.st_mtim, std::move(module)};
  } catch (const std::exception&) {
  }
}

void preloadCaseBatch(const std::filesystem::path& case_file) {
  auto config = std::make_unique<CaseConfig>(loadCase(case_file));
  completeCase(*config);
  preloadedBatch() = BatchStore::open(*config);
  shareWithForkedChildren(*preloadedBatch());
  preloadedCase() = std::move(config);  // the store refers to it
}

void useCandidateOfPreloaded(const std::string& selection_text) {
  const auto selection = parseSelectionText(selection_text);
  if (!preloadedBatch()) throw std::runtime_error("no batch was preloaded (--preload-case)");
  if (!selection) throw std::runtime_error("not a selection: " + selection_text.substr(0, 200));
  candidateInMemory() = candidateTensors(*preloadedBatch(), *selection);
}

void checkModelLoads(const std::filesystem::path& model) {
  try {
    torch::jit::load(model.string());
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    throw BadInputError(model.string() + ": trial.harness.model is not a TorchScript model that LibTorch " +
                        std::string(TORCH_VERSION) + " can load (" + why + "); save the model slice with " +
                        "torch.jit.script(model).save(path) or torch.jit.trace(model, example).save(path)");
  }
}

int trialMain(int argc, char** argv) {
  // A c10::Error symbolises the C++ stack when it is made (dladdr over ~290
  // libraries: 10-20 ms here). A trial prints only its message and its
  // "Exception raised from" line, which comes from the source location, not
  // from that stack: skip the work, in a fresh process and a forked one alike.
  c10::SetStackTraceFetcher([] { return std::string(); });
  const TrialArgs args = parseArgs(argc, argv);
  at::set_num_threads(args.threads);
  // trial.deterministic in case.yaml: an op without a deterministic kernel
  // then fails loudly instead of varying from run to run.
  if (const char* d = std::getenv("MINREPRO_DETERMINISTIC"); d && std::string(d) == "1")
    at::globalContext().setDeterministicAlgorithms(true, false);
  try {
    return runTrial(args);
  } catch (const c10::Error& e) {
    dieLikeUncaught(c10::demangle(typeid(e).name()), e.what_without_backtrace(), raisedFromLine(e.what()));
  } catch (const BadInputError& e) {
    std::cerr << "minrepro-trial: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    dieLikeUncaught(c10::demangle(typeid(e).name()), e.what(), "");
  }
}

}  // namespace minrepro
