// The secret rules' cost on what the archive checks (engine/archive/secrets.h):
// a bundled text file of up to 2 MiB is read line by line by findSecrets,
// and every text the archive writes goes through scrubSecrets. Code and
// prose hold no secret on most lines, which the rules' cheap prefilter
// skips; lines that do hold one (or look as if they might) run every rule.
#include <benchmark/benchmark.h>

#include <string>

#include "engine/archive/secrets.h"

namespace {

// About 2 MiB of lines as a training script has them.
std::string codeText() {
  std::string text;
  for (std::size_t i = 0; text.size() < (std::size_t{2} << 20); ++i)
    text += "    x = model.layer_" + std::to_string(i % 977) + "(inputs, mask=attention_mask)  # shape [B, T, H]\n";
  return text;
}

// Lines each of which names a secret (keyed values, tokens, URLs).
std::string secretText(std::size_t lines) {
  std::string text;
  for (std::size_t i = 0; i < lines; ++i)
    text += "retry " + std::to_string(i) + ": password=Hunter2x" + std::to_string(i) + " https://bob:pw" +
            std::to_string(i) + "@db.example.com token ghp_abcdefghijklmnopqrstuvwxyz0123456789\n";
  return text;
}

void BM_FindSecretsIn2MiBOfCode(benchmark::State& state) {
  const std::string text = codeText();
  for (auto _ : state) benchmark::DoNotOptimize(minrepro::findSecrets(text, "step.py"));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_FindSecretsIn2MiBOfCode)->Unit(benchmark::kMillisecond);

void BM_ScrubLinesThatHoldSecrets(benchmark::State& state) {
  const std::string text = secretText(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(minrepro::scrubSecrets(text));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ScrubLinesThatHoldSecrets)->Arg(100)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
