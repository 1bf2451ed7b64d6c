// Failure signatures: the family, operator and first message of a failed trial.
//
// A trial's output is read line by line and the FIRST error in it is kept
// (docs/method.md, "The first error and its context": later errors are mostly consequences of the first). PyTorch
// prints errors in a few forms, each with its own reader below:
//   - a CUDA/HIP kernel assertion ("Loss.cu:242: kernel: block: [..] Assertion `c` failed.")
//   - std::terminate's report of an uncaught C++ exception ("terminate called after throwing ...")
//   - a Python traceback, whose first block ends with the exception line
//   - a bare "SomeError: message" line (a harness or a log printing the error)
//   - a bare LibTorch what(): the message, then "Exception raised from X at file:line"
// TorchScript hides the real error inside "The following operation failed in
// the TorchScript interpreter." and is unwrapped wherever it appears.
//
// Lines for the built-in harness (minrepro-trial), anywhere in either stream:
//   minrepro-trial: operator: nll_loss                        names the operator (wins)
//   minrepro-trial: c10::IndexError: Target 4 is out of bounds.   an error with its type
//   minrepro-trial: error: cannot read batch.pt               an error without a type
#include "engine/failure_signature.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>
#include <vector>

namespace minrepro {
namespace {

constexpr auto npos = std::string::npos;
using Lines = std::vector<std::string>;

// The first 2 KiB of a line are enough to read an error. Longer lines are
// progress bars or printed tensors, and libstdc++'s std::regex recurses once
// per character matched by a '*': a 100 KB line overflows an 8 MB stack.
constexpr std::size_t kMaxLine = 2048;

// ---------------------------------------------------------------- strings

Lines splitLines(const std::string& text) {
  Lines lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == npos) end = text.size();
    std::string line = text.substr(start, std::min(end - start, kMaxLine));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != npos; }

template <std::size_t N>
bool containsAny(std::string_view s, const std::array<std::string_view, N>& parts) {
  for (auto part : parts)
    if (contains(s, part)) return true;
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// "nll_loss" or "quantized::add".
bool isOpName(std::string_view s) {
  for (auto sep = s.find("::"); sep != std::string_view::npos; sep = s.find("::")) {
    if (!isIdentifier(s.substr(0, sep))) return false;
    s.remove_prefix(sep + 2);
  }
  return isIdentifier(s);
}

// --------------------------------------------------------- operator names

bool stripSuffix(std::string& name, std::string_view suffix) {
  if (name.size() <= suffix.size() || !endsWith(name, suffix)) return false;
  name.erase(name.size() - suffix.size());
  return true;
}

bool stripNumberSuffix(std::string& name) {  // "_2", "_123": kernel variants
  const auto at = name.find_last_not_of("0123456789");
  if (at == npos || at + 1 == name.size() || name[at] != '_' || at == 0) return false;
  name.erase(at);
  return true;
}

// The kernels and C++ functions of one operator carry its name followed by a
// phase: nll_loss_forward_reduce_cuda_kernel_2d belongs to nll_loss.
void cutAtPhase(std::string& name) {
  for (std::string_view phase : {"_forward", "_backward"}) {
    const auto at = name.find(phase);
    if (at != npos && at > 0) name.erase(at);
  }
}

// Reduces a kernel or function name to the operator's name by removing the
// implementation suffixes (nll_loss_out_frame, addmm_impl_cpu_); empty when
// the name is not an operator at all (meta, operator(), a lambda).
std::string cleanOpName(std::string name) {
  if (startsWith(name, "aten::")) name.erase(0, 6);
  if (const auto dot = name.find('.'); dot != npos) name.erase(dot);  // overload: add.out
  if (!isOpName(name)) return {};
  cutAtPhase(name);
  static const std::array<std::string_view, 10> kSuffixes = {
      "_", "_out_frame", "_frame", "_out", "_cpu", "_cuda", "_kernel", "_impl", "_template", "_2d"};
  for (bool changed = true; changed;) {
    changed = stripNumberSuffix(name);
    for (auto suffix : kSuffixes) changed = stripSuffix(name, suffix) || changed;
  }
  static const std::array<std::string_view, 5> kNotOps = {"meta", "impl", "operator", "unknown",
                                                          "lambda"};
  for (auto not_op : kNotOps)
    if (name == not_op) return {};
  return name;
}

// The bare function name inside a kernel's pretty name: "void at::native::
// (anonymous namespace)::k<float>(float *, ...) [scalar_t = float]" -> "k".
std::string kernelName(std::string function) {
  for (std::string_view anon = "(anonymous namespace)::";;) {
    const auto at = function.find(anon);
    if (at == npos) break;
    function.erase(at, anon.size());
  }
  function = function.substr(0, function.find_first_of("(<"));
  function = trim(function);
  if (const auto space = function.rfind(' '); space != npos) function.erase(0, space + 1);
  if (const auto scope = function.rfind("::"); scope != npos) function.erase(0, scope + 2);
  return isIdentifier(function) ? function : std::string();
}

// ------------------------------------------------------- one raw error

struct RawError {
  std::string type;     // exception type as printed; empty when none was printed
  std::string message;  // first line of the message, as printed
  std::string op;       // operator named by the error's context, already cleaned
  bool kernel_assert = false;
};

std::string normalizeType(std::string type) {
  if (startsWith(type, "builtins.")) type.erase(0, 9);  // TorchScript's scripted raise
  return type;
}

// Where "IndexError: ..." or "c10::IndexError: ..." ends its type: the first
// ':' that is not half of a "::".
std::size_t typeEnd(std::string_view line) {
  std::size_t at = line.find(':');
  while (at != npos && at + 1 < line.size() && line[at + 1] == ':') at = line.find(':', at + 2);
  return at;
}

bool isExceptionType(std::string_view type) {
  if (type.empty() || !(std::isalpha(static_cast<unsigned char>(type[0])) || type[0] == '_')) return false;
  for (char c : type)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':') return false;
  return endsWith(type, "Error") || endsWith(type, "Exception") || startsWith(type, "c10::") ||
         startsWith(type, "torch::jit::");
}

// Python and LibTorch exception lines at column 0: "IndexError: ...",
// "torch.cuda.OutOfMemoryError: ...", "c10::Error: ...". Warnings do not end
// in Error and indented source lines ("    raise X(...)") do not start at 0.
// No std::regex here: this runs on every line of a trial's output.
bool splitStrictExceptionLine(const std::string& line, RawError& error) {
  const std::size_t end = typeEnd(line);
  if (end == npos || !isExceptionType(std::string_view(line).substr(0, end))) return false;
  error.type = normalizeType(line.substr(0, end));
  error.message = trim(std::string_view(line).substr(end + 1));
  return true;
}

// The exception line that ends a Python traceback block may name any class
// ("KeyboardInterrupt", "mypackage.DataError: ...").
void splitTracebackExceptionLine(const std::string& line, RawError& error) {
  if (splitStrictExceptionLine(line, error)) return;
  static const std::regex re(R"(^([A-Za-z_][\w.]*)(?::(?: ?(.*)))?$)");
  std::smatch m;
  if (std::regex_match(line, m, re)) {
    error.type = normalizeType(m[1].str());
    error.message = trim(m[2].str());
  } else {
    error.message = trim(line);
  }
}

// "RuntimeError: " followed by the message on the next line (TorchScript
// compilation errors, torch::jit::ErrorReport's what()).
void fillEmptyMessage(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to && error.message.empty(); ++i) error.message = trim(lines[i]);
}

bool isTracebackHeader(const std::string& line) {
  return startsWith(trim(line), "Traceback (most recent call last)");
}

bool isChainMarker(const std::string& line) {
  return startsWith(line, "During handling of the above exception") ||
         startsWith(line, "The above exception was the direct cause");
}

// --------------------------------------------------------- op from context

// "Exception raised from nll_loss_out_frame at ./aten/src/ATen/native/LossNLL.cpp:226"
// names the operator only when the function is an ATen kernel; c10's checks
// (c10_cuda_check_implementation) and the dispatcher (reportError) are not.
std::string opFromRaisedFrom(const std::string& line) {
  if (!startsWith(line, "Exception raised from ")) return {};
  static const std::regex re(R"(^Exception raised from (.+?) at (\S+?):\d+)");
  std::smatch m;
  if (!std::regex_search(line, m, re) || !contains(m[2].str(), "ATen/native")) return {};
  return cleanOpName(m[1].str());
}

std::string raisedFromOp(const Lines& lines, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i)
    if (auto op = opFromRaisedFrom(lines[i]); !op.empty()) return op;
  return {};
}

// A Python (or TorchScript) frame in torch/nn/functional.py names the
// functional the user called: `File ".../torch/nn/functional.py", line 3026,
// in cross_entropy`. Private helpers (_verify_batch_size) are skipped.
std::string functionalFrameOp(const std::string& line) {
  if (!contains(line, "functional.py")) return {};
  static const std::regex re(R"(nn[/\\]functional\.py", line \d+,? in ([A-Za-z]\w*))");
  std::smatch m;
  return std::regex_search(line, m, re) ? m[1].str() : std::string();
}

// Operators named by the message itself.
std::string opFromMessage(const std::string& message) {
  static const std::array<std::regex, 5> patterns = {
      std::regex(R"(Could not run '([\w:.]+)')"),
      std::regex(R"(Unknown builtin op: ([\w:]+))"),
      std::regex(R"(No such operator ([\w:]+))"),
      std::regex(R"rx("(\w+)" not implemented for ')rx"),
      std::regex(R"(in method wrapper_(?:\w*?__)?_*(\w+)\))"),
  };
  std::smatch m;
  for (const auto& re : patterns)
    if (std::regex_search(message, m, re)) return cleanOpName(m[1].str());
  return {};
}

// ---------------------------------------------------------------- TorchScript

// Replaces "The following operation failed in the TorchScript interpreter."
// by the error it wraps: the first exception line of the TorchScript
// traceback, with the functional frame just above it as the operator.
void unwrapTorchScript(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  if (!startsWith(error.message, "The following operation failed in the TorchScript")) return;
  for (std::size_t i = from + 1; i < to; ++i) {
    if (auto op = functionalFrameOp(lines[i]); !op.empty()) error.op = op;
    RawError inner;
    if (!splitStrictExceptionLine(lines[i], inner)) continue;
    fillEmptyMessage(inner, lines, i + 1, to);
    error.type = inner.type;
    error.message = inner.message;
    return;
  }
}

// ---------------------------------------------------------------- readers

std::optional<RawError> readKernelAssert(const std::string& line) {
  if (!contains(line, "ssertion `")) return std::nullopt;
  static const std::regex re(
      R"(^(.*?):(\d+): (.*?): (?:(?:block|global id): .*?\] )?(?:Device-side assertion|Assertion) `(.*)['`] failed\.?\s*$)");
  std::smatch m;
  if (!std::regex_match(line, m, re)) return std::nullopt;
  RawError error;
  error.kernel_assert = true;
  const std::string kernel = kernelName(m[3].str());
  // CUDA and HIP word it differently; one wording keeps signatures comparable.
  error.message = (kernel.empty() ? "" : kernel + ": ") + "Assertion `" + m[4].str() + "` failed.";
  error.op = cleanOpName(kernel);
  return error;
}

// terminate called after throwing an instance of 'c10::IndexError'
//   what():  Target 4 is out of bounds.
// Exception raised from nll_loss_out_frame at ./aten/src/ATen/native/LossNLL.cpp:226 (...)
RawError readTerminate(const Lines& lines, std::size_t at) {
  static const std::regex re(R"(terminate called after throwing an instance of '([^']+)')");
  std::smatch m;
  RawError error;
  if (std::regex_search(lines[at], m, re)) error.type = m[1].str();
  std::size_t end = at + 1;
  while (end < lines.size() && !startsWith(lines[end], "Exception raised from ") &&
         !startsWith(lines[end], "frame #") && !startsWith(lines[end], "terminate called") &&
         !isTracebackHeader(lines[end]))
    ++end;
  const std::size_t what = at + 1;
  if (what < end && startsWith(lines[what], "  what():")) {
    error.message = trim(std::string_view(lines[what]).substr(9));
    fillEmptyMessage(error, lines, what + 1, end);
  }
  error.op = raisedFromOp(lines, what, std::min(end + 1, lines.size()));
  unwrapTorchScript(error, lines, what, end);
  return error;
}

// A Python traceback: indented frames, then the exception line at column 0;
// its block ends where a chained exception or another traceback begins.
RawError readPythonTraceback(const Lines& lines, std::size_t at) {
  RawError error;
  std::size_t line = at + 1;
  for (; line < lines.size() && (lines[line].empty() || lines[line][0] == ' ' || lines[line][0] == '\t');
       ++line)
    if (auto op = functionalFrameOp(lines[line]); !op.empty()) error.op = op;
  if (line == lines.size()) return error;  // cut off before the exception line
  splitTracebackExceptionLine(lines[line], error);
  std::size_t end = line + 1;
  while (end < lines.size() && !isChainMarker(lines[end]) && !isTracebackHeader(lines[end])) ++end;
  fillEmptyMessage(error, lines, line + 1, end);
  // TORCH_SHOW_CPP_STACKTRACES=1 appends LibTorch's "Exception raised from".
  if (auto op = raisedFromOp(lines, line, end); !op.empty()) error.op = op;
  unwrapTorchScript(error, lines, line, end);
  return error;
}

// A line that is an error by itself: "RuntimeError: ..." from a log or a
// harness ("minrepro-trial: c10::IndexError: ...", "minrepro-trial: error: ..."),
// or a HIP/CUDA runtime error name ("hipErrorNoBinaryForGpu: ...").
std::optional<RawError> readBareLine(const std::string& line) {
  std::string rest = line;
  const bool from_harness = startsWith(rest, "minrepro-trial: ");
  if (from_harness) rest.erase(0, 16);
  RawError error;
  if (splitStrictExceptionLine(rest, error)) return error;
  if (from_harness && startsWith(rest, "error: ")) {
    error.message = trim(std::string_view(rest).substr(7));
    return error;
  }
  static const std::regex runtime_name(R"(\b(?:hip|cuda)Error[A-Z]\w*)");
  if ((!contains(rest, "hipError") && !contains(rest, "cudaError")) || !std::regex_search(rest, runtime_name))
    return std::nullopt;
  error.message = trim(rest);
  if (error.message.size() >= 2 && error.message.front() == '"' && error.message.back() == '"')
    error.message = error.message.substr(1, error.message.size() - 2);
  return error;
}

// A caught LibTorch error printed with what(): the message, then its origin.
RawError readBareLibTorchError(const Lines& lines, std::size_t at) {
  RawError error;
  error.type = "c10::Error";
  for (std::size_t i = at; i-- > 0 && error.message.empty();) error.message = trim(lines[i]);
  error.op = opFromRaisedFrom(lines[at]);
  return error;
}

std::optional<RawError> findFirstError(const std::string& text) {
  const Lines lines = splitLines(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (auto error = readKernelAssert(line)) return error;
    if (startsWith(line, "terminate called after throwing")) return readTerminate(lines, i);
    if (isTracebackHeader(line)) return readPythonTraceback(lines, i);
    if (auto error = readBareLine(line)) {
      fillEmptyMessage(*error, lines, i + 1, lines.size());
      unwrapTorchScript(*error, lines, i, lines.size());
      return error;
    }
    if (startsWith(line, "Exception raised from ")) return readBareLibTorchError(lines, i);
  }
  return std::nullopt;
}

std::optional<RawError> findKernelAssert(const std::string& text) {
  for (const auto& line : splitLines(text))
    if (auto error = readKernelAssert(line)) return error;
  return std::nullopt;
}

// "minrepro-trial: operator: nll_loss": the built-in harness knows the op.
std::string harnessOp(const std::string& text) {
  static constexpr std::string_view kPrefix = "minrepro-trial: operator: ";
  for (const auto& line : splitLines(text)) {
    if (!startsWith(line, kPrefix)) continue;
    std::string op = trim(std::string_view(line).substr(kPrefix.size()));
    if (startsWith(op, "aten::")) op.erase(0, 6);
    if (!op.empty()) return op;
  }
  return {};
}

// ---------------------------------------------------------------- families

bool isDeviceMismatch(const std::string& message) {
  static const std::array<std::string_view, 5> kPhrases = {
      "Expected all tensors to be on the same device", "found at least two devices",
      "Expected object of device type", "to have the same device as",
      "on the same device as the indexed tensor"};
  if (containsAny(message, kPhrases)) return true;
  // conv: "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be
  // the same": a device mismatch when only one side is on the GPU, else a dtype mismatch.
  static const std::regex re(R"(Input type \((\S+)\) and weight type \((\S+)\))");
  std::smatch m;
  return std::regex_search(message, m, re) && contains(m[1].str(), "cuda") != contains(m[2].str(), "cuda");
}

bool isOutOfMemory(const RawError& error) {
  static const std::array<std::string_view, 5> kPhrases = {
      "out of memory", "hiperroroutofmemory", "cudaerrormemoryallocation", "can't allocate memory",
      "defaultcpuallocator"};
  return contains(error.type, "OutOfMemoryError") || contains(error.type, "bad_alloc") ||
         containsAny(lower(error.message), kPhrases);
}

bool isOpUnavailable(const RawError& error) {
  static const std::array<std::string_view, 8> kPhrases = {
      "Could not run '",         "Unknown builtin op",          "No such operator",
      "not implemented for '",   "no kernel image is available", "hipErrorNoBinaryForGpu",
      "invalid device function", "not compiled with CUDA"};
  return endsWith(error.type, "NotImplementedError") || containsAny(error.message, kPhrases);
}

// Messages that keep their meaning where the exception type was lost
// (TorchScript turns every error into a RuntimeError).
bool looksLikeIndexError(const std::string& message) {
  static const std::array<std::string_view, 3> kPhrases = {"out of bounds", "index out of range",
                                                           "Dimension out of range"};
  return containsAny(message, kPhrases);
}

bool looksLikeValueError(const std::string& message) {
  static const std::array<std::string_view, 9> kPhrases = {
      "shapes cannot be multiplied",   "expected scalar type",     "to match target batch_size",
      "size mismatch",                 "is invalid for input of size", "must match the size of tensor",
      "doesn't match the broadcast shape", "Found dtype",           "should be the same"};
  return containsAny(message, kPhrases);
}

FailureFamily familyOf(const RawError& error) {
  const std::string& type = error.type;
  const std::string& message = error.message;
  if (error.kernel_assert || contains(message, "device-side assert")) return FailureFamily::DeviceAssert;
  if (isOutOfMemory(error)) return FailureFamily::OutOfMemory;
  if (isOpUnavailable(error)) return FailureFamily::OpUnavailable;
  if (isDeviceMismatch(message)) return FailureFamily::DeviceMismatch;
  if (endsWith(type, "IndexError")) return FailureFamily::IndexError;
  if (endsWith(type, "ValueError") || endsWith(type, "TypeError")) return FailureFamily::ValueError;
  if (looksLikeIndexError(message)) return FailureFamily::IndexError;
  if (looksLikeValueError(message)) return FailureFamily::ValueError;
  return FailureFamily::RuntimeError;
}

// ---------------------------------------------------------------- signatures

struct OutputReading {
  std::optional<RawError> error;
  std::string harness_op;
};

// stderr first: that is where Python and std::terminate report. A device
// assert's kernel line may sit in the other stream (device printf goes to
// stdout); it names the kernel, so it is fetched from wherever it is.
OutputReading readOutput(const std::string& primary, const std::string& secondary) {
  OutputReading reading;
  reading.error = findFirstError(primary);
  if (!reading.error) reading.error = findFirstError(secondary);
  if (reading.error && !reading.error->kernel_assert &&
      familyOf(*reading.error) == FailureFamily::DeviceAssert) {
    auto kernel = findKernelAssert(primary);
    if (!kernel) kernel = findKernelAssert(secondary);
    if (kernel) reading.error = kernel;
  }
  reading.harness_op = harnessOp(primary);
  if (reading.harness_op.empty()) reading.harness_op = harnessOp(secondary);
  return reading;
}

void fillFromError(FailureSignature& signature, const RawError& error) {
  signature.family = familyOf(error);
  signature.message = normalizeMessage(error.message);
  if (signature.message.empty()) signature.message = normalizeMessage(error.type);
  signature.op = opFromMessage(error.message);
  if (signature.op.empty() || error.kernel_assert) signature.op = error.op;
}

// ---------------------------------------------------------------- normalizing

bool isPathStart(const std::string& s, std::size_t at) {
  return at == 0 || std::string_view(" \t'\"(=:[,").find(s[at - 1]) != std::string_view::npos;
}

// "/tmp/tmpab12cd/batch.pt" -> "<tmp>/batch.pt": the temp root and the
// per-run directory under it vary between runs; the file name does not.
std::string replaceTempRoot(const std::string& s, std::string root) {
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root.size() < 2) return s;
  std::string out;
  std::size_t pos = 0;
  for (std::size_t at = s.find(root); at != npos; at = s.find(root, pos)) {
    std::size_t after = at + root.size();
    if (!isPathStart(s, at) || (after < s.size() && s[after] != '/')) {
      out.append(s, pos, after - pos);
      pos = after;
      continue;
    }
    out.append(s, pos, at - pos).append("<tmp>");
    const std::size_t component_end = after < s.size() ? s.find_first_of("/ \t'\"),]", after + 1) : npos;
    if (component_end != npos && s[component_end] == '/') after = component_end;
    pos = after;
  }
  return out.append(s, pos);
}

std::string collapseWhitespace(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    out += c;
    space = false;
  }
  return out;
}

// The comparable part of a message: its first sentence, numbers masked. Later
// sentences hold what changes with the batch without changing the bug: OOM
// statistics, backend lists, advice.
std::string messageKey(const std::string& message) {
  std::string shape = messageShape(message);
  if (const auto end = shape.find(". "); end != npos) shape.erase(end + 1);
  return shape;
}

std::string shorten(const std::string& s, std::size_t limit) {
  return s.size() <= limit ? s : s.substr(0, limit) + "...";
}

enum class FamilyOrigin { Pass, Error, Exit, Start };

struct FamilyInfo {
  FailureFamily family;
  std::string_view name;
  FamilyOrigin origin;
  std::string_view check_first, avoid;
};

const FamilyInfo kFamilies[] = {
#define MINREPRO_FAILURE_FAMILY(enumerator, name, origin, check, avoid) \
  {FailureFamily::enumerator, name, FamilyOrigin::origin, check, avoid},
#include "engine/failure_families.def"
#undef MINREPRO_FAILURE_FAMILY
};

const FamilyInfo& infoOf(FailureFamily family) {
  // The table is in enum order (both come from the .def file).
  return kFamilies[static_cast<std::size_t>(family)];
}

// The user's failure.message pattern, compiled once per distinct pattern and
// thread (the oracle matches every trial against the same one).
const std::regex* userRegex(const std::string& pattern) {
  thread_local std::string cached_pattern;
  thread_local std::optional<std::regex> cached;
  thread_local bool valid = false;
  if (!cached || cached_pattern != pattern) {
    cached_pattern = pattern;
    try {
      cached.emplace(pattern, std::regex::ECMAScript);
      valid = true;
    } catch (const std::regex_error&) {
      cached.emplace();
      valid = false;
    }
  }
  return valid ? &*cached : nullptr;
}

SignatureMatch mismatch(std::string why) { return SignatureMatch{false, std::move(why)}; }

std::string familyMismatch(FailureFamily got, FailureFamily expected) {
  return "family " + familyName(got) + ", expected " + familyName(expected);
}

std::optional<std::string> messageMismatch(const FailureSignature& original,
                                           const FailureSignature& candidate,
                                           const std::string& pattern) {
  if (pattern.empty()) {
    if (messageKey(candidate.message) == messageKey(original.message)) return std::nullopt;
    return "different message: \"" + shorten(candidate.message, 80) + "\"";
  }
  const std::regex* re = userRegex(pattern);
  if (re == nullptr) return "invalid message pattern /" + pattern + "/";
  if (std::regex_search(candidate.message, *re)) return std::nullopt;
  return "message does not match /" + pattern + "/";
}

}  // namespace

std::string familyName(FailureFamily family) { return std::string(infoOf(family).name); }

const std::vector<FailureFamily>& allFailureFamilies() {
  static const std::vector<FailureFamily> all = [] {
    std::vector<FailureFamily> families;
    for (const auto& info : kFamilies) families.push_back(info.family);
    return families;
  }();
  return all;
}

bool isExpectableFamily(FailureFamily family) {
  const FamilyOrigin origin = infoOf(family).origin;
  return origin == FamilyOrigin::Error || origin == FamilyOrigin::Exit;
}

FamilyAdvice familyAdvice(FailureFamily family) {
  const FamilyInfo& info = infoOf(family);
  return {std::string(info.check_first), std::string(info.avoid)};
}

// Accepts the names familyName gives, in any case and with '_' for '-'.
std::optional<FailureFamily> parseFamily(const std::string& name) {
  std::string wanted = lower(trim(name));
  for (char& c : wanted)
    if (c == '_') c = '-';
  for (const auto& info : kFamilies)
    if (wanted == info.name) return info.family;
  return std::nullopt;
}

std::string FailureSignature::summary() const {
  if (family == FailureFamily::None) return "passed";
  std::string line = familyName(family);
  if (family == FailureFamily::Signal && !signal_name.empty()) line += " " + signal_name;
  if (!op.empty()) line += " in " + op;
  if (!message.empty()) line += ": " + shorten(message, 200);
  return line;
}

FailureSignature classifyText(const std::string& text) {
  FailureSignature signature;
  const OutputReading reading = readOutput(text, "");
  if (!reading.error) return signature;
  fillFromError(signature, *reading.error);
  if (!reading.harness_op.empty()) signature.op = reading.harness_op;
  return signature;
}

FailureSignature classify(const TrialOutcome& outcome) {
  FailureSignature signature;
  if (outcome.end == TrialEnd::FailedToStart) {
    signature.family = FailureFamily::StartFailure;
    signature.message = normalizeMessage(outcome.start_error);
    return signature;
  }
  if (outcome.passed()) return signature;  // an exit 0 is a pass, whatever was printed
  const OutputReading reading = readOutput(outcome.stderr_text, outcome.stdout_text);
  if (outcome.end == TrialEnd::Signaled) signature.signal_name = signalName(outcome.signal);
  if (outcome.end == TrialEnd::TimedOut) {
    signature.family = FailureFamily::Timeout;  // what it printed before the kill is not the cause
  } else if (reading.error) {
    fillFromError(signature, *reading.error);
  } else if (outcome.end == TrialEnd::Signaled) {
    signature.family = FailureFamily::Signal;
  } else {
    signature.family = FailureFamily::NonzeroExit;
    signature.message = "exit status " + std::to_string(outcome.exit_code);
  }
  if (!reading.harness_op.empty()) signature.op = reading.harness_op;
  return signature;
}

std::string normalizeMessage(const std::string& message) {
  static const std::regex ansi(R"(\x1b\[[0-9;]*[A-Za-z])");
  static const std::regex trial_dir(
      R"([^\s'"(]*(?:minrepro-work/|trials/)trial-\d+(?:/tmp(?:/[^/\s'"]+(?=/))?)?)");
  static const std::regex hex(R"(0x[0-9a-fA-F]+)");
  static const std::regex pid(R"(\bpid\s*[=:]?\s*\d+)", std::regex::ECMAScript | std::regex::icase);
  static const std::regex process(R"(\bProcess \d+ has)");
  static const std::regex source_line(R"(\.(cpp|cc|cxx|c|h|hpp|cu|cuh|hip):\d+)");
  std::string s = std::regex_replace(message.substr(0, kMaxLine), ansi, "");
  if (contains(s, "minrepro-work/")) s = std::regex_replace(s, trial_dir, "<tmp>");
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr) s = replaceTempRoot(s, tmpdir);
  s = replaceTempRoot(replaceTempRoot(s, "/tmp"), "/var/tmp");
  s = std::regex_replace(s, hex, "0x?");
  s = std::regex_replace(s, pid, "pid ?");
  s = std::regex_replace(s, process, "Process ? has");
  s = std::regex_replace(s, source_line, ".$1:?");
  return collapseWhitespace(s);
}

std::string messageShape(const std::string& message) {
  std::string shape;
  bool in_number = false;
  for (char c : normalizeMessage(message)) {
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!digit) shape += c;
    else if (!in_number) shape += '#';
    in_number = digit;
  }
  return shape;
}

SignatureMatch matchSignature(const FailureSignature& original, const FailureSignature& candidate,
                              const ExpectedFailure& expected) {
  if (candidate.family == FailureFamily::None) return mismatch("the candidate passed");
  if (candidate.family == FailureFamily::StartFailure) return mismatch("the trial could not start");
  if (candidate.family != original.family) return mismatch(familyMismatch(candidate.family, original.family));
  if (expected.family && candidate.family != *expected.family)
    return mismatch(familyMismatch(candidate.family, *expected.family));
  if (candidate.family == FailureFamily::Signal && candidate.signal_name != original.signal_name)
    return mismatch("signal " + candidate.signal_name + ", expected " + original.signal_name);
  for (const std::string& op : {expected.require_original_op ? original.op : std::string(), expected.op}) {
    if (!op.empty() && candidate.op != op)
      return mismatch("operator " + (candidate.op.empty() ? "unknown" : candidate.op) + ", expected " + op);
  }
  if (auto why = messageMismatch(original, candidate, expected.message_regex)) return mismatch(*why);
  return SignatureMatch{true, ""};
}

}  // namespace minrepro
