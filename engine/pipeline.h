// The pass schedule: the case's passes (case.yaml `reducers`, or a pipeline
// of configs/pipelines) in order, repeated until a whole round makes no
// progress. Set passes are searched by DeltaSearch, setting passes by
// SettingSearch; every accepted step is logged with the case's size.
#pragma once

#include "core/case_config.h"
#include "engine/log.h"
#include "engine/oracle.h"
#include "reducers/reducer.h"

namespace minrepro {

// Throws BadInputError (exit 2) at the place in case.yaml (or the pipeline
// file) where a pass is named that reducers/reducers.def does not register,
// with the registered names and the nearest one. The case loader keeps
// where each name was written and leaves this to the holder of the registry.
void checkPassNames(const CaseConfig& config);

// `confirmation_follows`: a confirmation of the result runs after the
// passes (the oracle's confirm), so a single pass's speculation may run it
// early in a free slot; false when the self-check is the confirmation.
// `plain_check_follows`: the 1-minimality of the samples and branches is
// checked again in plain processes after the passes (a forked search,
// engine/plain_process_check.h), so their passes skip their own final check.
Selection runPipeline(const CaseConfig& config, const CaseView& view, Selection start, TrialOracle& oracle, Log& log,
                      bool confirmation_follows = true, bool plain_check_follows = false);

// The candidates runPipeline asks first, in order, assuming each is accepted
// (at most `max`): speculative trials beside the original's check.
std::vector<Speculated> openingCandidates(const CaseConfig& config, const CaseView& view, const Selection& start,
                                          std::size_t max);

}  // namespace minrepro
