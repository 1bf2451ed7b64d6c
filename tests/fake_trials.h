// Test doubles for the unit tier: a batch store that writes the kept sample
// indices as text, and an executor that scripts outcomes from them.
#pragma once

#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <sstream>

#include "core/process/process.h"
#include "harness/batch_store.h"

namespace minrepro::testing {

class FakeBatchStore : public BatchStore {
 public:
  // `original`: where the user's batch file is (the original's trials read
  // it as it is); written with every sample.
  FakeBatchStore(std::int64_t n, const std::filesystem::path& original) : n_(n) {
    std::vector<std::int64_t> all;
    for (std::int64_t i = 0; i < n; ++i) all.push_back(i);
    writeSubset(all, original);
  }
  std::int64_t sampleCount() const override { return n_; }
  std::vector<TensorInfo> describe() const override { return {}; }
  std::vector<std::int64_t> sampleIds() const override {
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < n_; ++i) ids.push_back(1000 + i);
    return ids;
  }
  std::vector<std::int64_t> integerValues(const std::string&, std::size_t) const override { return {}; }
  std::vector<double> sampleValues(const std::string&, std::int64_t, std::size_t) const override { return {}; }
  ValueRange restRange(const std::string&, const std::vector<std::int64_t>&, bool) const override { return {}; }
  std::vector<NonFinite> nonFiniteValues(const std::vector<std::int64_t>&) const override { return {}; }
  std::vector<std::pair<std::string, std::string>> sampleEntries(std::int64_t, std::size_t) const override {
    return {};
  }
  void writeSubset(const std::vector<std::int64_t>& keep, const std::filesystem::path& out) const override {
    std::ofstream f(out);
    for (auto k : keep) f << k << "\n";
  }
  std::uint64_t writeCandidate(const Selection& selection, const std::filesystem::path& out) const override {
    writeSubset(selection.samples, out);
    return std::filesystem::file_size(out);
  }
  std::vector<TensorInfo> describeCandidate(const Selection&) const override { return {}; }
  // No sequence axis, no branches, no values: only the samples pass has work.
  std::int64_t sequenceLength() const override { return 0; }
  std::vector<std::int64_t> sampleLengths() const override { return {}; }
  std::int64_t minLength() const override { return 1; }
  std::vector<std::string> optionalBranches() const override { return {}; }
  std::vector<ValueUnit> nonTrivialValues(const Selection&) const override { return {}; }

 private:
  std::int64_t n_;
};

// Reads the fake batch named by the argv element that ends in "batch.pt".
inline std::vector<std::int64_t> keptSamples(const TrialSpec& spec) {
  for (const auto& arg : spec.argv) {
    if (arg.size() >= 8 && arg.compare(arg.size() - 8, 8, "batch.pt") == 0) {
      std::ifstream f(arg);
      return {std::istream_iterator<std::int64_t>(f), {}};
    }
  }
  return {};
}

// Thread safe (trials that run at once take turns), so scripts may count.
class FakeExecutor : public Executor {
 public:
  using Script = std::function<TrialOutcome(const std::vector<std::int64_t>& kept)>;
  explicit FakeExecutor(Script script) : script_(std::move(script)) {}
  TrialOutcome run(const TrialSpec& spec) override {
    std::lock_guard<std::mutex> lock(mutex_);
    specs.push_back(spec);
    std::string bytes;
    for (const auto& arg : spec.argv)
      if (arg.ends_with("batch.pt")) bytes.assign(std::istreambuf_iterator<char>(std::ifstream(arg).rdbuf()), {});
    batches_read.push_back(bytes);
    return script_(keptSamples(spec));
  }
  std::vector<TrialSpec> specs;
  std::vector<std::string> batches_read;  // the batch file each trial was given, as it read it

 private:
  Script script_;
  std::mutex mutex_;
};

inline TrialOutcome exitedWith(int code, const std::string& stderr_text) {
  TrialOutcome o;
  o.end = TrialEnd::Exited;
  o.exit_code = code;
  o.stderr_text = stderr_text;
  return o;
}

inline TrialOutcome indexError(int target) {
  return exitedWith(1,
                    "Traceback (most recent call last):\n  File \"step.py\", line 3, in <module>\n"
                    "IndexError: Target " +
                        std::to_string(target) + " is out of bounds.\n");
}

}  // namespace minrepro::testing
