#include "engine/oracle.h"

#include <iomanip>
#include <sstream>

#include "harness/trial_main.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string substitutePlaceholders(std::string arg, const fs::path& batch, const fs::path& work_dir,
                                   const fs::path& case_dir) {
  const std::pair<std::string, std::string> subs[] = {
      {"{batch}", batch.string()}, {"{workdir}", work_dir.string()}, {"{case_dir}", case_dir.string()}};
  for (const auto& [key, value] : subs) {
    for (auto pos = arg.find(key); pos != std::string::npos; pos = arg.find(key, pos + value.size()))
      arg.replace(pos, key.size(), value);
  }
  return arg;
}

TrialOracle::TrialOracle(const CaseConfig& config, const BatchStore& batch, Executor& executor,
                         std::string trial_binary, Log& log)
    : config_(config), batch_(batch), executor_(executor), trial_binary_(std::move(trial_binary)), log_(log) {}

fs::path TrialOracle::trialDir(std::size_t number) const {
  std::ostringstream name;
  name << "trial-" << std::setw(6) << std::setfill('0') << number;
  return config_.work_dir / "trials" / name.str();
}

std::vector<std::string> TrialOracle::trialArgv(const fs::path& batch, const fs::path& trial_dir) const {
  if (config_.harness) return harnessArgv(trial_binary_, *config_.harness, batch.string());
  std::vector<std::string> argv;
  for (const auto& arg : config_.command->argv)
    argv.push_back(substitutePlaceholders(arg, batch, trial_dir, config_.base_dir));
  return argv;
}

TrialRecord TrialOracle::run(const Selection& selection) {
  TrialRecord record;
  record.number = ++stats_.trials;
  const fs::path dir = trialDir(record.number);
  fs::create_directories(dir);
  const fs::path batch_file = dir / "batch.pt";
  batch_.writeSubset(selection.samples, batch_file);

  TrialSpec spec;
  spec.argv = trialArgv(batch_file, dir);
  if (config_.command) spec.env_set = config_.command->env;
  spec.work_dir = dir;
  spec.timeout = config_.timeout;
  spec.address_space_limit_bytes = config_.memory_limit_bytes;
  record.outcome = executor_.run(spec);
  record.signature = classify(record.outcome);

  std::error_code ec;
  fs::remove_all(dir, ec);  // the trial's files are in the record; keep the disk clean overnight
  return record;
}

bool TrialOracle::interesting(const Selection& selection) {
  TrialRecord record = run(selection);
  // A trial that cannot start says nothing about the candidate: stop rather
  // than count it as a pass and keep samples for the wrong reason.
  if (record.outcome.end == TrialEnd::FailedToStart)
    throw TrialStartError("trial " + std::to_string(record.number) + " could not start: " + record.outcome.start_error);
  const SignatureMatch match = matchSignature(reference_, record.signature, config_.expected);
  const std::string what = std::to_string(selection.samples.size()) + " samples: ";
  switch (record.signature.family) {
    case FailureFamily::None: ++stats_.passed; break;
    case FailureFamily::Timeout: ++stats_.timeouts; break;
    default: break;
  }
  if (match.matches) {
    ++stats_.same_failure;
    log_.detail("trial " + std::to_string(record.number) + ": " + what + "fails the same way");
    return true;
  }
  if (record.signature.failed()) {
    ++stats_.different_failure;
    if (stats_.other_bugs[record.signature.summary()]++ == 0)
      log_.info("trial " + std::to_string(record.number) + " found a different failure (kept apart, not accepted): " +
                record.signature.summary());
  }
  log_.detail("trial " + std::to_string(record.number) + ": " + what +
              (record.signature.failed() ? match.why_not : std::string("passes")));
  return false;
}

}  // namespace minrepro
