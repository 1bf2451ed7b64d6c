// executor: {partition, gres, time, account, extra_args, retries}: passed to
// sbatch as given (engine/executors/slurm_executor.h), checked here for the
// forms Slurm accepts so that a typo is found before any job is submitted.
#include <algorithm>
#include <regex>

#include "core/executor_keys/executor_keys.h"

namespace minrepro {

namespace {

using namespace case_yaml;

// extra_args: sbatch options, except those the Slurm executor sets itself
// (its files and the job's directory are how outcomes come back).
std::vector<std::string> readSbatchArgs(const Loader& l, const Value& v) {
  std::vector<std::string> args = stringList(l, v, "sbatch options (e.g. [\"--qos=debug\"])");
  static const std::vector<std::string> kOwn{"--output",   "--error",     "--chdir",    "--wrap", "--array",
                                             "--parsable", "--test-only", "--job-name", "-o",     "-e",
                                             "-D",         "-J",          "-a"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = args[i].substr(0, args[i].find('='));
    if (args[i].empty() || args[i][0] != '-')
      fail(l, itemOf(v, i), "an sbatch option starting with '-'", inQuotes(args[i]), "write e.g. --qos=debug");
    if (std::find(kOwn.begin(), kOwn.end(), name) != kOwn.end())
      fail(l, itemOf(v, i), "an option minrepro does not set itself", inQuotes(args[i]),
           "remove it: each trial's job gets its own name, directory and output files");
  }
  return args;
}

std::string readTime(const Loader& l, const Value& v) {
  static const std::regex kTime(R"((\d+-)?\d+(:\d+){0,2}|UNLIMITED|INFINITE)");
  std::string time = nonEmpty(l, v, "a Slurm time limit");
  if (!std::regex_match(time, kTime))
    fail(l, v, "a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)", inQuotes(time));
  return time;
}

void readSlurmKeys(const Loader& l, const MapView& m, ExecutorConfig& e) {
  SlurmOptions& s = e.slurm;
  if (const Value* x = m.find("partition")) s.partition = nonEmpty(l, *x, "a Slurm partition name");
  if (const Value* x = m.find("gres")) s.gres = nonEmpty(l, *x, "a Slurm gres request (e.g. gpu:1)");
  if (const Value* x = m.find("account")) s.account = nonEmpty(l, *x, "a Slurm account name");
  if (const Value* x = m.find("time")) s.time = readTime(l, *x);
  if (const Value* x = m.find("extra_args")) s.extra_args = readSbatchArgs(l, *x);
  if (const Value* x = m.find("retries"))
    s.retries = static_cast<std::size_t>(integer(l, *x, "an integer from 0 to 100", 0, 100));
}

}  // namespace

const ExecutorKeys& slurmExecutorKeys() {
  static const ExecutorKeys keys{{"partition", "gres", "time", "account", "extra_args", "retries"}, readSlurmKeys};
  return keys;
}

}  // namespace minrepro
