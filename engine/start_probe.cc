// Can a trial start at all under the case's memory limit (see the header).
#include "engine/start_probe.h"

#include <vector>

#include "core/process/process.h"
#include "core/text_lines.h"
#include "engine/trial_spec.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// The program's start alone, or nothing when minrepro cannot tell what that is.
std::optional<std::vector<std::string>> startCommand(const CaseConfig& config, const std::string& trial_binary) {
  if (config.harness) return std::vector<std::string>{trial_binary};
  if (config.command && isPythonProgram(config.command->argv.front()))
    return std::vector<std::string>{config.command->argv.front(), "-c", "import torch"};
  return std::nullopt;
}

// "exit status 1: ImportError: libtorch_python.so: failed to map segment from shared object"
std::string howItEnded(const TrialOutcome& outcome) {
  std::string last;
  for (const std::string& line : text::splitLines(outcome.stderr_text))
    if (!text::trim(line).empty()) last = text::trim(line);
  return describe(outcome) + (last.empty() ? "" : ": " + last);
}

}  // namespace

std::optional<std::string> memoryLimitStopsStart(const CaseConfig& config, const std::string& trial_binary,
                                                 const fs::path& scratch) {
  if (config.memory_limit_bytes == 0) return std::nullopt;
  const auto argv = startCommand(config, trial_binary);
  if (!argv) return std::nullopt;
  fs::create_directories(scratch);
  TrialSpec spec;
  spec.argv = *argv;
  spec.work_dir = scratch;
  spec.fresh_process = true;
  spec.timeout = config.timeout;
  spec.env_set = config.command ? config.command->env : std::map<std::string, std::string>{};
  LocalExecutor plain;
  spec.address_space_limit_bytes = config.memory_limit_bytes;
  const TrialOutcome limited = plain.run(spec);
  spec.address_space_limit_bytes = 0;
  const TrialOutcome free = plain.run(spec);
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  if (limited.end == free.end && limited.exit_code == free.exit_code && limited.signal == free.signal)
    return std::nullopt;
  std::string program;
  for (const std::string& arg : *argv)
    program += (program.empty() ? "" : " ") + (arg.find(' ') == std::string::npos ? arg : "'" + arg + "'");
  return "trial.memory_limit_mb " + std::to_string(config.memory_limit_bytes >> 20) +
         " is too low for a trial to start: `" + program + "` ends with " + howItEnded(limited) +
         " under it and with " + describe(free) +
         " without it. Raise memory_limit_mb (it limits the address "
         "space, which LibTorch's libraries alone take hundreds of MB of) or remove it";
}

}  // namespace minrepro
