// REPORT.md and repro.py: what a PyTorch maintainer reads and runs. No
// absolute paths of the machine that made them.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/case_config.h"
#include "core/failure_signature.h"
#include "core/flaky.h"
#include "core/op_call.h"
#include "engine/archive/self_check.h"
#include "engine/format_list.h"
#include "engine/oracle.h"
#include "harness/batch_store.h"

#include "engine/archive/sample_panels.h"
#include "engine/timeline.h"

namespace minrepro {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct ReductionSummary {
  // The minimal case's own failure: what repro.py prints. Where its message
  // differs from the original's (other numbers, the same failure),
  // original_message holds the original's.
  FailureSignature signature;
  std::string original_message;
  std::string exit_description;  // "killed by SIGABRT"
  std::int64_t original_samples = 0;
  std::vector<TensorInfo> original_tensors;
  std::vector<TensorInfo> minimal_tensors;
  std::vector<std::int64_t> kept_ids;  // sample ids of the minimal batch
  // What the kept samples hold in per-sample lists besides tensors, which
  // often names them for the user (a file name): (54, "meta", "{...}").
  struct KeptEntry {
    std::int64_t id = 0;
    std::string list, text;
  };
  std::vector<KeptEntry> kept_entries;
  KeyValues small_values;               // "target" -> "[4]" for small integer tensors, "weight" -> "[-1]" for few reals
  std::vector<std::string> apart;       // what sets the minimal batch apart (engine/archive/minimal_batch_contrast.h)
  std::vector<std::string> neighbours;  // one line per neighbour case, or why it was not made
  OracleStats stats;
  std::uint64_t seed = 0;
  double seconds = 0;
  bool confirmed = false;                // the minimal case failed the same way once more at the end
  bool confirmed_by_self_check = false;  // ... in the self-check's runs (no confirmation of its own)
  std::string diagnostic;                // the trials' diagnostic variables and why (DiagnosticPlan::describe)
  std::string incomplete;                // why the run stopped early ("" when it ran to the end)
  FailureRate rate;                      // the failure rate seen on trials known to fail
  FlakyOptions flaky;
  KeyValues environment;
  std::string processes;             // forked or plain trials, and why (engine/plain_process_check.h)
  std::string compile_cache;         // how trials shared torch.compile's caches; "" for the built-in harness
  std::string fresh_minimality;      // what the plain 1-minimality check changed
  std::vector<std::string> bundled;  // files the trial reads, as the archive names them
  std::vector<std::string> bundled_from_outside;  // of those, read from outside the case directory (with where)
  std::vector<std::string> left_out;              // traced but not bundled, with why
  // Lines of bundled files that look like a secret ("step.py:12: huggingface-access-token"):
  // the files are copied verbatim, so the reader is warned instead.
  std::vector<std::string> secrets_in_files;
  SelfCheck self_check;               // the archive run on its own (engine/archive/self_check.h)
  OpStepResult op;                    // the failing operator call alone (engine/op_step/op_step.h)
  std::vector<std::string> warnings;  // shown first: torch versions that differ (engine/torch_versions.h)
  // The NaN and inf values the kept samples held in the original batch
  // ("`image`, sample id 3017: 3072 NaN"), for a non-finite failure.
  std::vector<std::string> non_finite_inputs;
  std::optional<double> flaky_rate;  // a flaky case's rate, for signature.txt (verify's rule: judgeFlakyRuns)
  // For REPORT.html (engine/archive/report_html.h): the minimal case in one
  // line, the run's timeline, the kept samples drawn.
  std::string size_line;
  const Timeline* timeline = nullptr;
  std::vector<SamplePanel> panels;
};

std::string renderReport(const CaseConfig& config, const ReductionSummary& summary);

// Markdown with the failure's own text made inert: '<' outside code spans
// and indented code blocks as "&lt;" (no raw HTML a viewer would render),
// "](" as "]\(" (no link, no remote image), bidirectional controls as
// "[U+202E]". renderReport's last step.
std::string withoutRawHtml(const std::string& markdown);

// Where the run's time went, in two lines for REPORT.md and the log's end:
// each phase's wall time (the self-check and the op step side by side),
// then the trials' own time and what of the original's and the search's
// wall time was minrepro's own work rather than a trial running.
std::vector<std::string> timeAccount(const ReductionSummary& summary);
std::string renderReproPy(const CaseConfig& config, const FailureSignature& signature);

// The PyTorch that made the case (its environment's record), "" when unknown.
std::string madeWithTorch(const ReductionSummary& summary);

// The minimal case in one line, against the original: "512 samples -> 1;
// length 600 -> 513; branches on 3 -> 1 (off: noise, normalize); non-trivial
// values 4506 -> 1" (a part only where the case has that dimension).
std::string minimalCaseLine(const CaseSize& from, const CaseSize& to, const Selection& best);

}  // namespace minrepro
