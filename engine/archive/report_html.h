// REPORT.html: what a person looks at, in the archive and in the work
// directory (live while shrink runs). One self-contained file: inline SVG
// and CSS, no script, no font or image from anywhere (a Content-Security-
// Policy of default-src 'none' says so to the browser). Made from the same
// summary as REPORT.md (engine/archive/report.h), plus the run's timeline
// (engine/timeline.h) and the kept samples (engine/archive/sample_panels.h):
//   the verdict first (failure, the minimal case in one line, reproduces
//   alone k of K, the op-level call); the reduction drawn (size against
//   trial number and against time, a mark per answer coloured by outcome,
//   the passes as bands, the accepted steps as a line); the kept samples
//   beside samples that were cut; then the environment and the trial log,
//   collapsed.
#pragma once

#include <string>
#include <vector>

#include "core/case_config.h"
#include "engine/archive/report.h"
#include "engine/archive/sample_panels.h"
#include "engine/timeline.h"

namespace minrepro {

struct HtmlReportInput {
  const ReductionSummary* summary = nullptr;  // null while the run goes on (live)
  const Timeline* timeline = nullptr;
  std::vector<SamplePanel> panels;
  std::string size_line;  // "512 samples x length 20 ... -> 1 sample x length 3 ..."
  // Live only: where the run stands and what is left, with its uncertainty.
  std::string live_status;
};

std::string renderReportHtml(const CaseConfig& config, const HtmlReportInput& input);

// HtmlReportInput::live_status: where the run stands ("12 of 512 samples
// kept after 47 trials in 30 s (94 trials per minute)") and the running
// pass's own estimate of what it has left, said to be an estimate.
std::string liveStatus(std::int64_t samples, std::int64_t total, std::size_t trials_run, std::size_t trials,
                       double seconds, const PassEstimate& estimate);

// Writes `html` to `path` through a temporary file and a rename, so that a
// browser reloading it never reads half a file. False when it could not.
bool writeFileAtomically(const std::filesystem::path& path, const std::string& html);

}  // namespace minrepro
