// The sample search on the standard list-minimization problems of
// docs/list-problems.md. Trial counts are exact and deterministic:
// they are reported as counters and checked against the goals (the run
// fails if a result is wrong or a count exceeds its goal); the time is the
// search's own overhead, trials cost nothing here.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/delta.h"
#include "tests/list_problems.h"

namespace {

using minrepro::testing::ListOracle;
using minrepro::testing::listProblems;

struct Goal {
  std::size_t best_public;  // best public reducer, docs/list-problems.md
  double bound;             // information-theoretic bound incl. the full-input check
  std::size_t goal;         // 1.25 x bound
};

const std::map<std::string, Goal> kGoals{
    {"a", {14, 10, 14}}, {"b", {41, 19, 25}}, {"c", {18, 12, 16}}, {"d", {136, 65, 82}}, {"e", {37, 18, 30}}};

std::size_t solve(const std::string& name, bool* correct) {
  ListOracle oracle(listProblems().at(name));
  const std::size_t n = oracle.problem().n;
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  oracle(all);  // the check of the full input counts as a trial
  const auto result = minrepro::minimizeUnits(n, [&](const auto& keep) { return oracle(keep); });
  *correct = oracle.problem().isExpected(result);
  return oracle.calls();
}

bool g_failed = false;

void BM_SampleSearch(benchmark::State& state, std::string name) {
  std::size_t trials = 0;
  bool correct = false;
  for (auto _ : state) trials = solve(name, &correct);
  const Goal& goal = kGoals.at(name);
  state.counters["trials"] = static_cast<double>(trials);
  state.counters["goal"] = static_cast<double>(goal.goal);
  state.counters["best_public"] = static_cast<double>(goal.best_public);
  state.counters["correct"] = correct ? 1 : 0;
  if (!correct || trials > goal.goal || trials >= goal.best_public) {
    g_failed = true;
    state.SkipWithError("wrong result or over the trial goal");
  }
}

// Goal: exactly {737} on at least 99 of 100 seeds, median trials <= 150 at
// a constant rate; at least 99 of 100 when the rate depends on the subset.
bool reportFlaky() {
  bool ok = true;
  std::printf("\n%-8s %8s %8s %8s %8s   (seeds 1..100, alpha %.3g)\n", "problem", "correct", "median", "max", "mean",
              minrepro::FlakyOptions{}.alpha);
  for (const std::string name : {"f", "fv", "fr", "ff"}) {
    std::vector<std::size_t> counts;
    std::size_t correct = 0;
    for (std::uint64_t seed = 1; seed <= 100; ++seed) {
      std::size_t trials = 0;
      correct += minrepro::testing::solveFlaky(name, seed, &trials) == std::vector<std::size_t>{737} ? 1 : 0;
      counts.push_back(trials);
    }
    std::sort(counts.begin(), counts.end());
    const double median = (static_cast<double>(counts[49]) + static_cast<double>(counts[50])) / 2;
    double mean = 0;
    for (auto c : counts) mean += static_cast<double>(c) / 100.0;
    std::printf("%-8s %7zu%% %8.1f %8zu %8.1f\n", name.c_str(), correct, median, counts.back(), mean);
    ok &= correct >= 99 && (name == "fr" || name == "ff" || median <= 150);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  for (const auto& [name, goal] : kGoals)
    benchmark::RegisterBenchmark(("SampleSearch/" + name).c_str(), BM_SampleSearch, name);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf("\n%-8s %8s %8s %12s %8s\n", "problem", "trials", "goal", "best public", "bound");
  for (const auto& [name, goal] : kGoals) {
    bool correct = false;
    const std::size_t trials = solve(name, &correct);
    std::printf("%-8s %8zu %8zu %12zu %8.0f %s\n", name.c_str(), trials, goal.goal, goal.best_public, goal.bound,
                correct ? "" : "WRONG RESULT");
  }
  std::printf("\n%-8s %8s %8s %8s   (the default failure-rate model: flakiness handling on)\n", "problem", "trials",
              "goal", "ratio");
  for (const auto& [name, goal] : kGoals) {
    bool correct = false;
    const std::size_t deterministic = solve(name, &correct);
    std::size_t trials = 0;
    const auto result = minrepro::testing::solveWithDefaultModel(name, &trials);
    correct = listProblems().at(name).isExpected(result);
    const double ratio = static_cast<double>(trials) / static_cast<double>(deterministic);
    std::printf("%-8s %8zu %8.0f %8.2f %s\n", name.c_str(), trials, 1.25 * static_cast<double>(deterministic), ratio,
                correct ? "" : "WRONG RESULT");
    g_failed |= !correct || ratio > 1.25;
  }
  g_failed |= !reportFlaky();
  return g_failed ? 1 : 0;
}
