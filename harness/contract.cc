#include "harness/contract.h"

#include <ATen/ATen.h>

#include <sstream>

#include "core/case_config.h"
#include "harness/contract_tensors.h"

namespace minrepro {
namespace {

std::string shapeText(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

std::string rangeText(const TargetContract& c) { return "[0, " + std::to_string(c.classes) + ")"; }

const at::Tensor& requireTensor(const NamedTensors& batch, const std::string& name, const std::string& batch_name,
                                const std::string& role) {
  const at::Tensor* t = batch.find(name);
  if (t != nullptr) return *t;
  std::string names;
  for (const auto& n : batch.names) names += (names.empty() ? "" : ", ") + n;
  throw BadInputError(batch_name + ": no tensor named '" + name + "' (the " + role + "); the batch has: " + names);
}

// Per-sample ids from the ids tensor, or 0..n-1.
std::vector<std::int64_t> sampleIds(const NamedTensors& batch, const TargetContract& c, std::int64_t n,
                                    const std::string& batch_name) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
  if (c.ids.empty()) return ids;
  const at::Tensor& t = requireTensor(batch, c.ids, batch_name, "sample ids given with --ids");
  if (t.dim() != 1 || !at::isIntegralType(t.scalar_type(), false) || t.size(0) != n)
    throw BadInputError(batch_name + ": ids tensor '" + c.ids +
                        "' must be a 1-D integer tensor with one id per target (" + std::to_string(n) + "), found " +
                        dtypeName(t.scalar_type()) + " of shape " + shapeText(t));
  const at::Tensor values = t.to(at::kLong).contiguous();
  const std::int64_t* data = values.data_ptr<std::int64_t>();
  ids.assign(data, data + n);
  return ids;
}

// The dtype and shape half of the contract; false when values cannot be read
// as class indices. Targets are one class per sample ([samples]) or one per
// position ([samples, d1, ...]: token tags, segmentation maps), as
// cross_entropy and nll_loss take them.
bool checkForm(const at::Tensor& t, const TargetContract& c, ContractResult& r) {
  const bool floating = at::isFloatingType(t.scalar_type());
  if (floating && t.dim() == 2)
    r.violations.push_back("'" + c.target + "' is " + dtypeName(t.scalar_type()) + " of shape " + shapeText(t) +
                           ": that looks like class probabilities, a different contract; class indices are int64, "
                           "one per sample (or one per position: [samples, ...])");
  else if (t.dim() == 0)
    r.violations.push_back("'" + c.target +
                           "' is a scalar: expected one class index per sample (a 1-D vector) or "
                           "per position ([samples, ...])");
  else if (t.scalar_type() != at::kLong)
    r.violations.push_back("'" + c.target + "' is " + dtypeName(t.scalar_type()) +
                           ": expected int64 (torch.long) class indices; convert where the targets are made");
  return t.dim() >= 1 && at::isIntegralType(t.scalar_type(), false);
}

void checkValues(const at::Tensor& t, const std::vector<std::int64_t>& ids, const TargetContract& c,
                 ContractResult& r) {
  const at::Tensor values = t.to(at::kLong).contiguous();
  const std::int64_t* data = values.data_ptr<std::int64_t>();
  r.targets = values.numel();
  const std::int64_t per_sample = r.samples == 0 ? 0 : r.targets / r.samples;
  for (std::int64_t i = 0; i < r.targets; ++i) {
    const std::int64_t v = data[i];
    if (v == c.ignore_index)
      ++r.ignored;
    else if (v >= 0 && v < c.classes)
      ++r.usable;
    else {
      const std::int64_t sample = i / per_sample;
      r.offenders.push_back({sample, ids[static_cast<std::size_t>(sample)], v, t.dim() == 1 ? -1 : i % per_sample});
    }
  }
  if (!r.offenders.empty())
    r.violations.push_back(std::to_string(r.offenders.size()) + " target(s) outside " + rangeText(c) +
                           " that are not ignore_index (" + std::to_string(c.ignore_index) + ")");
}

}  // namespace

ContractResult checkClassTargets(const NamedTensors& batch, const TargetContract& c, const std::string& batch_name) {
  if (c.classes < 1)
    throw BadInputError(batch_name + ": the number of classes must be at least 1, found " + std::to_string(c.classes));
  const at::Tensor& t = requireTensor(batch, c.target, batch_name, "targets");
  ContractResult r;
  r.samples = t.dim() == 0 ? 1 : t.size(0);
  if (const std::string what = samplesPastTheirData(r.samples, batch); !what.empty())
    throw BadInputError(batch_name + ": " + what);
  if (checkForm(t, c, r))
    checkValues(t, sampleIds(batch, c, r.samples, batch_name), c, r);
  else
    return r;
  // Empty or all ignored: the mean loss divides by zero targets (NaN).
  if (r.usable == 0 && r.offenders.empty())
    r.violations.push_back(r.targets == 0
                               ? "no targets at all: the batch is empty"
                               : "no usable target: all " + std::to_string(r.targets) + " are ignore_index (" +
                                     std::to_string(c.ignore_index) + "), so the mean loss is NaN");
  if (c.ignore_index >= 0 && c.ignore_index < c.classes)
    r.notes.push_back("ignore_index " + std::to_string(c.ignore_index) + " is also a class in " + rangeText(c) +
                      ": samples of that class are never learned");
  return r;
}

ContractResult checkClassTargets(const std::filesystem::path& batch, const TargetContract& contract) {
  return checkClassTargets(readBatchFile(batch), contract, batch.string());
}

std::string renderContractResult(const ContractResult& r, const TargetContract& c, const std::string& batch_name) {
  constexpr std::size_t kShown = 50;  // the count says how many more there are
  std::ostringstream out;
  out << batch_name << ": '" << c.target << "' " << (r.ok() ? "satisfies" : "violates")
      << " the class-index target contract (" << c.classes << " classes, valid " << rangeText(c) << ", ignore_index "
      << c.ignore_index << ")\n";
  for (const auto& v : r.violations) out << "  violation: " << v << "\n";
  if (!r.offenders.empty()) {
    out << "offending samples (" << (c.ids.empty() ? "batch index" : "id from '" + c.ids + "'") << ": target):\n";
    for (std::size_t i = 0; i < r.offenders.size() && i < kShown; ++i)
      out << "  sample " << r.offenders[i].id << " (index " << r.offenders[i].index
          << (r.offenders[i].position < 0 ? "" : ", position " + std::to_string(r.offenders[i].position))
          << "): " << r.offenders[i].value << "\n";
    if (r.offenders.size() > kShown) out << "  ... " << r.offenders.size() - kShown << " more\n";
  }
  for (const auto& n : r.notes) out << "  note: " << n << "\n";
  if (r.targets > 0 && r.usable + r.ignored + static_cast<std::int64_t>(r.offenders.size()) == r.targets)
    out << "checked " << r.targets << " targets of " << r.samples << " samples: " << r.usable << " usable, "
        << r.ignored << " ignored, " << r.offenders.size() << " out of range\n";
  return out.str();
}

}  // namespace minrepro
