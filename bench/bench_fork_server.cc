// Per-trial wall time with and without the fork servers, measured side by
// side (alternating, so a loaded machine slows both alike) on the bundled
// examples; then the fork server's trials back to back, as a shrink runs
// them (no 0.8 s plain process in between to evict the caches); and the
// end-to-end shrink of class4 with and without.
//
//   bench_fork_server [--trials N] [--no-e2e]
//
// Exits non-zero when a fork-server trial fails differently from its plain
// twin, or when the two shrinks do not give the same result.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/case_config.h"
#include "core/failure_signature.h"
#include "engine/executors/fork_server.h"
#include "engine/oracle.h"
#include "engine/trial_spec.h"
#include "harness/trial_main.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace minrepro;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Series {
  std::vector<double> ms;
  double median() const {
    auto v = ms;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
  double mean() const {
    double sum = 0;
    for (double x : ms) sum += x;
    return ms.empty() ? 0 : sum / static_cast<double>(ms.size());
  }
};

// One trial of a case on its full batch, as the oracle would build it.
TrialSpec fullBatchTrial(const CaseConfig& c, const fs::path& dir) {
  TrialSpec spec;
  spec.work_dir = dir;
  if (c.harness)
    spec.argv = harnessArgv(MINREPRO_TRIAL_BINARY_PATH, *c.harness, c.batch.string());
  else
    for (const auto& a : c.command->argv) spec.argv.push_back(substitutePlaceholders(a, c.batch, dir, c.base_dir));
  if (c.command) spec.env_set = c.command->env;
  spec.timeout = c.timeout;
  return spec;
}

struct Row {
  std::string name;
  Series plain, forked, unready;            // alternating
  Series consecutive, unready_consecutive;  // back to back
  double server_start_ms = 0;
  bool same = true;
};

// Times one trial and checks its signature against the reference.
double timed(Executor& executor, const TrialSpec& spec, const std::string& reference, bool& same) {
  const auto start = Clock::now();
  const FailureSignature s = classify(executor.run(spec));
  const double ms = msSince(start);
  same = same && s.summary() == reference;
  return ms;
}

// Plain processes, fork servers as a shrink uses them (each trial in the
// standby child forked during the one before) and fork servers that fork
// each child on demand (--no-standby), alternating.
Row measure(const std::string& name, const CaseConfig& c, const fs::path& dir, int trials) {
  Row row;
  row.name = name;
  LocalExecutor local;
  ForkServerOptions no_standby;
  no_standby.standby = false;
  ForkServerExecutor forked(trialForkRouter(MINREPRO_TRIAL_BINARY_PATH, c.preload), local);
  ForkServerExecutor unready(trialForkRouter(MINREPRO_TRIAL_BINARY_PATH, c.preload), local, no_standby);
  const TrialSpec spec = fullBatchTrial(c, dir);
  auto start = Clock::now();
  const std::string reference = classify(forked.run(spec)).summary();  // starts the server
  row.server_start_ms = msSince(start);
  classify(unready.run(spec));
  for (int i = 0; i < trials; ++i) {
    row.plain.ms.push_back(timed(local, spec, reference, row.same));
    row.forked.ms.push_back(timed(forked, spec, reference, row.same));
    row.unready.ms.push_back(timed(unready, spec, reference, row.same));
  }
  for (int i = 0; i < trials; ++i) row.consecutive.ms.push_back(timed(forked, spec, reference, row.same));
  for (int i = 0; i < trials; ++i) row.unready_consecutive.ms.push_back(timed(unready, spec, reference, row.same));
  // Both must really have used their servers, each trial of the first its standby.
  if (forked.counts().plain != 0 || unready.counts().plain != 0) row.same = false;
  if (forked.counts().from_standby != forked.counts().forked || unready.counts().from_standby != 0) row.same = false;
  std::printf("%-28s signature: %s\n", name.c_str(), reference.c_str());
  return row;
}

struct Shrink {
  double seconds = 0;
  std::string result;  // the "reduced ..." line, minus the archive path
};

Shrink shrinkOnce(const fs::path& case_file, const fs::path& work) {
  std::string output;
  const auto start = Clock::now();
  const int status =
      testing::runCommand(std::string(MINREPRO_BINARY_PATH) + " shrink --quiet --config " + case_file.string() +
                              " --output " + (work / "out.tar.gz").string() + " --work-dir " + work.string(),
                          &output);
  Shrink s{msSince(start) / 1000, "exit " + std::to_string(status)};
  std::ifstream log(work / "minrepro.log");
  for (std::string line; std::getline(log, line);)
    if (line.find("reduced ") != std::string::npos)
      s.result = line.substr(line.find("reduced "), line.find("; archive") - line.find("reduced "));
  return s;
}

bool e2e(const fs::path& examples, const fs::path& scratch) {
  const fs::path plain_case = examples / "class4" / "case-plain.yaml";
  std::ifstream in(examples / "class4" / "case.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  yaml.replace(yaml.find("  timeout: 60\n"), 14, "  timeout: 60\n  fork_server: false\n");
  testing::writeFile(plain_case, yaml);
  const Shrink plain = shrinkOnce(plain_case, scratch / "e2e-plain");
  const Shrink forked = shrinkOnce(examples / "class4" / "case.yaml", scratch / "e2e-forked");
  std::printf("\n## End-to-end shrink of class4\n\n| executor | seconds | result |\n|---|---|---|\n");
  std::printf("| plain processes | %.1f | %s |\n| fork server | %.1f | %s |\n", plain.seconds, plain.result.c_str(),
              forked.seconds, forked.result.c_str());
  std::printf("\nratio: %.1fx faster; identical results: %s\n", plain.seconds / forked.seconds,
              plain.result == forked.result ? "yes" : "NO");
  return plain.result == forked.result && plain.result.rfind("reduced", 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 10;
  bool run_e2e = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc)
      trials = std::atoi(argv[++i]);
    else if (a == "--no-e2e")
      run_e2e = false;
  }
  testing::TempDir scratch("minrepro-bench-fork");
  const fs::path examples = scratch.path() / "examples";
  if (testing::runCommand(testing::python() + " " MINREPRO_SOURCE_DIR "/configs/examples/make_examples.py " +
                          examples.string()) != 0) {
    std::fprintf(stderr, "cannot generate the examples\n");
    return 1;
  }
  std::vector<Row> rows;
  for (const char* name : {"class4", "pair", "command"}) {
    const CaseConfig c = loadCase(examples / name / "case.yaml");
    const fs::path dir = scratch.path() / (std::string("trial-") + name);
    fs::create_directories(dir);
    rows.push_back(measure(std::string(name) + (c.harness ? " (harness)" : " (python)"), c, dir, trials));
  }
  bool ok = true;
  std::printf("\n## Per-trial wall time (median ms), %d trials each\n\n", trials);
  std::printf(
      "| example | plain | fork server | speed-up | without standby | fork server, back to back | "
      "without standby, back to back | server start ms | same signatures |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %.0f | %.1f | %.0fx | %.1f | %.1f | %.1f | %.0f | %s |\n", r.name.c_str(), r.plain.median(),
                r.forked.median(), r.plain.median() / r.forked.median(), r.unready.median(), r.consecutive.median(),
                r.unready_consecutive.median(), r.server_start_ms, r.same ? "yes" : "NO");
    ok = ok && r.same;
  }
  std::printf("\n(plain, fork server and without standby alternate; means: ");
  for (const Row& r : rows)
    std::printf("%s %.0f / %.1f / %.1f; ", r.name.c_str(), r.plain.mean(), r.forked.mean(), r.unready.mean());
  std::printf(")\n");
  if (run_e2e) ok = e2e(examples, scratch.path()) && ok;
  return ok ? 0 : 1;
}
