#include "engine/executors/slurm_job.h"

#include <signal.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace minrepro {

namespace {

void putRecord(std::ostream& out, const std::string& key, const std::string& value) {
  out << key << ' ' << value.size() << '\n' << value << '\n';
}

// One record; false at the end of the input. Throws on a truncated record.
bool getRecord(std::istream& in, std::string& key, std::string& value) {
  std::size_t size = 0;
  if (!(in >> key)) return false;
  if (!(in >> size) || in.get() != '\n') throw std::runtime_error("malformed record '" + key + "'");
  value.assign(size, '\0');
  in.read(value.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::size_t>(in.gcount()) != size || in.get() != '\n')
    throw std::runtime_error("truncated record '" + key + "'");
  return true;
}

long long toNumber(const std::string& key, const std::string& value) {
  try {
    return std::stoll(value);
  } catch (const std::exception&) {
    throw std::runtime_error("record '" + key + "' is not a number: '" + value + "'");
  }
}

}  // namespace

void writeTrialSpecFile(const fs::path& file, const TrialSpec& spec) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  for (const auto& arg : spec.argv) putRecord(out, "argv", arg);
  for (const auto& [name, value] : spec.env_set) putRecord(out, "env", name + "=" + value);
  for (const auto& name : spec.env_unset) putRecord(out, "unset", name);
  putRecord(out, "work_dir", spec.work_dir.string());
  putRecord(out, "timeout_ms", std::to_string(spec.timeout.count()));
  putRecord(out, "kill_grace_ms", std::to_string(spec.kill_grace.count()));
  putRecord(out, "address_space", std::to_string(spec.address_space_limit_bytes));
  putRecord(out, "output_cap", std::to_string(spec.output_cap_bytes));
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

TrialSpec readTrialSpecFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  TrialSpec spec;
  std::string key, value;
  while (getRecord(in, key, value)) {
    if (key == "argv")
      spec.argv.push_back(value);
    else if (key == "env") {
      const auto eq = value.find('=');
      spec.env_set[value.substr(0, eq)] = eq == std::string::npos ? "" : value.substr(eq + 1);
    } else if (key == "unset")
      spec.env_unset.push_back(value);
    else if (key == "work_dir")
      spec.work_dir = value;
    else if (key == "timeout_ms")
      spec.timeout = std::chrono::milliseconds(toNumber(key, value));
    else if (key == "kill_grace_ms")
      spec.kill_grace = std::chrono::milliseconds(toNumber(key, value));
    else if (key == "address_space")
      spec.address_space_limit_bytes = static_cast<std::uint64_t>(toNumber(key, value));
    else if (key == "output_cap")
      spec.output_cap_bytes = static_cast<std::size_t>(toNumber(key, value));
    else
      throw std::runtime_error("unknown record '" + key + "'");
  }
  if (spec.argv.empty() || spec.work_dir.empty()) throw std::runtime_error("no argv or work_dir in " + file.string());
  return spec;
}

void writeTrialOutcomeFile(const fs::path& file, const TrialOutcome& outcome) {
  const fs::path partial = file.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    putRecord(out, "end", std::to_string(static_cast<int>(outcome.end)));
    putRecord(out, "exit_code", std::to_string(outcome.exit_code));
    putRecord(out, "signal", std::to_string(outcome.signal));
    putRecord(out, "duration_ms", std::to_string(outcome.duration.count()));
    putRecord(out, "start_error", outcome.start_error);
    putRecord(out, "complete", "1");
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + partial.string());
  }
  fs::rename(partial, file);
}

std::optional<TrialOutcome> readTrialOutcomeFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  TrialOutcome o;
  bool complete = false;
  try {
    std::string key, value;
    while (getRecord(in, key, value)) {
      if (key == "end")
        o.end = static_cast<TrialEnd>(toNumber(key, value));
      else if (key == "exit_code")
        o.exit_code = static_cast<int>(toNumber(key, value));
      else if (key == "signal")
        o.signal = static_cast<int>(toNumber(key, value));
      else if (key == "duration_ms")
        o.duration = std::chrono::milliseconds(toNumber(key, value));
      else if (key == "start_error")
        o.start_error = value;
      else if (key == "complete")
        complete = true;
    }
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
  if (!complete) return std::nullopt;
  return o;
}

namespace {

std::atomic<bool> g_job_cancelled{false};
extern "C" void onJobSignal(int) { g_job_cancelled.store(true); }

}  // namespace

int slurmJobMain(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: minrepro-slurm-job SPEC_FILE (run by minrepro's Slurm executor inside a job)\n";
    return 2;
  }
  TrialSpec spec;
  try {
    spec = readTrialSpecFile(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "minrepro-slurm-job: " << e.what() << "\n";
    return 2;
  }
  // scancel, preemption and node shutdown send SIGTERM: end the trial's
  // whole group (it has its own, outside the job's) and report no outcome.
  struct sigaction sa {};
  sa.sa_handler = onJobSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  spec.cancel = &g_job_cancelled;
  const TrialOutcome outcome = LocalExecutor().run(spec);
  if (g_job_cancelled.load() || outcome.end == TrialEnd::Cancelled) return 143;
  try {
    writeTrialOutcomeFile(fs::path(argv[1]).parent_path() / kSlurmOutcomeFile, outcome);
  } catch (const std::exception& e) {
    std::cerr << "minrepro-slurm-job: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace minrepro
