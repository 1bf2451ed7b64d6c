// The pass schedule: the case's passes (case.yaml `reducers`, or a pipeline
// of configs/pipelines) in order, repeated until a whole round makes no
// progress. Set passes are searched by DeltaSearch, knob passes by
// KnobSearch; every accepted step is logged with the case's size.
#pragma once

#include "core/case_config.h"
#include "engine/log.h"
#include "engine/oracle.h"
#include "reducers/reducer.h"

namespace minrepro {

Selection runPipeline(const CaseConfig& config, const CaseView& view, Selection start, TrialOracle& oracle, Log& log);

// The candidates runPipeline asks first, in order, assuming each is accepted
// (at most `max`): speculative trials beside the original's check.
std::vector<Speculated> openingCandidates(const CaseConfig& config, const CaseView& view, const Selection& start,
                                          std::size_t max);

}  // namespace minrepro
