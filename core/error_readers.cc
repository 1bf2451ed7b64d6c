// The readers of core/error_readers.h: one per form an error is printed
// in, each starting at the line where its form begins and returning where it
// ends. See the header for the forms and the wrappers unwrapped here.
#include "core/error_readers.h"
#include "core/process/process.h"

#include <array>
#include <cctype>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>

namespace minrepro {

using namespace text;

namespace {

constexpr auto npos = std::string::npos;

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
  static const std::array<std::string_view, 10> kSuffixes = {"_",     "_out_frame", "_frame", "_out",      "_cpu",
                                                             "_cuda", "_kernel",    "_impl",  "_template", "_2d"};
  for (bool changed = true; changed;) {
    changed = stripNumberSuffix(name);
    for (auto suffix : kSuffixes) changed = stripSuffix(name, suffix) || changed;
  }
  static const std::array<std::string_view, 5> kNotOps = {"meta", "impl", "operator", "unknown", "lambda"};
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

// A line that only marks up others: Python 3.11+'s carets and tildes under
// a frame's source (^^^^, ~~^~~), the borders of an exception group
// (+-+---- 1 ----, a bare |), SyntaxError's column marker. Never a message.
bool isDecoration(std::string_view line) {
  const std::string t = trim(line);
  return !t.empty() && t.find_first_not_of("^~+-|=_ ") == std::string::npos;
}

// "RuntimeError: " followed by the message on the next line (TorchScript
// compilation errors, torch::jit::ErrorReport's what()).
void fillEmptyMessage(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to && error.message.empty(); ++i)
    if (!isDecoration(lines[i])) error.message = trim(lines[i]);
}

bool isTracebackHeader(const std::string& line) { return startsWith(trim(line), "Traceback (most recent call last)"); }

// The first line of an exception group's report (Python 3.11+): its
// traceback header, or the group's own line when it was raised without one,
// behind the group's border ("  + ", "  | ").
bool isExceptionGroupStart(const std::string& line) {
  const std::string t = trim(line);
  if (t.empty() || (t[0] != '+' && t[0] != '|')) return false;
  const std::string content = trim(std::string_view(t).substr(1));
  return startsWith(content, "Exception Group Traceback (most recent call last)") ||
         startsWith(content, "ExceptionGroup:") || startsWith(content, "BaseExceptionGroup:");
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
std::string operatorInMessage(const std::string& message) {
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

// ---------------------------------------------------------------- frames

// `  File "/src/train.py", line 42, in step` (a traceback) or
// `  File "/src/train.py", line 42 in step` (a faulthandler dump).
struct Frame {
  std::string path, line, function;
};

std::optional<Frame> parseFrame(const std::string& text) {
  if (!contains(text, "File \"")) return std::nullopt;
  static const std::regex re(R"rx(^\s*File "([^"]+)", line (\d+),? in (.+?)\s*$)rx");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  return Frame{m[1].str(), m[2].str(), m[3].str()};
}

// Code nobody wrote by hand in the user's project: minrepro's own Python
// (the op recorder's dispatch mode sits innermost in a recorded run's
// traceback, the fork server outermost, capture's step runner between) and
// code generated at run time (Inductor's kernels in its cache, named by a
// content hash; FX's "<eval_with_key>.3", exec's "<string>"). A notebook's
// cell ("<ipython-input-3-...>") is the user's own.
bool isMinreprosOrGenerated(const std::string& path) {
  static const std::regex hash_named(R"(/[a-z0-9]{32,}\.py$)");  // Inductor's output_code, wherever its cache is
  return startsWith(path, "<frozen") || startsWith(path, "<eval_with_key") || path == "<string>" ||
         contains(path, "torchinductor") || std::regex_search(path, hash_named) || contains(path, "/op_recorder/") ||
         endsWith(path, "/minrepro_op.py") || endsWith(path, "/py_fork_server.py") ||
         contains(path, "/minrepro_capture/");
}

// Code the user wrote, as opposed to the interpreter's standard library and
// installed packages (torch among them): the frame a user opens first.
bool isUserPath(const std::string& path) {
  static const std::regex stdlib(R"(/lib/python\d[\d.]*/)");
  return !contains(path, "/site-packages/") && !contains(path, "/dist-packages/") && !isMinreprosOrGenerated(path) &&
         !std::regex_search(path, stdlib);
}

std::string describeFrame(const Frame& frame) { return frame.path + ":" + frame.line + " in " + frame.function; }

// Code outside torch's own packages and the standard library: the user's
// and the packages they installed, their own among them.
bool isPackageOrUserPath(const std::string& path) {
  static const std::regex torch_or_stdlib(
      R"(/lib/python\d[\d.]*/(?!site-packages/|dist-packages/)|/(?:site|dist)-packages/(?:torch|torchvision|torchaudio|functorch|triton)/)");
  return !isMinreprosOrGenerated(path) && !std::regex_search(path, torch_or_stdlib);
}

// The innermost frame of lines [from, to) whose path `wanted` takes: the
// last one of a traceback (most recent call last) or the first one of a
// faulthandler dump.
std::string innermostFrame(const Lines& lines, std::size_t from, std::size_t to, bool most_recent_first,
                           bool (*wanted)(const std::string&)) {
  std::string found;
  for (std::size_t i = from; i < to; ++i) {
    const auto frame = parseFrame(lines[i]);
    if (!frame || !wanted(frame->path)) continue;
    found = describeFrame(*frame);
    if (most_recent_first) break;
  }
  return found;
}

std::string innermostUserFrame(const Lines& lines, std::size_t from, std::size_t to, bool most_recent_first) {
  return innermostFrame(lines, from, to, most_recent_first, &isUserPath);
}

// ---------------------------------------------------------------- signals

// "Segmentation fault" (strsignal's words, used by shells, faulthandler and
// the DataLoader) -> "SIGSEGV"; empty when the words name no fatal signal.
std::string signalFromWords(std::string_view words) {
  static const std::array<std::pair<std::string_view, std::string_view>, 9> kWords = {
      {{"segmentation fault", "SIGSEGV"},
       {"floating point exception", "SIGFPE"},
       {"floating-point exception", "SIGFPE"},
       {"aborted", "SIGABRT"},
       {"bus error", "SIGBUS"},
       {"illegal instruction", "SIGILL"},
       {"killed", "SIGKILL"},
       {"terminated", "SIGTERM"},
       {"trace/breakpoint trap", "SIGTRAP"}}};
  const std::string wanted = lower(trim(words));
  for (const auto& [phrase, name] : kWords)
    if (startsWith(wanted, phrase)) return std::string(name);
  return {};
}

// "-11" (a launcher's exit code for a process killed by signal 11) -> "SIGSEGV".
std::string signalFromNumber(int number) { return signalName(number); }

// ---------------------------------------------------------------- TorchScript

// Replaces "The following operation failed in the TorchScript interpreter."
// by the error it wraps: the first exception line of the TorchScript
// traceback, with the functional frame just above it as the operator.
// Returns the line of that exception (the wrapped error's block ends after it).
std::size_t unwrapTorchScript(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  if (!startsWith(error.message, "The following operation failed in the TorchScript")) return from;
  for (std::size_t i = from + 1; i < to; ++i) {
    if (auto op = functionalFrameOp(lines[i]); !op.empty()) error.op = op;
    RawError inner;
    if (!splitStrictExceptionLine(lines[i], inner)) continue;
    fillEmptyMessage(inner, lines, i + 1, to);
    error.type = inner.type;
    error.message = inner.message;
    return i;
  }
  return from;
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
bool startsAnotherForm(const std::string& line);

RawError readTerminate(const Lines& lines, std::size_t at) {
  static const std::regex re(R"(terminate called after throwing an instance of '([^']+)')");
  std::smatch m;
  RawError error;
  error.line = at;
  if (std::regex_search(lines[at], m, re)) error.type = m[1].str();
  std::size_t end = at + 1;
  while (end < lines.size() && !startsWith(lines[end], "Exception raised from ") &&
         !startsWith(lines[end], "frame #") && !isTracebackHeader(lines[end]) && !startsAnotherForm(lines[end]))
    ++end;
  const std::size_t what = at + 1;
  if (what < end && startsWith(lines[what], "  what():")) {
    error.message = trim(std::string_view(lines[what]).substr(9));
    fillEmptyMessage(error, lines, what + 1, end);
  }
  error.op = raisedFromOp(lines, what, std::min(end + 1, lines.size()));
  end = std::max(end, unwrapTorchScript(error, lines, what, end) + 1);
  // LibTorch's origin and C++ frames belong to this error, not to a next one.
  while (end < lines.size() && (startsWith(lines[end], "Exception raised from ") || startsWith(lines[end], "frame #")))
    ++end;
  error.end = std::min(end, lines.size());
  return error;
}

RawError readPythonTraceback(const Lines& lines, std::size_t at);

// How many wrapped tracebacks (a spawned process's inside a worker's inside
// ...) are read inside one another: each is a level of recursion, and a log
// of 14 000 nested ones overflowed the stack. Deeper ones stay the outer
// error: no launcher nests that far.
class UnwrapDepth {
 public:
  UnwrapDepth() { ++depth_; }
  ~UnwrapDepth() { --depth_; }
  UnwrapDepth(const UnwrapDepth&) = delete;
  UnwrapDepth& operator=(const UnwrapDepth&) = delete;
  bool tooDeep() const { return depth_ > 64; }

 private:
  static inline thread_local int depth_ = 0;
};

// torch.multiprocessing's ProcessRaisedException carries the child's
// traceback as its message: "-- Process 1 terminated with the following
// error:", then that traceback. The child's error is the first error.
void unwrapSpawnedProcess(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  if (!endsWith(error.type, "ProcessRaisedException")) return;
  const UnwrapDepth depth;
  if (depth.tooDeep()) return;
  static const std::regex marker(R"(^-- Process (\d+) terminated with the following error:)");
  std::smatch m;
  for (std::size_t i = from; i + 1 < lines.size() && i <= to; ++i) {
    if (!std::regex_search(lines[i], m, marker) || !isTracebackHeader(lines[i + 1])) continue;
    const std::string process = "process " + m[1].str();
    error = readPythonTraceback(lines, i + 1);
    error.process = process;
    return;
  }
}

// The DataLoader re-raises a worker's exception as "IndexError: Caught
// IndexError in DataLoader worker process 1." followed by "Original
// Traceback (most recent call last):" and the worker's own traceback.
void unwrapDataLoaderWorker(RawError& error, const Lines& lines, std::size_t exception_line, std::size_t to) {
  static const std::regex caught(R"(^Caught \w+ in (DataLoader worker process \d+)\.)");
  std::smatch m;
  if (!std::regex_search(error.message, m, caught)) return;
  const UnwrapDepth depth;
  if (depth.tooDeep()) return;
  const std::string process = m[1].str();
  for (std::size_t i = exception_line + 1; i < to; ++i) {
    if (!startsWith(lines[i], "Original Traceback (most recent call last)")) continue;
    const std::size_t outer_end = error.end;
    error = readPythonTraceback(lines, i);
    error.process = process;
    error.end = std::max(error.end, outer_end);
    return;
  }
}

// torchrun's ChildFailedError lists the failed ranks and a "Root Cause (first
// observed failure)": the first rank to EXIT, which after a collective
// timeout is not the rank that failed first. It is a report of a death.
void readLauncherSummary(RawError& error, const Lines& lines, std::size_t from, std::size_t to) {
  if (!endsWith(error.type, "ChildFailedError")) return;
  error.role = ErrorRole::DeathReport;
  error.user_frame.clear();  // the launcher's own frames (torchrun's main), not the job's
  error.package_frame.clear();
  std::size_t i = from;
  while (i < to && !startsWith(trim(lines[i]), "Root Cause")) ++i;
  static const std::regex rank(R"(^\s*rank\s*: (\d+))"), exitcode(R"(^\s*exitcode\s*: (-?\d+))");
  std::string rank_text, code_text;
  std::smatch m;
  for (; i < to && !startsWith(lines[i], "====="); ++i) {
    if (std::regex_search(lines[i], m, rank)) rank_text = m[1].str();
    if (std::regex_search(lines[i], m, exitcode)) code_text = m[1].str();
  }
  if (rank_text.empty() || code_text.empty()) return;
  const int code = std::stoi(code_text.substr(0, 9));
  error.process = "rank " + rank_text;
  if (code < 0) error.signal_name = signalFromNumber(-code);
  error.message = "root cause (first observed failure): rank " + rank_text + ", " +
                  (code < 0 ? "killed by " + error.signal_name : "exit code " + code_text);
}

// torch.compile's errors (torch._dynamo.exc.*, torch._inductor.exc.*) name
// the stage that failed: a backend that raised ("backend='inductor'
// raised:" then the backend's own error), Inductor itself, or Dynamo's
// tracing (a graph break under fullgraph=True, an unsupported construct).
// The stage goes where an operator would: it is what the failure is "in".
void readCompileError(RawError& error, const Lines& lines, std::size_t exception_line, std::size_t to) {
  if (!startsWith(error.type, "torch._dynamo.exc.") && !startsWith(error.type, "torch._inductor.exc.")) return;
  static const std::regex backend(R"(^backend='([^']+)' raised:)");
  std::smatch m;
  if (std::regex_search(error.message, m, backend)) {
    error.op = m[1].str();
    for (std::size_t i = exception_line + 1; i < to; ++i) {
      if (isBlank(lines[i])) continue;
      RawError inner;
      error.message = splitStrictExceptionLine(lines[i], inner) ? inner.type + ": " + inner.message : trim(lines[i]);
      break;
    }
    return;
  }
  error.op = startsWith(error.type, "torch._inductor.") ? "inductor" : "dynamo";
}

// An exception group (Python 3.11+): every line behind a border of + and |.
// Its first error is its first leaf: the first exception line of its
// sub-exceptions, depth first, that is not itself a group (the group's own
// line is a wrapper: "ExceptionGroup: two failures (2 sub-exceptions)").
RawError readExceptionGroup(const Lines& lines, std::size_t at) {
  RawError error, group;
  error.line = at;
  std::size_t end = at;
  for (; end < lines.size(); ++end) {
    const std::string t = trim(lines[end]);
    if (t.empty() || (t[0] != '+' && t[0] != '|')) break;
    if (t[0] != '|' || t.size() < 2 || t[1] != ' ') continue;  // a border
    const std::string content = std::string(std::string_view(t).substr(2));
    if (auto op = functionalFrameOp(content); !op.empty()) error.op = op;
    if (content.empty() || content[0] == ' ' || isDecoration(content)) continue;  // a frame, its source, a marker
    RawError found;
    if (!splitStrictExceptionLine(content, found)) continue;
    if (endsWith(found.type, "ExceptionGroup")) {
      if (group.type.empty()) group = found;
    } else if (error.type.empty()) {
      error.type = found.type;
      error.message = found.message;
    }
  }
  if (error.type.empty()) error.type = group.type, error.message = group.message;
  error.end = std::max(end, at + 1);
  return error;
}

// A Python traceback: indented frames, then the exception line at column 0;
// its block ends where a chained exception or another traceback begins.
RawError readPythonTraceback(const Lines& lines, std::size_t at) {
  RawError error;
  error.line = at;
  std::size_t line = at + 1;
  for (; line < lines.size() &&
         (lines[line].empty() || lines[line][0] == ' ' || lines[line][0] == '\t' || isDecoration(lines[line]));
       ++line)
    if (auto op = functionalFrameOp(lines[line]); !op.empty()) error.op = op;
  error.user_frame = innermostUserFrame(lines, at + 1, line, false);
  error.package_frame = innermostFrame(lines, at + 1, line, false, &isPackageOrUserPath);
  error.end = line;
  if (line == lines.size()) return error;  // cut off before the exception line
  splitTracebackExceptionLine(lines[line], error);
  std::size_t end = line + 1;
  while (end < lines.size() && !isChainMarker(lines[end]) && !isTracebackHeader(lines[end]) &&
         !startsAnotherForm(lines[end]))
    ++end;
  error.end = end;
  fillEmptyMessage(error, lines, line + 1, end);
  // TORCH_SHOW_CPP_STACKTRACES=1 appends LibTorch's "Exception raised from".
  if (auto op = raisedFromOp(lines, line, end); !op.empty()) error.op = op;
  unwrapTorchScript(error, lines, line, end);
  readCompileError(error, lines, line, end);
  readLauncherSummary(error, lines, line, end);
  unwrapDataLoaderWorker(error, lines, line, end);
  unwrapSpawnedProcess(error, lines, line, end);
  return error;
}

// Python's faulthandler (PYTHONFAULTHANDLER=1, python -X faulthandler):
//   Fatal Python error: Segmentation fault
//
//   Current thread 0x00007f64c48ee040 (most recent call first):
//     File "/src/train.py", line 5 in decode
//   ...
//   Extension modules: torch._C, ... (total: 20)
RawError readFaultDump(const Lines& lines, std::size_t at) {
  RawError error;
  error.line = at;
  error.message = trim(lines[at]);
  error.signal_name = signalFromWords(std::string_view(lines[at]).substr(lines[at].find(':') + 1));
  std::size_t end = at + 1, current_thread_end = at + 1;
  bool in_current_thread = false;
  for (; end < lines.size(); ++end) {
    const std::string& l = lines[end];
    if (startsWith(l, "Current thread ") || startsWith(l, "Stack (most recent call first)"))
      in_current_thread = true;
    else if (startsWith(l, "Thread 0x"))
      in_current_thread = false;
    else if (startsWith(l, "Extension modules:"))
      continue;
    else if (!isBlank(l) && !startsWith(l, "  "))
      break;
    if (in_current_thread) current_thread_end = end + 1;
  }
  error.end = end;
  error.user_frame = innermostUserFrame(lines, at + 1, current_thread_end, true);
  error.package_frame = innermostFrame(lines, at + 1, current_thread_end, true, &isPackageOrUserPath);
  for (std::size_t i = at + 1; i < current_thread_end && error.op.empty(); ++i) error.op = functionalFrameOp(lines[i]);
  return error;
}

// glibc's heap checks ("free(): double free detected in tcache 2", "double
// free or corruption (out)", "malloc(): corrupted top size") and the stack
// protector print one line, then abort: that line is the first error, and a
// faulthandler dump right after it gives its frames.
bool isAbortMessage(const std::string& line) {
  static const std::array<std::string_view, 7> kPrefixes = {"free(): ",
                                                            "double free or corruption",
                                                            "malloc(): ",
                                                            "munmap_chunk(): ",
                                                            "realloc(): ",
                                                            "corrupted size vs. prev_size",
                                                            "*** stack smashing detected ***"};
  for (auto prefix : kPrefixes)
    if (startsWith(line, prefix)) return true;
  return false;
}

RawError readAbortMessage(const Lines& lines, std::size_t at) {
  RawError error;
  std::size_t next = at + 1;
  while (next < lines.size() && isBlank(lines[next])) ++next;
  if (next < lines.size() && startsWith(lines[next], "Fatal Python error: "))
    error = readFaultDump(lines, next);
  else
    error.end = at + 1;
  error.line = at;
  error.message = trim(lines[at]);
  error.signal_name = "SIGABRT";
  return error;
}

// The DataLoader's signal handler in a worker: "ERROR: Unexpected
// segmentation fault encountered in worker." (also bus error, with a hint
// about shared memory, and floating-point exception).
std::optional<RawError> readWorkerSignal(const std::string& line) {
  static constexpr std::string_view kPrefix = "ERROR: Unexpected ";
  if (!startsWith(line, kPrefix) || !contains(line, " encountered in worker")) return std::nullopt;
  RawError error;
  error.message = trim(std::string_view(line).substr(7));
  error.signal_name = signalFromWords(std::string_view(line).substr(kPrefix.size()));
  error.process = "DataLoader worker";
  return error;
}

// A shell's report of a child killed by a signal: "Segmentation fault (core
// dumped)" (interactive), "bash: line 1:   979 Segmentation fault      python
// train.py" (a script), "Floating point exception" (dash).
std::optional<RawError> readShellReport(const std::string& line) {
  static const std::array<std::string_view, 6> kWords = {"Segmentation fault", "Floating point exception", "Aborted",
                                                         "Bus error",          "Illegal instruction",      "Killed"};
  if (!containsAny(line, kWords)) return std::nullopt;
  static const std::regex bare(
      R"(^(Segmentation fault|Floating point exception|Aborted|Bus error|Illegal instruction|Killed)(?: \(core dumped\))?\s*$)");
  // bash pads the status to 24 columns before the command: the words are
  // followed by two spaces, "(core dumped)", the command itself, or nothing.
  static const std::regex job(
      R"(^\S+: (?:line \d+: )?\s*\d+ (Segmentation fault|Floating point exception|Aborted|Bus error|Illegal instruction|Killed)(?:\s{2,}|\s*\(core dumped\)|\s*$|[^\s]))");
  std::smatch m;
  if (!std::regex_search(line, m, bare) && !std::regex_search(line, m, job)) return std::nullopt;
  RawError error;
  error.message = trim(line);
  error.signal_name = signalFromWords(m[1].str());
  error.role = ErrorRole::DeathReport;
  return error;
}

// A line where another process's report begins (a fault dump, a glibc or
// DataLoader abort line, a shell's report, an uncaught C++ exception, a
// kernel assertion): it ends the block of the error before it, whose message
// may otherwise run on to the next traceback. Bare "SomeError:" lines do not
// end a block: a wrapped error (TorchScript, a DataLoader worker's original
// traceback) prints them inside it.
bool startsAnotherForm(const std::string& line) {
  return startsWith(line, "Fatal Python error: ") || startsWith(line, "terminate called after throwing") ||
         isAbortMessage(line) || readWorkerSignal(line) || readShellReport(line) || readKernelAssert(line);
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
  // The name as an error reports it: first on the line, or after "error",
  // "failed with", "returned" or "status"; a line that only mentions one
  // ("watchdog armed for cudaErrorIllegalAddress") is not an error.
  static const std::regex runtime_name(
      R"(^\s*["'(]?(?:hip|cuda)Error[A-Z]\w*|\b(?:[Ee]rror|ERROR|failed with|returned|status)\s*[:=]?\s*["'(]?(?:hip|cuda)Error[A-Z]\w*)");
  if ((!contains(rest, "hipError") && !contains(rest, "cudaError")) || !std::regex_search(rest, runtime_name))
    return std::nullopt;
  error.message = trim(rest);
  if (error.message.size() >= 2 && error.message.front() == '"' && error.message.back() == '"')
    error.message = error.message.substr(1, error.message.size() - 2);
  return error;
}

// A caught LibTorch error printed with what(): the message, then its origin.
// The error starts at the message's line.
std::optional<RawError> readBareLibTorchError(const Lines& lines, std::size_t at) {
  RawError error;
  error.type = "c10::Error";
  error.line = at;
  for (std::size_t i = at; i-- > 0 && error.message.empty();) {
    error.message = trim(lines[i]);
    error.line = i;
  }
  // After another error's C++ frames the line above is a frame, not a message.
  if (startsWith(error.message, "frame #")) return std::nullopt;
  error.op = opFromRaisedFrom(lines[at]);
  error.end = at + 1;
  return error;
}

// ------------------------------------------------ what an error reports

// Errors that report another process's death or a wait for one. Their words
// come from PyTorch (the DataLoader, torch.multiprocessing), subprocess, and
// the collectives' backends (gloo, NCCL, the TCP store).
bool isDataLoaderExit(const std::string& message) {
  return contains(message, "DataLoader worker (pid") && contains(message, "exited unexpectedly");
}

void markRole(RawError& error) {
  static const std::regex python_signal(R"(<Signals\.(SIG[A-Z]+): \d+>)");
  static const std::regex exited_signal(R"(^process (\d+) terminated with signal (SIG[A-Z]+))");
  static const std::regex exited_code(R"(^process (\d+) terminated with exit code)");
  static const std::regex worker_signal(R"(DataLoader worker \(pid [^)]*\) is killed by signal: ([A-Za-z /-]+))");
  std::smatch m;
  const std::string& message = error.message;
  if (std::regex_search(message, m, python_signal)) {  // subprocess: "died with <Signals.SIGSEGV: 11>."
    error.signal_name = m[1].str();
  } else if (std::regex_search(message, m, exited_signal)) {  // torch.multiprocessing
    error.process = "process " + m[1].str();
    error.signal_name = m[2].str();
  } else if (std::regex_search(message, m, exited_code)) {
    error.process = "process " + m[1].str();
  } else if (std::regex_search(message, m, worker_signal)) {
    error.process = "DataLoader worker";
    error.signal_name = signalFromWords(m[1].str());
  } else if (isDataLoaderExit(message)) {
    error.process = "DataLoader worker";
  } else {
    if (!consequenceKind(error).empty()) error.role = ErrorRole::Consequence;
    return;
  }
  error.role = ErrorRole::DeathReport;
  error.user_frame.clear();  // the frame that waited for the process (mp.spawn, subprocess.run), not the crash's
  error.package_frame.clear();
}

// The error whose form begins at line i, if one does. Readers of one line
// leave `line` and `end` to readErrors; readers of a block set them (a bare
// what() begins above i, an unwrapped child's traceback below it).
std::optional<RawError> readAt(const Lines& lines, std::size_t i) {
  const std::string& line = lines[i];
  if (startsWith(line, "terminate called after throwing")) return readTerminate(lines, i);
  if (isTracebackHeader(line)) return readPythonTraceback(lines, i);
  if (isExceptionGroupStart(line)) return readExceptionGroup(lines, i);
  if (startsWith(line, "Fatal Python error: ")) return readFaultDump(lines, i);
  if (isAbortMessage(line)) return readAbortMessage(lines, i);
  if (startsWith(line, "Exception raised from ")) return readBareLibTorchError(lines, i);
  std::optional<RawError> error = readKernelAssert(line);
  if (!error) error = readWorkerSignal(line);
  if (!error) error = readShellReport(line);
  if (!error && (error = readBareLine(line))) {
    fillEmptyMessage(*error, lines, i + 1, lines.size());
    error->end = unwrapTorchScript(*error, lines, i, lines.size()) + 1;
  }
  if (error) error->line = i;
  return error;
}

}  // namespace

std::string consequenceKind(const RawError& error) {
  static const std::array<std::string_view, 7> kTimeouts = {
      "Timed out waiting",        "Watchdog caught collective operation timeout",
      "before timing out",        "Socket Timeout",
      "timed out after",          "Wait timeout",
      "DistStoreError: Timed out"};
  static const std::array<std::string_view, 11> kLostPeers = {"Connection closed by peer",
                                                              "Connection reset by peer",
                                                              "Broken pipe",
                                                              "Connection refused",
                                                              "NCCL communicator was aborted",
                                                              "recvValue failed",
                                                              "recvVector failed",
                                                              "failed to recv, got 0 bytes",
                                                              "connection closed by remote",
                                                              "remote process exited or there was a network error",
                                                              "ncclRemoteError"};
  if (containsAny(error.message, kTimeouts)) return "collective timeout";
  if (containsAny(error.message, kLostPeers)) return "lost connection";
  return {};
}

std::vector<RawError> readErrors(const Lines& lines, AfterFirstRaised after_first_raised) {
  std::vector<RawError> errors;
  for (std::size_t i = 0; i < lines.size();) {
    auto error = readAt(lines, i);
    if (!error) {
      ++i;
      continue;
    }
    error->end = std::max({error->end, error->line + 1, i + 1});
    markRole(*error);
    i = error->end;
    const bool raised = error->role == ErrorRole::Raised;
    errors.push_back(std::move(*error));
    if (raised && after_first_raised == AfterFirstRaised::Stop) break;
  }
  return errors;
}

std::optional<RawError> findKernelAssert(const Lines& lines) {
  for (const auto& line : lines)
    if (auto error = readKernelAssert(line)) return error;
  return std::nullopt;
}

std::string harnessOp(const Lines& lines) {
  static constexpr std::string_view kPrefix = "minrepro-trial: operator: ";
  for (const auto& line : lines) {
    if (!startsWith(line, kPrefix)) continue;
    std::string op = trim(std::string_view(line).substr(kPrefix.size()));
    if (startsWith(op, "aten::")) op.erase(0, 6);
    if (!op.empty()) return op;
  }
  return {};
}

std::string opFromMessage(const std::string& message) { return operatorInMessage(message); }

}  // namespace minrepro
