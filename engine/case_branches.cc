#include "engine/case_branches.h"

namespace minrepro {

HarnessTrial withBranches(const HarnessTrial& harness, const std::set<std::string>& off) {
  HarnessTrial h = harness;
  h.transforms.clear();
  for (const TransformSpec& t : harness.transforms)
    if (!off.count(t.name)) h.transforms.push_back(t);
  return h;
}

CommandTrial withBranches(const CommandTrial& command, const std::set<std::string>& off) {
  CommandTrial c = command;
  c.switches.clear();
  for (const CommandSwitch& s : command.switches) {
    const bool on = !off.count(s.name);
    const auto& args = on ? s.args : s.off_args;
    c.argv.insert(c.argv.end(), args.begin(), args.end());
    for (const auto& [name, value] : on ? s.env : s.off_env) c.env[name] = value;
  }
  return c;
}

CaseConfig bakeBranches(const CaseConfig& config, const std::set<std::string>& off) {
  CaseConfig baked = config;
  if (baked.harness) baked.harness = withBranches(*config.harness, off);
  if (baked.command) baked.command = withBranches(*config.command, off);
  return baked;
}

}  // namespace minrepro
