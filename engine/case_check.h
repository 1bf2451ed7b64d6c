// Whether the case, not the batch, is what fails: a case that keeps a
// tensor whole which the step cuts with the samples (a per-sample tensor
// taken for something else) makes every candidate fail another way, with a
// size mismatch that names the batch's size. A search would run for hours
// and reduce nothing. Two checks stop it early, each with what the case
// keeps whole and what to write:
//
// - before the search, the two halves of the batch: when both fail another
//   way, the same way, and that failure names the batch's size or a tensor
//   the case keeps whole, the run stops at once (free in a healthy run:
//   the first half asked is the search's own first candidate, and the
//   other is asked only when that one fails another way);
// - during the search, while no candidate has been accepted: 20 candidates
//   in a row that fail another way with one signature, or 30 trials (or a
//   minute) that show nothing but other failures, stop the run.
//
// Both end with exit 3 (DoesNotReproduceError).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/case_config.h"
#include "core/failure_signature.h"
#include "harness/batch_store.h"
#include "reducers/reducer.h"

namespace minrepro {

class TrialOracle;
struct OracleStats;
class Log;

// "camera [64] int64, table [100, 8] float32" (the tensors the case keeps
// whole, with no sample axis and in no per-sample list), those with a
// dimension as long as the batch first; "" when there are none.
std::string tensorsKeptWhole(const BatchStore& batch);
// The tensors the case keeps whole whose first dimension is the batch's
// sample count, with what to do ("" when none): a hand-written case that
// forgot a per-sample tensor under samples.tensors carries all its rows in
// every candidate, and the search can still end "reduced".
std::string perSampleLookingKeptWhole(const BatchStore& batch);

// The message a wrong case stops with: what the candidates failed with,
// why that points at the case, what it keeps whole, and what to write.
std::string wrongCaseMessage(const std::string& what_happened, const FailureSignature& other, const BatchStore& batch);

// Why a case whose step fails as the original does with none of its
// samples is wrong: what fails is in a tensor it keeps whole (a graph
// batch's nodes and edges, with `y` alone under samples.tensors), and a
// reduction would keep an arbitrary sample. Names those tensors and what
// to write instead.
std::string samplesDoNotMatterMessage(const BatchStore& batch);

// A harness key (trial.harness.input, .target) that names no tensor of
// the batch would fail every trial the same way, and be "reduced" as if it
// were the bug: BadInputError (exit 2) before the first trial.
void checkHarnessKeys(const CaseConfig& config, const BatchStore& batch);

// The halves check (above); throws DoesNotReproduceError when the case is wrong.
// `first_query`: the search's first candidate (engine/pipeline.h,
// openingCandidates), whose half is asked first.
void checkHalves(const BatchStore& batch, TrialOracle& oracle, const Selection& all, const Selection& first_query,
                 Log& log);

// After the search: a batch of several samples that kept every one while
// smaller candidates failed another way (a run the stops above let go on,
// because another pass accepted a candidate: the values zeroed) reduced
// nothing a reader would call reduced. Says so, with the other failure met
// most often and where to look; nullopt when samples went, or when every
// smaller batch passed (the failure needs them all: a finding, no warning).
std::optional<std::string> noSampleWentWarning(const BatchStore& batch, std::size_t kept, const OracleStats& stats);

// The search's running count of candidates that fail another way (above).
class OtherFailureWatch {
 public:
  // One decided candidate: accepted, or rejected with the signature of its
  // last trial (a pass, or another failure). Returns why the run should
  // stop, if it should.
  std::optional<std::string> add(bool accepted, const FailureSignature& last, std::size_t trials, double seconds);

 private:
  bool accepted_ = false;
  bool passed_ = false;
  std::string streak_signature_;
  std::size_t streak_ = 0;
  std::size_t first_trials_ = 0, others_ = 0;
  double first_seconds_ = -1;
};

}  // namespace minrepro
