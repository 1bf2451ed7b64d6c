// `minrepro compare ARCHIVE|case.yaml`: one change at a time (docs/method.md, "Failure families",
// §5). The minimal case runs as is and under variants, each alone and each
// run a fresh process with the diagnostic variables removed: the CPU instead
// of the accelerator, float32 instead of half precision, deterministic
// algorithms on, and each optional branch off. An archive's op/repro_op.py
// (the failing call alone) runs under the same variants too. Changing several things at
// once would blur invalid data, an operator's contract and the binary
// environment; one change per variant keeps them apart.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "core/errors.h"
#include "core/failure_signature.h"
#include "core/process/process.h"
#include "core/process/sandbox.h"
#include "engine/torch_versions.h"
#include "harness/batch_store.h"

namespace minrepro {

// One variant: what it changes, or why it does not apply to this case.
struct Variant {
  std::string name;            // "as-is", "cpu", "float32", "deterministic", "branch-off:NAME"
  std::string change;          // one line: what is different from the case as is
  std::string not_applicable;  // empty: the variant applies
  std::map<std::string, std::string> env_set;
  bool float32_batch = false;          // half/bfloat16 batch tensors cast to float32
  std::set<std::string> branches_off;  // engine/case_branches.h
  bool applies() const { return not_applicable.empty(); }
};

// The variants for a case whose batch has `tensors`, "as-is" first. Pure:
// decides from the case (its trial kind, its context's backend, its
// branches) and the batch's dtypes; `dev_root` is where the backend of a
// case without a recorded one is detected (engine/diagnostics.h).
std::vector<Variant> planVariants(const CaseConfig& config, const std::vector<TensorInfo>& tensors,
                                  const std::filesystem::path& dev_root = "/dev");

struct VariantResult {
  Variant variant;
  int runs = 0, same = 0, different = 0, passed = 0;
  std::map<std::string, int> other_failures;  // signature summary -> runs
  std::vector<std::string> cast;              // float32: what was cast
};

struct CompareResult {
  std::filesystem::path input;
  std::string recorded;  // an archive's signature.txt failure, "" for a case.yaml
  // An archive's case as it is now fails otherwise than recorded, by
  // verify's rule (changed since, or failing otherwise here): "the same way" in the table
  // is then the same way as the case as is, which the report says.
  bool fails_otherwise_than_recorded = false;
  TorchChoice torch;           // an archive's trial command: which Python runs it, and its torch
  FailureSignature reference;  // the first failure of the case as is
  std::vector<VariantResult> results;
  // An archive's op-level reproducer (engine/op_step/op_step.h), compared
  // the same way: its call, and its own results (the call's tensors are the
  // batch; its as-is failure is its reference). Null when there is none.
  std::string op_call;
  std::shared_ptr<CompareResult> op;
  bool reproduces() const { return reference.failed(); }
};

struct CompareOptions {
  std::filesystem::path input;  // repro.tar.gz (or .tgz) or case.yaml
  int runs = 3;                 // fresh runs per variant
  std::string trial_binary;     // minrepro-trial; default beside minrepro
  std::filesystem::path dev_root = "/dev";
  // An archive's code runs in bubblewrap (core/process/sandbox.h); a
  // case.yaml of your own runs as it is unless `on`.
  SandboxMode sandbox = SandboxMode::Auto;
  // --python: the Python an archive's trial command runs with; unset, the
  // archive's when its torch is the recorded one, else the build's.
  std::optional<std::string> python;
  // Set (SIGINT, SIGTERM): the running trial is killed and no other starts.
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled() const { return cancel && cancel->load(); }
};

// Runs every applicable variant `runs` times; `progress` (may be null) gets
// a line per variant. Stops after "as-is" when it never fails (nothing to
// compare with). Throws BadInputError for bad input and
// TrialStartError when a run cannot start. `executor` null: LocalExecutor.
CompareResult compareVariants(const CompareOptions& options, std::ostream* progress, Executor* executor = nullptr);

// The table (Markdown) and what each outcome suggests, with the CPU caveat.
std::string renderComparison(const CompareResult& result);

// The command: 0 compared; DoesNotReproduceError (exit 3) when the case as
// is never fails, BadInputError (2) and TrialStartError (4) as they come.
int runCompare(const CompareOptions& options, std::ostream& out, std::ostream& err);

}  // namespace minrepro
