// The C++ capture (capture.h): what harness/python/minrepro_capture writes,
// from a LibTorch training loop. LibTorch inside.
#include "harness/capture.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>
#include <c10/util/Type.h>
#include <sys/utsname.h>
#include <torch/csrc/api/include/torch/version.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/text_lines.h"
#include "harness/batch_io.h"

namespace fs = std::filesystem;

namespace minrepro {

bool isLastIncompleteBatch(std::int64_t dataset_size, std::int64_t batch_size, std::int64_t index, bool drop_last) {
  if (batch_size <= 0 || dataset_size % batch_size == 0 || drop_last) return false;
  return index == dataset_size / batch_size;  // the partial batch follows the full ones
}

namespace {

using Context = std::vector<std::pair<std::string, std::string>>;

// ---------------------------------------------------------------- text

// A double-quoted YAML scalar (as the Python capture writes them).
std::string yamlString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '\\')
      out += "\\\\";
    else if (ch == '"')
      out += "\\\"";
    else if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch < 0x20 || ch == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      out += hex;
    } else
      out += static_cast<char>(ch);
  }
  return out + "\"";
}

std::string firstLine(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto begin = line.find_first_not_of(" \t\r");
    if (begin != std::string::npos) return line.substr(begin, line.find_last_not_of(" \t\r") - begin + 1);
  }
  return "";
}

std::string shapeText(const at::Tensor& t) {
  std::string out = "[";
  for (std::int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

// ---------------------------------------------------------------- the error

struct ErrorInfo {
  std::string type, message, raised_at;
  bool c10_index = false, c10_value = false;  // families certain enough for failure.family
};

bool isDeviceAssert(const std::string& text) {
  for (const char* marker : {"device-side assert", "hipErrorAssert", "cudaErrorAssert", "device-side assertion"})
    if (text.find(marker) != std::string::npos) return true;
  return false;
}

// "Exception raised from nll_loss_out_frame at .../LossNLL.cpp:171 (most
// recent call first):" -> "nll_loss_out_frame at .../LossNLL.cpp:171".
std::string raisedFrom(const std::string& what) {
  const std::string marker = "Exception raised from ";
  const auto at = what.find(marker);
  if (at == std::string::npos) return "";
  std::string line = what.substr(at + marker.size(), what.find('\n', at) - at - marker.size());
  return line.substr(0, line.find(" (most recent call first)"));
}

ErrorInfo describeError(std::exception_ptr error) {
  ErrorInfo info;
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    info.type = c10::demangle(typeid(e).name());
    info.message = firstLine(e.what_without_backtrace());
    info.raised_at = raisedFrom(e.what());
    info.c10_index = dynamic_cast<const c10::IndexError*>(&e) != nullptr;
    info.c10_value = dynamic_cast<const c10::ValueError*>(&e) != nullptr || dynamic_cast<const c10::TypeError*>(&e);
  } catch (const std::exception& e) {
    info.type = c10::demangle(typeid(e).name());
    info.message = firstLine(e.what());
  } catch (...) {
    info.type = "an exception not derived from std::exception";
  }
  return info;
}

// ---------------------------------------------------------------- environment

std::string readCommand(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    std::array<char, 256> buffer;
    while (std::fgets(buffer.data(), buffer.size(), pipe)) out += buffer.data();
    if (::pclose(pipe) != 0) return "";
  }
  return out;
}

std::string gitRevision(const fs::path& dir) {
  const std::string git = "git -C " + text::shellWord(dir.string());
  std::string revision = firstLine(readCommand(git + " rev-parse HEAD 2>/dev/null"));
  if (revision.empty()) return "unknown (not in a git repository)";
  if (!firstLine(readCommand(git + " status --porcelain --untracked-files=no 2>/dev/null")).empty())
    revision += " (uncommitted changes)";
  return revision;
}

// "cuda 11.8" / "rocm 50700" from the runtime LibTorch was built with.
std::string acceleratorBackend() {
  const auto& hooks = at::detail::getCUDAHooks();
  std::string version;
  try {
    const long v = hooks.versionCUDART();
    version = hooks.hasROCM() ? std::to_string(v) : std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  } catch (const std::exception&) {
  }
  return std::string(hooks.hasROCM() ? "rocm" : "cuda") + (version.empty() ? "" : " " + version);
}

std::string backendOf(const std::set<std::string>& device_types) {
  std::string out;
  for (const auto& type : device_types)
    out += (out.empty() ? "" : ", ") + (type == "cuda" ? acceleratorBackend() : type);
  return out.empty() ? "cpu" : out;
}

std::string deviceNames(const std::set<std::string>& devices) {
  struct utsname host {};
  const std::string machine = ::uname(&host) == 0 ? host.machine : "";
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : ", ") + (d == "cpu" ? d + " " + machine : d);
  return out;
}

// ---------------------------------------------------------------- the batch

struct SavedBatch {
  NamedTensors tensors;
  std::string ids_key = "sample_id", ids_source;
  std::vector<std::string> sample_tensors;
  std::set<std::string> devices, device_types;
  std::vector<std::string> device_of;  // per user tensor, as it was
  std::int64_t size = 0;
};

at::Tensor idsFor(const CaptureBatch& batch, std::int64_t n, std::string* source, std::vector<std::string>& problems) {
  if (!batch.sample_ids.defined()) {
    *source = "positions in the batch (no sample ids given)";
    return at::arange(n, at::kLong);
  }
  at::Tensor ids = batch.sample_ids.detach().to(at::kCPU).reshape(-1).to(at::kLong).contiguous();
  if (ids.numel() == n) {
    *source = "given";
    return ids;
  }
  problems.push_back("sample_ids has " + std::to_string(ids.numel()) + " entries for a batch of " + std::to_string(n) +
                     "; positions used instead");
  *source = "positions in the batch (sample ids had the wrong length)";
  return at::arange(n, at::kLong);
}

SavedBatch saveBatch(const CaptureBatch& batch, const CaptureOptions& o, std::vector<std::string>& problems) {
  SavedBatch s;
  const at::Tensor* input = nullptr;
  for (const auto& [name, t] : batch.tensors) {
    if (!t.defined()) throw std::invalid_argument("the batch tensor '" + name + "' is undefined");
    s.devices.insert(t.device().str());
    s.device_types.insert(c10::DeviceTypeName(t.device().type(), /*lower_case=*/true));
    s.device_of.push_back(t.device().str());
    s.tensors.names.push_back(name);
    s.tensors.tensors.push_back(cloneKeepingLayout(t.detach().to(at::kCPU)));  // own storage, no autograd
    if (name == o.input_key) input = &t;
  }
  if (!input) throw std::invalid_argument("the batch has no tensor '" + o.input_key + "' (input_key)");
  s.size = input->dim() > 0 ? input->size(0) : 1;
  for (std::size_t i = 0; i < s.tensors.names.size(); ++i)
    if (s.tensors.tensors[i].dim() > 0 && s.tensors.tensors[i].size(0) == s.size)
      s.sample_tensors.push_back(s.tensors.names[i]);
  while (s.tensors.find(s.ids_key)) s.ids_key = "_" + s.ids_key;
  // Also makes the dict two entries or more (LibTorch 1.13 reads no one-entry dict).
  s.tensors.names.push_back(s.ids_key);
  s.tensors.tensors.push_back(idsFor(batch, s.size, &s.ids_source, problems));
  writeBatchFile(s.tensors, o.out_dir / "batch.pt");
  return s;
}

// ---------------------------------------------------------------- the trial

// Saves model.pt (a CPU copy when the module lives on a device); returns the
// context's note, or "" with a problem recorded.
std::string saveModel(const CaptureOptions& o, std::vector<std::string>& problems) {
  if (!o.model) return "";
  try {
    torch::jit::Module module = *o.model;
    bool on_device = false;
    for (const at::Tensor& p : module.parameters()) on_device = on_device || !p.device().is_cpu();
    if (on_device) {
      module = module.clone();  // .to() on the user's module would move the model they train
      module.to(at::kCPU);
    }
    module.save((o.out_dir / "model.pt").string());
    return std::string("torch::jit::Module (") + (module.is_training() ? "training" : "eval") + " mode)";
  } catch (const std::exception& e) {
    problems.push_back("model.pt not written: " + firstLine(e.what()));
    return "";
  }
}

std::vector<std::string> trialLines(const CaptureOptions& o, const SavedBatch& b, bool model_saved,
                                    std::vector<std::string>& problems) {
  std::ostringstream timeout;
  timeout << o.timeout_seconds;
  if (model_saved) {
    std::vector<std::string> lines{"trial:", "  harness:", "    model: model.pt",
                                   "    input: " + yamlString(o.input_key)};
    if (o.loss != "none" && b.tensors.find(o.target_key))
      lines.insert(lines.end(), {"    target: " + yamlString(o.target_key), "    loss: " + o.loss,
                                 "    ignore_index: " + std::to_string(o.ignore_index)});
    lines.push_back("  timeout: " + timeout.str());
    return lines;
  }
  if (!o.command.empty()) {
    std::string argv;
    for (const auto& a : o.command) argv += (argv.empty() ? "" : ", ") + yamlString(a);
    return {"trial:", "  command: [" + argv + "]", "  timeout: " + timeout.str()};
  }
  problems.push_back(std::string(o.model ? "the model could not be saved" : "no model was given") +
                     " and no command was given, so case.yaml has no trial: pass a scripted module "
                     "(CaptureOptions::model) or a command {program, ..., \"{batch}\"} (CaptureOptions::command), "
                     "or fill in the trial in case.yaml.draft and rename it to case.yaml");
  return {};
}

// failure.family only when the trial fails the same way for certain: the
// built-in harness on a batch that ran on the CPU (a CUDA device assert
// becomes an IndexError on the CPU harness).
std::string certainFamily(const ErrorInfo& e, const SavedBatch& b, bool harness) {
  if (!harness || b.device_types != std::set<std::string>{"cpu"}) return "";
  if (e.c10_index) return "index-error";
  if (e.c10_value) return "value-error";
  return "";
}

// ---------------------------------------------------------------- context

Context context(const CaptureOptions& o, const ErrorInfo& e, std::int64_t step, std::optional<std::int64_t> last_done,
                const CaptureBatch& batch, const SavedBatch& b, const std::string& model_note) {
  Context c{{"exception", e.type}, {"message", e.message}};
  if (!e.raised_at.empty()) c.emplace_back("raised_at", e.raised_at);
  c.emplace_back("step", std::to_string(step));
  c.emplace_back("last_completed_step", last_done ? std::to_string(*last_done) : "none");
  c.emplace_back("revision", gitRevision(o.source_dir));
  c.emplace_back("capture", "C++ (minrepro::CaptureSession)");
  c.emplace_back("libtorch", TORCH_VERSION);
  c.emplace_back("compiler", __VERSION__);
  c.emplace_back("backend", backendOf(b.device_types));
  c.emplace_back("torch_build", at::hasCUDA() ? acceleratorBackend() : "cpu only");
  c.emplace_back("devices", deviceNames(b.devices));
  c.emplace_back("batch_size", std::to_string(b.size));
  c.emplace_back("last_batch", !batch.last_batch ? "unknown" : *batch.last_batch ? "yes (incomplete)" : "no");
  c.emplace_back("sample_ids", b.ids_source);
  for (std::size_t i = 0; i + 1 < b.tensors.names.size(); ++i)
    c.emplace_back("tensor_" + b.tensors.names[i], dtypeName(b.tensors.tensors[i].scalar_type()) + " " +
                                                       shapeText(b.tensors.tensors[i]) + " on " + b.device_of[i]);
  std::string model = model_note.empty() ? (o.model ? "not saved" : "none given") : model_note;
  if (model_note.empty() && !o.command.empty()) model += "; the user's command is the trial";
  c.emplace_back("model", model);
  std::string branches;
  for (const auto& [name, state] : o.branches) branches += (branches.empty() ? "" : ", ") + name + "=" + state;
  if (!branches.empty()) c.emplace_back("branches", branches);
  return c;
}

// ---------------------------------------------------------------- files

void writeAtomically(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << text) || !out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, file);
}

std::string caseText(const CaptureOptions& o, const SavedBatch& b, const std::vector<std::string>& trial,
                     const std::string& family, const Context& ctx) {
  std::ostringstream out;
  out << "# Written by minrepro::CaptureSession at the first failure; reduce with:\n"
      << "#   minrepro shrink --config case.yaml\n"
      << "batch: batch.pt\nsamples:\n  tensors: {";
  for (std::size_t i = 0; i < b.sample_tensors.size(); ++i)
    out << (i ? ", " : "") << yamlString(b.sample_tensors[i]) << ": 0";
  out << "}\n  ids: " << yamlString(b.ids_key) << "\n";
  if (trial.empty())
    out << "# trial: no model file and no command: see CAPTURE-ERROR.txt\n"
        << "#   harness: {model: model.pt, input: " << o.input_key << "}\n"
        << "#   command: [/path/to/program, \"{batch}\"]\n";
  for (const auto& line : trial) out << line << "\n";
  if (!family.empty()) out << "failure:\n  family: " << family << "\n";
  out << "reducers: [samples]\noutput: repro.tar.gz\ncontext:\n";
  for (const auto& [key, value] : ctx) out << "  " << key << ": " << yamlString(value) << "\n";
  return out.str();
}

}  // namespace

CaptureSession::CaptureSession(CaptureOptions options, std::source_location where) : options_(std::move(options)) {
  if (options_.loss != "cross_entropy" && options_.loss != "nll" && options_.loss != "none")
    throw std::invalid_argument("minrepro::CaptureSession: loss must be cross_entropy, nll or none, found '" +
                                options_.loss + "'");
  bool has_batch = false;
  for (const auto& a : options_.command) has_batch = has_batch || a.find("{batch}") != std::string::npos;
  if (!options_.command.empty() && !has_batch)
    throw std::invalid_argument("minrepro::CaptureSession: one element of command must contain {batch}");
  if (options_.source_dir.empty()) options_.source_dir = fs::path(where.file_name()).parent_path();
}

CaptureInfo CaptureSession::write(std::int64_t step, const CaptureBatch& batch, std::exception_ptr error) {
  const ErrorInfo e = describeError(error);
  fs::create_directories(options_.out_dir);
  CaptureInfo info{fs::absolute(options_.out_dir), std::nullopt, std::nullopt, isDeviceAssert(e.message)};
  std::vector<std::string> problems;
  const SavedBatch b = saveBatch(batch, options_, problems);
  const std::string model_note = saveModel(options_, problems);
  const std::vector<std::string> trial = trialLines(options_, b, !model_note.empty(), problems);
  const Context ctx = context(options_, e, step, last_completed_, batch, b, model_note);
  const std::string text = caseText(options_, b, trial, certainFamily(e, b, !model_note.empty()), ctx);
  if (trial.empty()) {
    writeAtomically(info.case_dir / "case.yaml.draft", text);
  } else {
    info.case_file = info.case_dir / "case.yaml";
    writeAtomically(*info.case_file, text);
  }
  if (!problems.empty()) {
    std::string notes =
        std::string("minrepro::CaptureSession: ") +
        (trial.empty() ? "the case is incomplete: no trial could be written" : "notes on the captured case") + "\n";
    for (const auto& p : problems) notes += "- " + p + "\n";
    info.error_file = info.case_dir / "CAPTURE-ERROR.txt";
    writeAtomically(*info.error_file, notes);
  }
  captured_ = info;
  return info;
}

void CaptureSession::onFailure(std::int64_t step, const CaptureBatch& batch, std::exception_ptr error) {
  if (failed_once_) return;  // only the first error counts; later ones are often its consequences
  failed_once_ = true;
  std::optional<CaptureInfo> info;
  try {
    info = write(step, batch, error);
  } catch (const std::exception& e) {  // never hide the user's error behind ours
    std::cerr << "minrepro::CaptureSession: could not write the case to " << options_.out_dir.string() << ": "
              << e.what() << "\n";
  }
  if (info) {
    std::cerr << "minrepro::CaptureSession: wrote " << (info->case_file ? *info->case_file : *info->error_file).string()
              << " (" << describeError(error).type << " at step " << step << ")\n";
    if (info->case_file)
      std::cerr << "minrepro::CaptureSession: reduce it with: minrepro shrink --config " << info->case_file->string()
                << "\n";
  }
  if (isDeviceAssert(describeError(error).message)) {
    std::cerr << "minrepro::CaptureSession: a device-side assert invalidates this process's CUDA/HIP context "
                 "(existing allocations are lost); training cannot continue in this process. Exiting with status "
              << kDeviceAssertExitCode
              << ". Restarting will not fix the cause: check the captured batch's indices "
                 "and targets.\n"
              << std::flush;
    std::exit(kDeviceAssertExitCode);
  }
}

}  // namespace minrepro
