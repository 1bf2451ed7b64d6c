// Failure signatures: the family, operator and first message of a failed trial.
//
// The errors of a trial's output or a log are read by engine/error_readers
// (one reader per form PyTorch and the programs around it print) and the
// FIRST of them is chosen by engine/log_streams, across ranks and processes
// (docs/method.md, "The first error and its context": later errors are
// mostly consequences of the first). This file says which family that error
// belongs to, normalizes its message and matches signatures.
//
// Lines for the built-in harness (minrepro-trial), anywhere in either stream:
//   minrepro-trial: operator: nll_loss                        names the operator (wins)
//   minrepro-trial: c10::IndexError: Target 4 is out of bounds.   an error with its type
//   minrepro-trial: error: cannot read batch.pt               an error without a type
#include "core/failure_signature.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <regex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/error_readers.h"
#include "core/errors.h"
#include "core/log_streams.h"
#include "core/stop_asked.h"
#include "core/text_lines.h"

namespace minrepro {

using namespace text;

namespace {

constexpr auto npos = std::string::npos;

// ---------------------------------------------------------------- families

bool isDeviceMismatch(const std::string& message) {
  static const std::array<std::string_view, 5> kPhrases = {
      "Expected all tensors to be on the same device", "found at least two devices", "Expected object of device type",
      "to have the same device as", "on the same device as the indexed tensor"};
  if (containsAny(message, kPhrases)) return true;
  // conv: "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be
  // the same": a device mismatch when only one side is on the GPU, else a dtype mismatch.
  static const std::regex re(R"(Input type \((\S+)\) and weight type \((\S+)\))");
  std::smatch m;
  return std::regex_search(message, m, re) && contains(m[1].str(), "cuda") != contains(m[2].str(), "cuda");
}

bool isOutOfMemory(const RawError& error) {
  static const std::array<std::string_view, 5> kPhrases = {"out of memory", "hiperroroutofmemory",
                                                           "cudaerrormemoryallocation", "can't allocate memory",
                                                           "defaultcpuallocator"};
  // Python's MemoryError and its kind (numpy's _ArrayMemoryError) as well as torch's OutOfMemoryError.
  return endsWith(error.type, "MemoryError") || contains(error.type, "OutOfMemoryError") ||
         contains(error.type, "bad_alloc") || containsAny(lower(error.message), kPhrases);
}

bool isOpUnavailable(const RawError& error) {
  static const std::array<std::string_view, 8> kPhrases = {
      "Could not run '",         "Unknown builtin op",           "No such operator",
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
  static const std::array<std::string_view, 11> kPhrases = {"shapes cannot be multiplied",
                                                            "expected scalar type",
                                                            "to match target batch_size",
                                                            "size mismatch",
                                                            "is invalid for input of size",
                                                            "must match the size of tensor",
                                                            "doesn't match the broadcast shape",
                                                            "Found dtype",
                                                            "should be the same",
                                                            "dtype to be",
                                                            "must have same reduction dim"};
  return containsAny(message, kPhrases);
}

// A NaN or inf where a training step wants finite numbers: the raises of
// PyTorch (anomaly mode, clip_grad_norm_, multinomial, distributions), of
// trainers and their loss scalers (Lightning, detectron2, fairseq,
// DeepSpeed, HF's debug utilities), of numpy and scikit-learn, and a
// step's own check ("loss is nan"). nan and inf only as whole words next to
// what they are about: nanoseconds, nanmean, info and an infinite loop are
// not non-finite.
bool isNonFinite(const RawError& error) {
  if (endsWith(error.type, "FloatingPointError")) return true;
  static const std::regex kPhrases(
      R"(returned nan values in its \d+th output|is non-finite, so it cannot be clipped|)"
      R"(non-finite norm encountered|probability tensor contains either .inf., .nan. or element < 0|)"
      R"(encountering probability entry = infinity or nan|but found invalid values:?\s*(tensor\()?\[?[^\n]*\b(nan|inf)\b|)"
      R"(loss became infinite or nan|loss become infinite or nan|detected nan and/or inf values in|)"
      R"(contains a nan|nan or inf loss encountered|gradients are nan/inf|detected nan/inf grad norm|)"
      R"(\b(nan|inf) detected in output of|minimum loss scale reached|current loss scale already at minimum|)"
      R"(cannot decrease scale anymore|inf/nan detected|detected inf/nan during|)"
      R"((invalid value|divide by zero|overflow) encountered in|input ([a-z_]+ )?contains (nan|infinity)|)"
      R"(^math domain error$|^math range error$|cannot convert float (nan|infinity) to integer|)"
      R"(\bnan( or inf)? found in input tensor|at least one (nan|inf) in |contained non-finite values|)"
      R"(should not contain infs or nans|range of \[[^\]]*\] is not finite|not json compliant|)"
      R"(cannot be converted to type (c10|at)::half without overflow|)"
      R"(\b(loss|losses|grad|grads|gradient|gradients|grad_norm|norm)\b[^\n]{0,40}\b(is|are|was|became|become|)"
      R"(contains?|has|got)\s+(an? )?(nan|inf|-inf|infinite|infinity|non-finite|not finite)\b)",
      std::regex::ECMAScript | std::regex::icase);
  // torch.distributions: the invalid value is printed in the message or on
  // the line after it; a NaN among the parameters it names is the cause.
  static const std::regex kWholeWord(R"(\b(nan|inf)\b)", std::regex::ECMAScript | std::regex::icase);
  if (contains(error.message, "but found invalid values") && std::regex_search(error.message, kWholeWord)) return true;
  // A step's own assert on its numbers, with what it found in its message
  // (`assert torch.isfinite(loss), f"non-finite loss {loss.item()}"`): an
  // assertion quoting a nan or inf is about one.
  static const std::regex kAssertedFinite(R"(\b(nan|-?inf|infinite|infinity|non-finite|not finite)\b)",
                                          std::regex::ECMAScript | std::regex::icase);
  if (endsWith(error.type, "AssertionError") && std::regex_search(error.message, kAssertedFinite)) return true;
  return std::regex_search(error.message, kPhrases);
}

FailureFamily familyOf(const RawError& error) {
  const std::string& type = error.type;
  const std::string& message = error.message;
  if (!error.signal_name.empty() && !error.kernel_assert) return FailureFamily::Signal;
  if (error.kernel_assert || contains(message, "device-side assert")) return FailureFamily::DeviceAssert;
  if (startsWith(type, "torch._dynamo.exc.") || startsWith(type, "torch._inductor.exc."))
    return FailureFamily::CompileError;
  if (isOutOfMemory(error)) return FailureFamily::OutOfMemory;
  if (isOpUnavailable(error)) return FailureFamily::OpUnavailable;
  if (isDeviceMismatch(message)) return FailureFamily::DeviceMismatch;
  if (isNonFinite(error)) return FailureFamily::NonFinite;
  if (endsWith(type, "IndexError")) return FailureFamily::IndexError;
  if (endsWith(type, "ValueError") || endsWith(type, "TypeError")) return FailureFamily::ValueError;
  if (looksLikeIndexError(message)) return FailureFamily::IndexError;
  if (looksLikeValueError(message)) return FailureFamily::ValueError;
  return FailureFamily::RuntimeError;
}

// ---------------------------------------------------------------- signatures

struct OutputReading {
  FirstErrorChoice choice;
  std::string harness_op;
};

// stderr first: that is where Python and std::terminate report. A device
// assert's kernel line may sit in the other stream (device printf goes to
// stdout); it names the kernel, so it is fetched from wherever it is.
// The lines are read for the kernel line and the harness's operator first,
// then taken by chooseFirstError (held once, whatever their number).
OutputReading readOutput(Lines primary, Lines secondary, bool list_set_aside) {
  OutputReading reading;
  auto kernel = findKernelAssert(primary);
  if (!kernel) kernel = findKernelAssert(secondary);
  reading.harness_op = harnessOp(primary);
  if (reading.harness_op.empty()) reading.harness_op = harnessOp(secondary);
  reading.choice = chooseFirstError(std::move(primary), list_set_aside);
  if (!reading.choice.first && !secondary.empty())
    reading.choice = chooseFirstError(std::move(secondary), list_set_aside);
  auto& first = reading.choice.first;
  if (first && !first->error.kernel_assert && familyOf(first->error) == FailureFamily::DeviceAssert && kernel)
    first->error = *kernel;
  return reading;
}

// "/src/gnn/train.py:63 in <module>" -> "train.py:63 in <module>": the
// same step runs from the case's directory, a trial's and an archive's.
std::string placeOf(const std::string& user_frame) {
  const std::size_t in = user_frame.rfind(" in ");
  const std::size_t colon = user_frame.rfind(':', in);
  if (in == npos || colon == npos) return {};
  const std::size_t slash = user_frame.rfind('/', colon);
  return printable(user_frame.substr(slash == npos ? 0 : slash + 1));
}

void fillFromError(FailureSignature& signature, const RawError& error) {
  signature.family = familyOf(error);
  // Where the user's code called in, and, when an installed package of
  // theirs raised it deeper down, where in that package.
  signature.place = placeOf(error.user_frame);
  if (const std::string deeper = placeOf(error.package_frame);
      !deeper.empty() && error.package_frame != error.user_frame)
    signature.place += (signature.place.empty() ? "" : " < ") + deeper;
  signature.message = normalizeMessage(error.message);
  if (signature.message.empty()) signature.message = normalizeMessage(error.type);
  signature.op = opFromMessage(error.message);
  if (signature.op.empty() || error.kernel_assert) signature.op = error.op;
  signature.op = printable(signature.op);
  if (signature.signal_name.empty()) signature.signal_name = error.signal_name;
}

FailureSignature signatureOf(const RawError& error) {
  FailureSignature signature;
  fillFromError(signature, error);
  return signature;
}

SetAside describeSetAside(const LoggedError& logged) {
  return SetAside{logged.log_line + 1, logged.where(), setAsideKind(logged.error), signatureOf(logged.error).summary()};
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

// Content hashes in the paths of generated code (Inductor's cache:
// ".../torchinductor_root/la/cladpiod5cmp2....main.cpp", with the shard
// directory "la" of the hash's first characters) change with the
// graph: a run of 32 or more lower-case letters and digits, with both, is
// "<hash>". (A loop, not a regex: the message may be 2 KiB of one run.)
std::string maskContentHashes(const std::string& s) {
  std::string out;
  std::size_t at = 0;
  while (at < s.size()) {
    const auto alnum = [&](std::size_t i) {
      return std::islower(static_cast<unsigned char>(s[i])) || std::isdigit(static_cast<unsigned char>(s[i]));
    };
    if (!alnum(at)) {
      out += s[at++];
      continue;
    }
    std::size_t end = at;
    bool letter = false, digit = false;
    for (; end < s.size() && alnum(end); ++end)
      (std::isdigit(static_cast<unsigned char>(s[end])) ? digit : letter) = true;
    const auto word_char = [&](std::size_t i) { return std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_'; };
    const bool word_edge = (at == 0 || !word_char(at - 1)) && (end == s.size() || !word_char(end));
    if (end - at >= 32 && letter && digit && word_edge) {
      // The cache's shard directory is the hash's first two characters
      // (".../p3/cp3dhhil....main.cpp"): it changes with the hash.
      if (out.size() >= 4 && out.back() == '/' && out[out.size() - 4] == '/' &&
          std::isalnum(static_cast<unsigned char>(out[out.size() - 3])) &&
          std::isalnum(static_cast<unsigned char>(out[out.size() - 2])))
        out.resize(out.size() - 3);
      out += "<hash>";
    } else {
      out.append(s, at, end - at);
    }
    at = end;
  }
  return out;
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
#include "core/failure_families.def"
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

std::atomic<bool> g_abandoned{false};

// std::regex_search on at most 16 KiB of `message` (libstdc++ recurses once
// per character: a 50 MB message would overflow the stack), in a thread,
// waited on for 5 s (see the header).
bool boundedSearch(const std::string& message, const std::regex& re, const std::string& pattern) {
  constexpr std::size_t kMaxSubject = 16 * 1024;
  constexpr auto kMaxWait = std::chrono::seconds(5);
  auto answer = std::make_shared<std::promise<bool>>();
  std::future<bool> found = answer->get_future();
  std::thread([answer, subject = message.substr(0, kMaxSubject), re] {
    try {
      answer->set_value(std::regex_search(subject, re));
    } catch (...) {
      answer->set_exception(std::current_exception());
    }
  }).detach();
  // In slices: a stop signal ends the wait as the interruption it is (130).
  const auto until = std::chrono::steady_clock::now() + kMaxWait;
  while (found.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready &&
         std::chrono::steady_clock::now() < until)
    if (stopAsked().load()) {
      g_abandoned = true;
      throw RunStopped(RunStopped::Reason::Interrupted,
                       "interrupted while failure.message /" + text::printable(pattern) + "/ was searched");
    }
  if (found.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    try {
      return found.get();
    } catch (const std::regex_error& e) {
      throw BadInputError("failure.message /" + text::printable(pattern) + "/ could not be searched (" + e.what() +
                          "): write it without nested quantifiers such as (a+)+");
    }
  }
  g_abandoned = true;
  throw BadInputError("failure.message /" + text::printable(pattern) + "/ took more than 5 s to search a message of " +
                      std::to_string(message.size()) +
                      " characters: the pattern backtracks without end (a quantifier inside a quantified group, "
                      "such as (a+)+ or (.*)*); write it without nested quantifiers, or leave failure.message out "
                      "(the original's message is then compared by its shape)");
}

std::optional<std::string> messageMismatch(const FailureSignature& original, const FailureSignature& candidate,
                                           const std::string& pattern) {
  if (pattern.empty()) {
    if (messageKey(candidate.message) == messageKey(original.message)) return std::nullopt;
    return "different message: \"" + shorten(candidate.message, 80) + "\"";
  }
  const std::regex* re = userRegex(pattern);
  if (re == nullptr) return "invalid message pattern /" + pattern + "/";
  if (boundedSearch(candidate.message, *re, pattern)) return std::nullopt;
  return "message does not match /" + pattern + "/";
}

// The same message raised at another line of the user's code is another
// bug (an index out of range in the message passing, then, once a value
// pass zeroed the edges, in the pooling: both "index # is out of bounds").
// Not for the families whose traceback does not say where they happened: a
// device-side assert is reported wherever the host next waits for the GPU,
// and which allocation runs out of memory first moves as shapes shrink.
std::optional<std::string> placeMismatch(const FailureSignature& original, const FailureSignature& candidate,
                                         const ExpectedFailure& expected) {
  const bool located = original.family != FailureFamily::DeviceAssert &&
                       original.family != FailureFamily::OutOfMemory && original.family != FailureFamily::Timeout;
  if (!expected.require_original_op || !located || original.place.empty() || candidate.place.empty() ||
      candidate.place == original.place)
    return std::nullopt;
  return "raised at " + candidate.place + ", expected " + original.place;
}

LogReading readLogLines(Lines lines, bool list_set_aside) {
  LogReading log;
  const OutputReading reading = readOutput(std::move(lines), {}, list_set_aside);
  if (!reading.choice.first) return log;
  const LoggedError& first = *reading.choice.first;
  fillFromError(log.signature, first.error);
  if (!reading.harness_op.empty()) log.signature.op = reading.harness_op;
  log.first_line = first.log_line + 1;
  log.first_line_text = first.line_text;
  log.where = first.where();
  log.user_frame = first.error.user_frame;
  for (const LoggedError& other : reading.choice.set_aside) log.set_aside.push_back(describeSetAside(other));
  return log;
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

FamilyAdvice adviceFor(const FailureSignature& signature) {
  FamilyAdvice advice = familyAdvice(signature.family);
  const bool embedding = signature.op.find("embedding") != std::string::npos;
  if (embedding && (signature.family == FailureFamily::IndexError || signature.family == FailureFamily::DeviceAssert)) {
    advice.check_first =
        "the largest id against the embedding's num_embeddings (a token id against the tokenizer's "
        "vocabulary, a category or user id against the count the table was made for), and padding_idx";
    advice.avoid =
        "clamping or wrapping the ids so that they fit: size the table to what the ids can be (or fix what "
        "makes them: the tokenizer, the category map) instead";
  }
  return advice;
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
  if (family != FailureFamily::Signal && !signal_name.empty()) line += " (" + ending() + ")";
  return line;
}

LogReading readLog(const std::string& text) { return readLogLines(splitLines(text), true); }
LogReading readLog(Lines lines) { return readLogLines(std::move(lines), true); }

FailureSignature classifyText(const std::string& text) { return readLogLines(splitLines(text), false).signature; }

FailureSignature classify(const TrialOutcome& outcome) {
  FailureSignature signature;
  if (outcome.end == TrialEnd::FailedToStart) {
    signature.family = FailureFamily::StartFailure;
    signature.message = normalizeMessage(outcome.start_error);
    return signature;
  }
  if (outcome.passed()) return signature;  // an exit 0 is a pass, whatever was printed
  const OutputReading reading = readOutput(splitLines(outcome.stderr_text), splitLines(outcome.stdout_text), false);
  if (outcome.end == TrialEnd::Signaled) signature.signal_name = signalName(outcome.signal);
  const auto& first = reading.choice.first;
  // A process killed by a signal whose output holds only the timeouts and
  // lost connections of its peers died of the signal, not of a wait.
  const bool only_waits = first && first->error.role == ErrorRole::Consequence;
  if (outcome.end == TrialEnd::TimedOut) {
    signature.family = FailureFamily::Timeout;  // what it printed before the kill is not the cause
  } else if (first && !(only_waits && outcome.end == TrialEnd::Signaled)) {
    fillFromError(signature, first->error);
  } else if (outcome.end == TrialEnd::Signaled) {
    signature.family = FailureFamily::Signal;
    // the wait it printed tells one such death from another
    if (only_waits) signature.message = normalizeMessage(first->error.message);
  } else {
    signature.family = FailureFamily::NonzeroExit;
    signature.message = "exit status " + std::to_string(outcome.exit_code);
  }
  if (!reading.harness_op.empty()) signature.op = reading.harness_op;
  return signature;
}

FailureSignature classifyAs(const TrialOutcome& outcome, const ExpectedFailure& expected) {
  FailureSignature signature = classify(outcome);
  const bool pinned = expected.family.has_value() || !expected.message_regex.empty();
  if (!pinned || !signature.failed() || matchSignature(signature, signature, expected).matches ||
      outcome.end == TrialEnd::TimedOut)
    return signature;
  OutputReading reading = readOutput(splitLines(outcome.stderr_text), splitLines(outcome.stdout_text), true);
  for (const LoggedError& other : reading.choice.set_aside) {
    FailureSignature candidate = signature;
    candidate.op.clear();
    fillFromError(candidate, other.error);
    if (!reading.harness_op.empty()) candidate.op = reading.harness_op;
    if (matchSignature(candidate, candidate, expected).matches) return candidate;
  }
  return signature;
}

std::string normalizeMessage(const std::string& message) {
  static const std::regex ansi(R"(\x1b\[[0-9;]*[A-Za-z])");
  static const std::regex trial_dir(R"([^\s'"(]*(?:minrepro-work/|trials/)trial-\d+(?:/tmp(?:/[^/\s'"]+(?=/))?)?)");
  static const std::regex hex(R"(\b0x[0-9a-fA-F]+)");  // not inside a word (a key holding "0xB3")
  static const std::regex pid(R"(\bpid\s*[=:]?\s*\d+)", std::regex::ECMAScript | std::regex::icase);
  static const std::regex process(R"(\bProcess \d+ has)");
  static const std::regex source_line(R"(\.(cpp|cc|cxx|c|h|hpp|cu|cuh|hip):\d+)");

  // A trial's short TMPDIR (core/process/process.h, makeTrialTemp) and
  // the one directory a library makes in it, as for the trial's own.
  static const std::regex short_temp(R"(/tmp/minrepro-[A-Za-z0-9]{6}(?=[/\s'",]|$)(?:/[^/\s'"]+(?=/))?)");
  // The directories compilers cache generated code in, wherever they are:
  // torch.compile's default (TMPDIR/torchinductor_USER), the one trials
  // share (work_dir/compile-cache/, engine/trial_spec.cc), triton's.
  static const std::regex compiler_cache(
      R"([^\s'"(,]*/(?:torchinductor_[^/\s'"]+|compile-cache/(?:inductor|triton)|\.triton/cache)(?=/))");

  std::string s = std::regex_replace(message.substr(0, kMaxLine), ansi, "");
  if (contains(s, "minrepro-work/")) s = std::regex_replace(s, trial_dir, "<tmp>");
  if (contains(s, "/tmp/minrepro-")) s = std::regex_replace(s, short_temp, "<tmp>");
  if (contains(s, "torchinductor_") || contains(s, "compile-cache/") || contains(s, ".triton/"))
    s = std::regex_replace(s, compiler_cache, "<tmp>");
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr) s = replaceTempRoot(s, tmpdir);
  s = replaceTempRoot(replaceTempRoot(s, "/tmp"), "/var/tmp");
  s = std::regex_replace(s, hex, "0x?");
  s = std::regex_replace(s, pid, "pid ?");
  s = std::regex_replace(s, process, "Process ? has");
  s = std::regex_replace(s, source_line, ".$1:?");
  s = maskContentHashes(s);
  return printable(collapseWhitespace(s));
}

std::string messageShape(const std::string& message) {
  std::string shape;
  bool in_number = false;
  for (char c : normalizeMessage(message)) {
    const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!digit)
      shape += c;
    else if (!in_number)
      shape += '#';
    in_number = digit;
  }
  // A list of numbers is one list however long: a message that names the
  // batch's samples or an index tensor ("samples [4209, 1244]") names fewer
  // of them as the batch shrinks, and it is the same failure.
  if (shape.find("#,") == std::string::npos && shape.find("# ,") == std::string::npos &&
      shape.find("[#]") == std::string::npos && shape.find("[-#]") == std::string::npos)
    return shape;
#define MINREPRO_NUMBER R"(-?#(?:\.#)?(?:e[+-]?#)?)"
  static const std::regex bracketed(R"(\[\s*)" MINREPRO_NUMBER R"((?:\s*,\s*)" MINREPRO_NUMBER R"()*\s*,?\s*\])");
  static const std::regex list(MINREPRO_NUMBER R"((?:\s*,\s*)" MINREPRO_NUMBER R"()+)");
#undef MINREPRO_NUMBER
  return std::regex_replace(std::regex_replace(shape, bracketed, "[#, ...]"), list, "#, ...");
}

SignatureMatch matchSignature(const FailureSignature& original, const FailureSignature& candidate,
                              const ExpectedFailure& expected) {
  if (candidate.family == FailureFamily::None) return mismatch("the candidate passed");
  if (candidate.family == FailureFamily::StartFailure) return mismatch("the trial could not start");
  if (candidate.family != original.family) return mismatch(familyMismatch(candidate.family, original.family));
  if (expected.family && candidate.family != *expected.family)
    return mismatch(familyMismatch(candidate.family, *expected.family));
  const bool either_timeout = candidate.family == FailureFamily::Timeout || original.family == FailureFamily::Timeout;
  if (candidate.signal_name != original.signal_name && !either_timeout &&
      (!expected.any_ending || candidate.family == FailureFamily::Signal))
    return mismatch((candidate.signal_name.empty() ? std::string("raised or exited") : candidate.ending()) +
                    ", expected " + (original.signal_name.empty() ? "an exception or exit" : original.ending()) +
                    (expected.any_ending || candidate.family == FailureFamily::Signal
                         ? ""
                         : " (failure.ending: any accepts either)"));
  for (const std::string& op : {expected.require_original_op ? original.op : std::string(), expected.op}) {
    if (!op.empty() && candidate.op != op)
      return mismatch("operator " + (candidate.op.empty() ? "unknown" : candidate.op) + ", expected " + op);
  }
  if (auto why = placeMismatch(original, candidate, expected)) return mismatch(*why);
  if (auto why = messageMismatch(original, candidate, expected.message_regex)) return mismatch(*why);
  return SignatureMatch{true, ""};
}

bool abandonedRegexSearch() { return g_abandoned.load(); }

}  // namespace minrepro
