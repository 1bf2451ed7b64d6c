// Per-trial overhead of the Slurm executor against the local one, measured
// in one run on the same trial (`/bin/true`: the trial's own work is ~1 ms,
// so what is measured is the executor). Sequential (one trial at a time, as
// --jobs 1) and 4 at once (as --jobs 4). Needs a reachable cluster
// (scripts/slurm-up.sh). Usage: bench_slurm [TRIALS] (default 20).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine/executors/slurm_executor.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Timing {
  double median_ms = 0, mean_ms = 0;
};

Timing summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size())};
}

minrepro::TrialSpec trueSpec(const fs::path& dir) {
  minrepro::TrialSpec spec;
  spec.argv = {"/bin/true"};
  spec.work_dir = dir;
  fs::create_directories(dir);
  return spec;
}

// Each trial's wall time, one after another.
Timing sequential(minrepro::Executor& executor, const fs::path& root, int trials) {
  std::vector<double> ms;
  for (int i = 0; i < trials; ++i) {
    const auto start = Clock::now();
    const minrepro::TrialOutcome o = executor.run(trueSpec(root / ("s" + std::to_string(i))));
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!o.passed()) std::fprintf(stderr, "trial %d: %s\n", i, minrepro::describe(o).c_str());
  }
  return summarize(ms);
}

// Wall time per trial with `width` trials in flight at once.
double parallel(minrepro::Executor& executor, const fs::path& root, int trials, int width) {
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < width; ++w)
    threads.emplace_back([&, w] {
      for (int i = w; i < trials; i += width) executor.run(trueSpec(root / ("p" + std::to_string(i))));
    });
  for (auto& t : threads) t.join();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / trials;
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 20;
  const fs::path root = fs::temp_directory_path() / ("bench-slurm-" + std::to_string(::getpid()));
  minrepro::LocalExecutor local;
  minrepro::SlurmExecutorOptions options;
  options.job_binary = MINREPRO_SLURM_JOB_BINARY_PATH;
  minrepro::SlurmExecutor slurm(options);
  slurm.preflight(root / "preflight");
  const Timing l = sequential(local, root / "local", trials), s = sequential(slurm, root / "slurm", trials);
  const double lp = parallel(local, root / "local", trials, 4), sp = parallel(slurm, root / "slurm", trials, 4);
  std::printf("per-trial wall time, %d trials of /bin/true\n", trials);
  std::printf("  one at a time: local median %7.1f ms mean %7.1f | slurm median %7.1f ms mean %7.1f | ratio %.0fx\n",
              l.median_ms, l.mean_ms, s.median_ms, s.mean_ms, s.median_ms / l.median_ms);
  std::printf("  4 at once:     local %7.1f ms/trial | slurm %7.1f ms/trial | ratio %.0fx\n", lp, sp, sp / lp);
  std::printf("  slurm overhead per trial (median, one at a time): %.0f ms\n", s.median_ms - l.median_ms);
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
