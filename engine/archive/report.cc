#include "engine/archive/report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/text_lines.h"
#include "engine/archive/scrub.h"
#include "engine/trial_spec.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// `text` as one Markdown code span: a fence longer than any run of
// backticks in it, spaced where it starts or ends with one, one line.
std::string codeSpan(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::size_t longest = 0;
  for (std::size_t i = 0, run = 0; i < text.size(); ++i)
    longest = std::max(longest, run = text[i] == '`' ? run + 1 : 0);
  const std::string fence(longest + 1, '`');
  const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
  return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
}

// How candidates were decided, and why (core/flaky.h).
std::string flakyHandling(const FailureRate& rate, const FlakyOptions& flaky) {
  if (!flaky.enabled) return "flakiness handling off (flaky.enabled: false): one trial decided each candidate";
  std::ostringstream alpha;
  alpha << flaky.alpha;
  if (rate.deterministic())
    return "charged as " + rate.verdict() + "; so one pass rejected a candidate, and the final 1-minimality " +
           "check tested each kept unit again at a " + alpha.str() + " chance of hiding a real failure";
  return "charged as " + rate.verdict() + "; so a candidate was rejected only after a streak of passes with at " +
         "most a " + alpha.str() + " chance of hiding a real failure";
}

std::string tensorTable(const std::vector<TensorInfo>& tensors) {
  std::ostringstream out;
  out << "| tensor | dtype | shape | strides | layout | storage | sample axis |\n|---|---|---|---|---|---|---|\n";
  for (const auto& t : tensors) {
    // A list's entries split from one tensor share it: a few names and the
    // count (32 entries named 31 others each, 1000 lines of names).
    constexpr std::size_t kNamed = 3;
    std::string storage = "offset " + std::to_string(t.storage_offset);
    for (std::size_t i = 0; i < t.shares_storage_with.size() && i < kNamed; ++i)
      storage += (i ? ", `" : ", shared with `") + t.shares_storage_with[i] + "`";
    if (t.shares_storage_with.size() > kNamed)
      storage += " and " + std::to_string(t.shares_storage_with.size() - kNamed) + " more";
    out << "| `" << t.name << "` | " << t.dtype << " | " << formatList(t.shape) << " | " << formatList(t.strides)
        << " | " << t.layout << " | " << storage << " | " << (t.has_sample_axis ? std::to_string(t.sample_axis) : "-")
        << " |\n";
  }
  return out.str();
}

std::string statsLine(const OracleStats& s) {
  std::ostringstream out;
  out << s.trials + s.replayed << " trials in " << s.rounds
      << " rounds (trials run at once count as one round, replayed ones as none; " << s.same_failure
      << " failed the same way, " << s.passed << " passed, " << s.different_failure << " failed differently, "
      << s.timeouts << " timed out; " << s.slipped << " candidates rejected for failing two ways; " << s.replayed
      << " replayed from the journal, " << s.reused << " results reused, " << s.speculative << " speculative); "
      << s.rejected_by_invariant << " rejected by invariants without a trial";
  return out.str();
}

// First, when there is one: what a PyTorch maintainer runs before anything else.
void writeOpRepro(std::ostream& out, const OpStepResult& op) {
  if (op.status != OpStepStatus::Made) return;
  const OpCall& call = op.reduced ? *op.reduced : *op.found;
  const bool non_finite = op.found->error.rfind("FloatingPointError", 0) == 0;
  out << (non_finite ? "## The first operator that made a NaN or an inf (`op/repro_op.py`)\n\n"
                     : "## The failing operator alone (`op/repro_op.py`)\n\n")
      << "`" << call.op << "`, the " << (call.phase == "unknown" ? "" : call.phase + " ") << "call number "
      << op.found->index << " of its process, " << op.alone << ":\n\n";
  for (const std::string& line : text::splitLines(op.script)) out << (line.empty() ? "" : "    ") << line << "\n";
  out << "\nArguments:\n\n";
  for (const OpTensor& t : call.tensors) out << "- `" << t.describe() << "`\n";
  const auto shown = [](const OpCall& c) {
    std::string all;
    for (const OpTensor& t : c.tensors) all += t.describe() + "\n";
    return all;
  };
  if (!op.not_reduced.empty()) out << "\nThe inputs are as recorded (not reduced: " << op.not_reduced << ").\n";
  if (op.reduced && shown(*op.found) != shown(*op.reduced)) {
    out << "\nAs recorded, before the inputs were reduced:\n\n";
    for (const OpTensor& t : op.found->tensors) out << "- `" << t.describe() << "`\n";
  }
  out << "\nRun it with `python op/repro_op.py` (a Python with PyTorch; it reads `op/inputs.pt` beside it, with "
         "`weights_only=True`, for "
         "the tensors it does not spell out). The batch-level reproducer below shows the failure in your program's own "
         "context.\n\n";
}

// Where no single call was kept: which one was found, and why it does not stand alone.
std::string opReproLine(const OpStepResult& op) {
  switch (op.status) {
    case OpStepStatus::Made:
      return "`op/repro_op.py` calls `" + op.found->op + "` alone (see the top of this report)";
    case OpStepStatus::NotIsolated:
      return std::string("none kept") + (op.found ? ": the call found was `" + op.found->op + "`" : "") + "; " + op.why;
    case OpStepStatus::NotTried:
      return "not tried (" + op.why + ")";
  }
  return "";
}

// A non-finite failure: where its first NaN or inf was, the batch first.
std::string firstNonFiniteLine(const ReductionSummary& s) {
  std::string line;
  for (const std::string& v : s.non_finite_inputs) line += (line.empty() ? "" : "; ") + v;
  if (!line.empty()) return "the batch itself holds them: " + line + " (as the original batch held the kept samples)";
  if (s.op.found && s.op.found->error.find("FloatingPointError") == 0)
    return "`" + s.op.found->op + "` (" + s.op.found->phase + ", call " + std::to_string(s.op.found->index) +
           "): " + s.op.found->error.substr(s.op.found->error.find(": ") + 2) + "; the batch holds no NaN or inf" +
           (s.op.status == OpStepStatus::Made ? " (`op/repro_op.py` is that call)" : "");
  return "not located (" + (s.op.why.empty() ? std::string("no operator call was recorded") : s.op.why) +
         "); the batch holds no NaN or inf";
}

// Generated code (torch.compile's Inductor kernels): what a user does next.
bool inGeneratedCode(const FailureSignature& s) {
  return s.message.find("torchinductor") != std::string::npos || s.message.find(".main.cpp") != std::string::npos ||
         s.message.find("<hash>") != std::string::npos || s.op == "inductor" ||
         s.message.find("triton") != std::string::npos;
}

void writeSignature(std::ostream& out, const ReductionSummary& s) {
  const auto [check, avoid] = adviceFor(s.signature);
  out << "## Failure\n\n"
      << "- First error: `" << s.signature.message << "`\n";
  if (!s.original_message.empty())
    out << "- The original batch's first error: `" << s.original_message
        << "` (the same failure, with other numbers; where they name a value of the data, other samples of the "
           "original batch hold other such values: after a fix, run the step on the original batch too)\n";
  out << "- Family: " << familyName(s.signature.family) << "\n"
      << "- Operator: "
      << (!s.signature.op.empty() ? "`" + s.signature.op + "`"
          : s.op.found            ? "not named by the output; the op step located `" + s.op.found->op + "` (below)"
                                  : std::string("(not named by the output)"))
      << "\n"
      << "- Trial ended: " << s.exit_description << "\n"
      << "- Operator call alone: " << opReproLine(s.op) << "\n";
  if (s.signature.family == FailureFamily::NonFinite)
    out << "- First non-finite value: " << firstNonFiniteLine(s) << "\n";
  if (inGeneratedCode(s.signature))
    out << "- In generated code: the check that failed is in a kernel torch.compile generated (Inductor). Run the "
           "step with `torch.compile(backend=\"eager\")`, then `\"aot_eager\"`: if it then passes, the compiler is "
           "at fault, and PyTorch's own minifier reduces the graph (`TORCHDYNAMO_REPRO_AFTER=\"aot\"`, "
           "`TORCHDYNAMO_REPRO_LEVEL=4`); if it fails the same way, the inputs are\n";
  out << "- First check: " << check << "\n"
      << "- Conclusion to avoid: " << avoid << "\n\n";
}

// A kept entry's text as REPORT.md shows it: scrubbed whole, then cut to
// 240 characters, never inside a "<secret:...>" marker. Cut first, a URL's
// password before its "@host" or most of a token matched no rule and was
// shown (probe 33).
std::string shownEntry(const std::string& text, const ScrubContext& scrub) {
  constexpr std::size_t kShownChars = 240;
  const std::string scrubbed = scrubText(text, scrub);
  if (scrubbed.size() <= kShownChars) return scrubbed;
  std::size_t cut = kShownChars;
  const std::size_t marker = scrubbed.rfind("<secret:", cut);
  if (marker != std::string::npos && scrubbed.find('>', marker) >= cut) cut = marker;
  return scrubbed.substr(0, cut) + "...";
}

// `scrub`: the kept entries' texts are scrubbed before they go into a code
// span; a rule that took a value up to the line's end took the span's
// closing backtick too, and REPORT.md showed the rest as text.
void writeMinimal(std::ostream& out, const ReductionSummary& s, const ScrubContext& scrub) {
  out << "## Minimal case\n\n"
      << "- Samples: " << s.kept_ids.size() << " of " << s.original_samples << "\n"
      << "- Kept sample ids: " << formatList(s.kept_ids) << "\n";
  for (const auto& entry : s.kept_entries)
    out << "- Kept sample " << entry.id << " in " << codeSpan(entry.list) << ": "
        << codeSpan(shownEntry(entry.text, scrub)) << "\n";
  for (const auto& [name, values] : s.small_values) out << "- `" << name << "` = " << values << "\n";
  if (!s.apart.empty()) {
    out << "\n### What sets the minimal batch apart\n\n"
        << "The kept samples as the original batch held them, against the samples that were cut (the values above "
           "are the minimal batch's, after the values pass made what the failure does not need trivial).\n\n";
    for (const auto& line : s.apart) out << "- " << line << "\n";
  }
  if (!s.neighbours.empty()) {
    out << "\n### Neighbour cases (`neighbours/`, checked by `minrepro verify --expect pass`)\n\n";
    for (const auto& line : s.neighbours) out << "- " << line << "\n";
  }
  out << "\n" << tensorTable(s.minimal_tensors) << "\nOriginal batch:\n\n" << tensorTable(s.original_tensors) << "\n";
}

}  // namespace

std::string madeWithTorch(const ReductionSummary& s) {
  for (const auto& [key, value] : s.environment)
    if (key == "PyTorch" && value.find(' ') == std::string::npos) return value;
  return "";
}

namespace {

void writeReproduce(std::ostream& out, const CaseConfig& config, const ReductionSummary& s) {
  const std::string torch = madeWithTorch(s);
  out << "## Reproduce\n\n"
      << "Without minrepro, with a Python that has PyTorch"
      << (torch.empty() ? std::string()
                        : " " + torch +
                              " (the version this case was made with: under another one it may fail "
                              "otherwise, or not at all)")
      << ":\n\n"
         "    python repro.py [neighbours/plus_one.pt]\n\n"
         "(`python` there is that Python: name it where your `python` is another, e.g. `python3 repro.py`.)\n\n"
      << (config.command ? "repro.py runs the trial's command in its own place (exec), so it ends as the trial did: "
                           "the same exit status, or death by the same signal.\n\n"
                         : "")
      << (config.command && isPythonProgram(config.command->argv.front())
              ? "The trials ran the Python `" + config.command->argv.front() +
                    "` (recorded for information): repro.py runs the command with the Python that runs repro.py, "
                    "so a Python with that PyTorch (and the script's own imports) will do.\n\n"
              : "")
      << "Reduce again or check with minrepro, from this directory:\n\n    minrepro shrink --config case.yaml"
      << (config.command && isPythonProgram(config.command->argv.front())
              ? " [--python PYTHON]\n\n(`--python`, a Python with PyTorch, when the trials' Python above is not on "
                "this machine)\n\n"
              : "\n\n")
      << "- Checked on its own before this report was final: the archive " << s.self_check.describe() << "\n";
  if (!s.bundled.empty()) {
    out << "- Files the trial reads, bundled (a traced plain run of the minimal case, and trial.files):";
    for (const auto& name : s.bundled) out << " `" << name << "`";
    out << "\n";
  }
  for (const auto& line : s.bundled_from_outside) out << "- Read from outside the case directory: " << line << "\n";
  for (const auto& line : s.left_out) out << "- Read by the trial but not bundled: " << line << "\n";
  for (const auto& line : s.secrets_in_files)
    out << "- **Looks like a secret, copied verbatim**: " << line << " (remove it from the file before you send "
        << "the archive)\n";
  out << "\n";
}

void writeEnvironment(std::ostream& out, const ReductionSummary& s, const CaseConfig& config) {
  out << "## Environment\n\n";
  for (const auto& [key, value] : s.environment) out << "- " << key << ": " << value << "\n";
  if (!config.context.empty()) {
    out << "\nCaptured context:\n\n";
    const ScrubContext scrub = scrubContextFor(config);
    for (const auto& [key, value] : config.context)
      out << "- " << key << ": " << scrubContextValue(key, value, scrub) << "\n";
  }
  out << "\n";
}

void writeReduction(std::ostream& out, const ReductionSummary& s) {
  out << "## Reduction\n\n";
  if (!s.incomplete.empty())
    out << "- **Stopped early (" << s.incomplete << "): this is the best case found so far, possibly not minimal.**\n";
  out << "- " << statsLine(s.stats) << "\n"
      << "- Final case confirmed in a fresh process: " << (s.confirmed ? "yes" : "no")
      << (s.confirmed_by_self_check ? " (the self-check's plain runs from the extracted archive are the confirmation)"
                                    : "")
      << "\n"
      << "- Trial processes: " << (s.processes.empty() ? "plain processes" : s.processes) << "\n"
      << "- 1-minimality checked in plain processes: " << s.fresh_minimality << "\n"
      << (s.compile_cache.empty() ? "" : "- torch.compile's caches: " + s.compile_cache + "\n")
      << "- Diagnostic variables of the trials and the first re-run: " << (s.diagnostic.empty() ? "none" : s.diagnostic)
      << "; the final confirmation ran without any diagnostic variable\n"
      << "- Failure rate: " << s.rate.describe() << "; " << flakyHandling(s.rate, s.flaky) << "\n"
      << "- Op step (the failing operator call alone): " << s.op.processes << " runs of repro.py and repro_op.py, "
      << s.op.reduction_trials << " trials reducing the call's inputs\n"
      << "- Seed: " << s.seed << "\n";
  const std::vector<std::string> account = timeAccount(s);
  out << "- Time: " << std::fixed << std::setprecision(1) << s.seconds << " s"
      << (account.empty() ? "" : "; " + account.front()) << "\n";
  for (std::size_t i = 1; i < account.size(); ++i) out << "- " << account[i] << "\n";
  if (!s.stats.other_bugs.empty()) {
    out << "- Different failures seen on the way (other bugs, never accepted):\n";
    for (const auto& [summary, count] : s.stats.other_bugs) {
      const auto variants = s.stats.other_bug_variants.find(summary);
      out << "  - " << count << "x " << summary
          << (variants != s.stats.other_bug_variants.end() && variants->second > 1
                  ? " (" + std::to_string(variants->second) + " messages that differ only in their numbers)"
                  : "")
          << "\n";
    }
  }
}

}  // namespace

std::vector<std::string> timeAccount(const ReductionSummary& s) {
  if (!s.timeline || s.timeline->phases().empty()) return {};
  std::string phases;
  double before_archive = 0;  // the original's and the search's wall time
  bool self_check = false, op_step = false;
  for (const Phase& p : s.timeline->phases()) {
    phases += (phases.empty() ? "" : ", ") + p.name + " " + secondsText(p.seconds()) + " s";
    if (p.name == "original" || p.name.starts_with("search")) before_archive += p.seconds();
    self_check = self_check || p.name == "self-check";
    op_step = op_step || p.name == "op step";
  }
  std::vector<std::string> lines{"phases: " + phases +
                                 (self_check && op_step ? " (the self-check and the op step run side by side)" : "")};
  const std::size_t trials = s.stats.trials;
  if (trials == 0) return lines;
  const double own = std::max(0.0, before_archive - s.stats.round_trial_seconds);
  lines.push_back("Trials' own time: " + secondsText(s.stats.trial_seconds) + " s in " + std::to_string(trials) +
                  " trials; of the original's and the search's " + secondsText(before_archive) + " s, " +
                  secondsText(own) +
                  " s was minrepro's own work (candidates written, outcomes read, fork servers "
                  "started) rather than a round's longest trial running");
  return lines;
}

// REPORT.md without raw HTML or bidirectional controls from the failure's
// own text (a message with `<script>` or `<img onerror=...>`, a file name
// with U+202E): Markdown viewers render HTML outside code, and a bidi
// control reorders what the reader sees. Outside code spans and indented
// code blocks '<' becomes "&lt;"; a bidi control becomes "[U+XXXX]"
// everywhere.
namespace {

// Scrubbing's own placeholders (`<home>`, `<secret:github-pat>`, ...) stay
// as they are: no attributes, no element a viewer knows.
bool isPlaceholderAt(const std::string& line, std::size_t i) {
  static const char* const kNames[] = {"<home>", "<user>", "<host>", "<path>", "<tmp>", "<hash>", "<email>"};
  for (const char* name : kNames)
    if (line.compare(i, std::strlen(name), name) == 0) return true;
  if (line.compare(i, 8, "<secret:") != 0) return false;
  std::size_t j = i + 8;
  while (j < line.size() && (std::islower(static_cast<unsigned char>(line[j])) || line[j] == '-')) ++j;
  return j < line.size() && line[j] == '>';
}

}  // namespace

namespace {
// Whether a run of exactly `run` backticks starts at or after `from`.
bool closingRunAfter(const std::string& line, std::size_t from, std::size_t run) {
  for (std::size_t i = from; i < line.size();) {
    if (line[i] != '`') {
      ++i;
      continue;
    }
    std::size_t n = 0;
    while (i + n < line.size() && line[i + n] == '`') ++n;
    if (n == run) return true;
    i += n;
  }
  return false;
}
// The length of the bare URL (http://, https://, www.) that starts a word
// at `i`, up to the next space or backtick; 0 when none.
std::size_t bareUrlAt(const std::string& line, std::size_t i) {
  if (i > 0 && (std::isalnum(static_cast<unsigned char>(line[i - 1])) || line[i - 1] == '`')) return 0;
  const auto startsWithAt = [&](const char* p) { return line.compare(i, std::strlen(p), p) == 0; };
  if (!startsWithAt("http://") && !startsWithAt("https://") && !startsWithAt("www.")) return 0;
  std::size_t end = i;
  while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end])) && line[end] != '`') ++end;
  return end - i;
}
// Whether the character at `i` follows an odd number of backslashes.
bool escapedAt(const std::string& line, std::size_t i) {
  std::size_t slashes = 0;
  while (slashes < i && line[i - 1 - slashes] == '\\') ++slashes;
  return slashes % 2 == 1;
}
}  // namespace

std::string withoutRawHtml(const std::string& markdown) {
  std::string out;
  out.reserve(markdown.size());
  std::istringstream lines(markdown);
  for (std::string line; std::getline(lines, line);) {
    const bool block = line.rfind("    ", 0) == 0 || line.rfind("\t", 0) == 0;
    std::size_t fence = 0;  // the open code span's backtick count; 0: outside
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (const std::size_t bidi = text::hiddenControlAt(line, i)) {
        const auto b = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(line[i + k])); };
        const unsigned code =
            bidi == 2   ? ((b(0) & 0x1f) << 6) | (b(1) & 0x3f)
            : bidi == 3 ? ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f)
                        : ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
        char buffer[16];
        std::snprintf(buffer, sizeof buffer, "[U+%04X]", code);
        out += buffer;
        i += bidi - 1;
        continue;
      }
      if (const auto byte = static_cast<unsigned char>(line[i]); (byte < 0x20 && byte != '\t') || byte == 0x7f) {
        // ESC, BEL, '\r', DEL: a kept sample's entry or a name quoted as it is (probe 24: ESC [2J
        // from a file name cleared the screen of whoever ran `cat REPORT.md`).
        char buffer[16];
        std::snprintf(buffer, sizeof buffer, "[byte 0x%02X]", static_cast<unsigned>(byte));
        out += buffer;
        continue;
      }
      if (static_cast<unsigned char>(line[i]) >= 0x80) {  // a character, or a byte that is no UTF-8
        const std::size_t n = text::utf8SequenceAt(line, i);
        if (n == 0) {
          char buffer[16];
          std::snprintf(buffer, sizeof buffer, "[byte 0x%02X]",
                        static_cast<unsigned>(static_cast<unsigned char>(line[i])));
          out += buffer;
          continue;
        }
        out.append(line, i, n);
        i += n - 1;
        continue;
      }
      if (line[i] == '`' && !block && fence == 0 && escapedAt(line, i)) {
        out += '`';  // "\`" outside a code span is a backtick, not a span's start (CommonMark)
        continue;
      }
      if (line[i] == '`' && !block) {
        std::size_t run = 1;
        while (i + run < line.size() && line[i + run] == '`') ++run;
        // A run opens a code span only where a run of as many closes it
        // (CommonMark); unmatched, it is text, and what follows is not code.
        if (fence == run)
          fence = 0;
        else if (fence == 0 && closingRunAfter(line, i + run, run))
          fence = run;
        out.append(run, '`');
        i += run - 1;
        continue;
      }
      const bool code = block || fence > 0;
      if (const std::size_t url = code ? 0 : bareUrlAt(line, i)) {
        out += "`" + line.substr(i, url) + "`";  // GitHub's viewer links a bare URL; in a code span it is text
        i += url - 1;
        continue;
      }
      if (!code && line[i] == ']' && i + 1 < line.size() && line[i + 1] == '(') {
        out += "]\\(";  // no link or remote image: `[x](http://...)` shown as text
        ++i;
        continue;
      }
      const bool inert = line[i] != '<' || code || isPlaceholderAt(line, i);
      out += inert ? std::string(1, line[i]) : std::string("&lt;");
    }
    out += '\n';
  }
  return out;
}

std::string renderReport(const CaseConfig& config, const ReductionSummary& s) {
  std::ostringstream out;
  // Scrubbed before summary() cuts the message: a token the cut crossed
  // would no longer have the shape its rule finds.
  FailureSignature shown = s.signature;
  shown.message = scrubText(shown.message, scrubContextFor(config));
  out << "# Reproducer: " << shown.summary() << "\n\n"
      << "Made by minrepro " << MINREPRO_VERSION << ". The batch below is the smallest found that still fails the "
      << "same way (same family, operator and first message) as the original.\n\n";
  if (!s.warnings.empty()) {
    out << "## Warnings\n\n";
    for (const auto& w : s.warnings) out << "- " << w << "\n";
    out << "\n";
  }
  writeOpRepro(out, s.op);
  writeSignature(out, s);
  writeMinimal(out, s, scrubContextFor(config));
  writeReproduce(out, config, s);
  writeEnvironment(out, s, config);
  writeReduction(out, s);
  // The report travels to other people: no home, user, host or local path.
  return withoutRawHtml(scrubText(out.str(), scrubContextFor(config)));
}

namespace {

// The harness's transform steps (harness/transforms.cc) in Python, with the
// same seeds: PyTorch's CPU generator gives the same numbers in both.
std::string reproTransforms(const std::vector<TransformSpec>& transforms) {
  std::ostringstream py;
  for (const TransformSpec& t : transforms) {
    const std::string x = "batch[" + text::quoted(t.tensor) + "]";
    auto p = [&](const char* key) { return t.params.at(key); };
    const std::string gen = "torch.Generator().manual_seed(" + std::to_string(t.seed.value_or(0)) + ")";
    py << "# transform " << t.name << " (" << t.type << ")\n";
    if (t.type == "normalize") py << x << " = (" << x << " - " << p("mean") << ") / " << p("std") << "\n";
    if (t.type == "noise")
      py << x << " = " << x << " + (torch.randn(" << x << ".shape, generator=" << gen << ") * " << p("std") << ").to("
         << x << ".dtype)\n";
    if (t.type == "cast") py << x << " = " << x << ".to(torch." << p("dtype") << ")\n";
    if (t.type == "pad")
      py << "x, axis, length = " << x << ", int(" << p("axis") << "), int(" << p("length") << ")\n"
         << "if x.shape[axis] >= length:\n    " << x << " = x.narrow(axis, 0, length)\nelse:\n"
         << "    size = list(x.shape)\n    size[axis] = length - x.shape[axis]\n"
         << "    " << x << " = torch.cat([x, torch.full(size, " << p("value") << ", dtype=x.dtype)], axis)\n";
    if (t.type == "crop")
      py << "x, axis, length = " << x << ", int(" << p("axis") << "), int(" << p("length") << ")\n"
         << "if x.shape[axis] > length:\n"
         << "    start = int(torch.randint(x.shape[axis] - length + 1, (1,), generator=" << gen << "))\n"
         << "    " << x << " = x.narrow(axis, start, length)\n";
  }
  return py.str();
}

std::string reproHarness(const HarnessTrial& h) {
  std::ostringstream py;
  // weights_only: a pickle in a received batch.pt must not run code.
  py << "batch = torch.load(BATCH, weights_only=True)\n"
     << reproTransforms(h.transforms) << "for name, t in batch.items():\n"
     << "    print(f\"{name}: {t.dtype} shape {tuple(t.shape)} strides {t.stride()}\", file=sys.stderr)\n"
     << "model = torch.jit.load(os.path.join(HERE, \"model.pt\"))\n"
     << "model.eval()\n"
     << "with torch.no_grad():\n"
     << "    output = model(batch[" << text::quoted(h.input) << "])\n";
  if (!h.target.empty() && h.loss == "cross_entropy")
    py << "    loss = F.cross_entropy(output, batch[" << text::quoted(h.target) << "], ignore_index=" << h.ignore_index
       << ")\n";
  else if (!h.target.empty() && h.loss == "nll")
    py << "    loss = F.nll_loss(output, batch[" << text::quoted(h.target) << "], ignore_index=" << h.ignore_index
       << ")\n";
  else
    py << "    loss = output.sum()\n";
  // The line minrepro verify --expect pass reads: a fix must keep every
  // sample that is not ignored, not only stop the exception.
  if (!h.target.empty() && h.loss != "none")
    py << "processed = int((batch[" << text::quoted(h.target) << "] != " << h.ignore_index << ").sum())\n"
       << "print(f\"minrepro-result: processed={processed} loss={float(loss)}\")\n";
  else
    py << "print(f\"minrepro-result: loss={float(loss)}\")\n";
  return py.str();
}

// The command replaces repro.py's process (exec), so repro.py ends exactly
// as the trial did: the same exit status, or death by the same signal, which
// a shell, CI or `minrepro verify` then sees as such (a subprocess whose
// status is passed to sys.exit turns SIGSEGV into exit status 245). stdin
// is /dev/null and the determinism variables are set as in the trials.
std::string reproCommand(const CaseConfig& config) {
  const CommandTrial& c = *config.command;
  std::ostringstream py;
  // A Python program runs as the Python that runs repro.py: the trials'
  // interpreter is a path on the reporter's machine (a venv's), which a
  // maintainer does not have. REPORT.md records it.
  const bool python_program = isPythonProgram(c.argv.front());
  if (python_program)
    py << "# The trials ran " << text::quoted(fs::path(c.argv.front()).filename().string())
       << "; this script runs the command with the Python that runs it.\n";
  py << "env = dict(os.environ)\n"
     << "def fill(arg):\n"
     << "    arg = (arg.replace(\"{batch}\", BATCH)\n"
     << "              .replace(\"{case_dir}\", HERE).replace(\"{workdir}\", HERE))\n"
     << "    while \"{env:\" in arg and \"}\" in arg[arg.index(\"{env:\"):]:\n"
     << "        start = arg.index(\"{env:\")\n"
     << "        end = arg.index(\"}\", start)\n"
     << "        arg = arg[:start] + env.get(arg[start + 5:end], \"\") + arg[end + 1:]\n"
     << "    return arg\n";
  // In the order a trial gets them: the case's variables, then the
  // determinism variables over them. Each trial had a number of its own (a
  // trial that wants a fresh seed per run reads it): so does each run here.
  for (const auto& [k, v] : c.env) {
    if (k == "PYTHONPATH" && v.find("{case_dir}") != std::string::npos)  // the bundled copies (engine/archive/bundle.h)
      py << "# The trials imported modules from these directories (PYTHONPATH); the archive carries them.\n"
         << "env[\"PYTHONPATH\"] = os.pathsep.join([fill(p) for p in " << text::quoted(v)
         << ".split(\":\")] + [p for p in [os.environ.get(\"PYTHONPATH\")] if p])\n";
    else if (!isWithheldEnvPlaceholder(v))
      py << "env[" << text::quoted(k)
         << "] = " << (v.find("{case_dir}") != std::string::npos ? "fill(" + text::quoted(v) + ")" : text::quoted(v))
         << "\n";
    else if (!argumentOfSecretVariable(k).empty())  // an argument's secret (engine/archive/scrub.h)
      py << "# Argument " << argumentOfSecretVariable(k) << " of the command holds a secret, left out: set " << k
         << " to it before running this.\n";
    else  // a secret's value stays out: the variable comes from where this runs
      py << "# trial.env set " << k << "; its value looks like a secret and is left out: set " << k
         << " before running this if the step needs it.\n";
  }
  py << "argv = [fill(a) for a in [";
  // A file of the case is the archive's copy, never the user's original.
  for (std::size_t i = 0; i < c.argv.size(); ++i)
    py << (i ? ", " : "")
       << (i == 0 && python_program ? "sys.executable" : text::quoted(caseRelativeArg(c.argv[i], config.base_dir)));
  py << "]]\n";
  py << "env[\"MINREPRO_SEED\"] = env[\"PYTHONHASHSEED\"] = " << text::quoted(std::to_string(config.seed)) << "\n"
     << "env.setdefault(\"MINREPRO_TRIAL\", str(int.from_bytes(os.urandom(4), \"little\")))\n";
  if (config.deterministic)
    py << "env[\"MINREPRO_DETERMINISTIC\"] = \"1\"\nenv[\"CUBLAS_WORKSPACE_CONFIG\"] = \":4096:8\"\n";
  // Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals: the
  // command gets the default dispositions a trial has.
  py << "import signal\n"
     << "for name in (\"SIGPIPE\", \"SIGXFSZ\"):\n"
     << "    if hasattr(signal, name):\n"
     << "        signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
     << "devnull = os.open(os.devnull, os.O_RDONLY)\n"
     << "os.dup2(devnull, 0)\n"
     << "sys.stdout.flush()\nsys.stderr.flush()\n"
     << "os.execvpe(argv[0], argv, env)\n";
  return py.str();
}

}  // namespace

// Text for a Python docstring: a backslash in the message (a Windows path,
// "\N", a byte written "\xe2") would be an escape, a malformed one a
// SyntaxError that stops repro.py before it reproduces anything; so would
// a byte that is no UTF-8 ("Non-UTF-8 code"), written "\xNN" instead.
static std::string docstringText(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const std::size_t n = text::utf8SequenceAt(text, i);
      if (n == 0) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buffer;
        continue;
      }
      out.append(text, i, n);
      i += n - 1;
      continue;
    }
    if (c == '\\') out += '\\';
    out += c == '"' ? std::string("\\\"") : std::string(1, c);
  }
  return out;
}

std::string renderReproPy(const CaseConfig& config, const FailureSignature& signature) {
  std::ostringstream py;
  py << "#!/usr/bin/env python3\n"
     << "\"\"\"Reproduces: " << docstringText(signature.summary()) << "\n\n"
     << "Made by minrepro; needs only PyTorch. Run from anywhere with a Python that has it: python repro.py [BATCH]\n"
     << "BATCH defaults to batch.pt beside this file; the neighbour cases are neighbours/*.pt.\n\"\"\"\n"
     << "import os\nimport sys\n\n";
  if (config.harness) py << "import torch\nimport torch.nn.functional as F\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\n"
     << "BATCH = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, \"batch.pt\")\n";
  py << (config.harness ? reproHarness(*config.harness) : reproCommand(config));
  return py.str();
}

// The minimal case in one line, against the original: "512 samples -> 1;
// length 600 -> 513; branches on 3 -> 1 (off: noise, normalize); non-trivial
// values 4506 -> 1" (a part only where the case has that dimension).
std::string minimalCaseLine(const CaseSize& from, const CaseSize& to, const Selection& best) {
  const std::string arrow = " \u2192 ";
  std::string line = std::to_string(from.samples) + " samples" + arrow + std::to_string(to.samples);
  if (from.length > 0) line += "; length " + std::to_string(from.length) + arrow + std::to_string(to.length);
  if (from.branches > 0) {
    line += "; branches on " + std::to_string(from.branches) + arrow + std::to_string(to.branches);
    std::string off;
    for (const auto& name : best.branches_off) off += (off.empty() ? "" : ", ") + name;
    if (!off.empty()) line += " (off: " + off + ")";
  }
  return line + "; non-trivial values " + std::to_string(from.values) + arrow + std::to_string(to.values);
}

}  // namespace minrepro
