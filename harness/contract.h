// Contract checks on a batch before it reaches the loss (docs/method.md, "Target contracts"): the
// class-index target contract of cross_entropy / nll_loss. LibTorch-free, so
// the engine and the CLI can use it; harness/contract_tensors.h has the
// variant for tensors already in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace minrepro {

struct TargetContract {
  std::string target;                // batch key of the class-index targets
  std::int64_t classes = 0;          // valid classes are [0, classes)
  std::int64_t ignore_index = -100;  // targets equal to it are skipped by the loss
  std::string ids;                   // optional batch key of per-sample ids; empty: sample index
};

struct OffendingSample {
  std::int64_t index = 0;      // position in the batch
  std::int64_t id = 0;         // the ids tensor's value, or the index
  std::int64_t value = 0;      // the target found
  std::int64_t position = -1;  // within the sample, row-major, for per-position targets; -1 for one per sample
};

struct ContractResult {
  std::vector<std::string> violations;                // empty: the contract holds
  std::vector<std::string> notes;                     // worth knowing, not a violation
  std::vector<OffendingSample> offenders;             // targets neither in [0, classes) nor ignore_index
  std::int64_t samples = 0;                           // dimension 0 of the targets
  std::int64_t targets = 0, usable = 0, ignored = 0;  // class indices: one per sample, or per position
  bool ok() const { return violations.empty(); }
};

// Reads the batch and checks contract.target: int64 class indices, one per
// sample ([samples]) or per position ([samples, ...]: token tags), at least
// one that is not ignore_index, every other in [0, classes).
// Bad input (unreadable batch, no such tensor, a bad ids tensor, classes < 1)
// throws BadInputError naming the batch file.
ContractResult checkClassTargets(const std::filesystem::path& batch, const TargetContract& contract);

// What a user reads: the verdict, the violations and the offending sample ids.
std::string renderContractResult(const ContractResult& result, const TargetContract& contract,
                                 const std::string& batch_name);

}  // namespace minrepro
