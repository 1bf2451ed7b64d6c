// Optional branches applied to a trial: the harness runs only the transforms
// still on; a command gets each switch's "on" or "off" arguments (appended
// to its argv, in declared order) and environment. The archive's case bakes
// the final choice in the same way, so it runs without any branch left.
#pragma once

#include <set>
#include <string>

#include "core/case_config.h"

namespace minrepro {

HarnessTrial withBranches(const HarnessTrial& harness, const std::set<std::string>& off);
CommandTrial withBranches(const CommandTrial& command, const std::set<std::string>& off);

// The case with the selection's branch choice baked in: transforms off are
// dropped, switches become plain arguments and environment.
CaseConfig bakeBranches(const CaseConfig& config, const std::set<std::string>& off);

}  // namespace minrepro
