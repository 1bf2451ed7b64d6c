#include "engine/archive/what_sets_apart.h"

#include "engine/format_list.h"

#include <sstream>

namespace minrepro {

namespace {

// The report's list format, shorter here.
std::string listOf(const std::vector<std::int64_t>& values, std::size_t max_items = 16) {
  return formatList(values, max_items);
}

}  // namespace

std::string formatValueSet(const std::set<std::int64_t>& values, std::size_t max_items) {
  if (values.empty()) return "none";
  std::vector<std::string> items;
  for (auto it = values.begin(); it != values.end();) {
    const std::int64_t first = *it;
    std::int64_t last = first;
    for (++it; it != values.end() && *it == last + 1; ++it) last = *it;
    items.push_back(first == last ? std::to_string(first)
                    : last == first + 1 ? std::to_string(first) + ", " + std::to_string(last)
                                        : std::to_string(first) + ".." + std::to_string(last));
  }
  std::ostringstream out;
  for (std::size_t i = 0; i < items.size() && i < max_items; ++i) out << (i ? ", " : "") << items[i];
  if (items.size() > max_items)
    out << ", ... (" << values.size() << " distinct values in [" << *values.begin() << ", " << *values.rbegin() << "])";
  return out.str();
}

std::vector<std::string> describeApart(std::int64_t original, const std::vector<std::int64_t>& kept,
                                       const std::vector<std::int64_t>& kept_ids,
                                       const std::vector<SampleValues>& tensors) {
  std::vector<std::string> lines;
  const std::set<std::int64_t> kept_set(kept.begin(), kept.end());
  const std::int64_t others = original - static_cast<std::int64_t>(kept_set.size());
  for (const auto& t : tensors) {
    if (static_cast<std::int64_t>(t.values.size()) != original) continue;
    std::vector<std::int64_t> kept_values;
    std::set<std::int64_t> kept_distinct, rest;
    for (std::int64_t i = 0; i < original; ++i) {
      const std::int64_t v = t.values[static_cast<std::size_t>(i)];
      if (kept_set.count(i)) {
        kept_values.push_back(v);
        kept_distinct.insert(v);
      } else {
        rest.insert(v);
      }
    }
    std::set<std::int64_t> only_kept;
    for (auto v : kept_distinct)
      if (!rest.count(v)) only_kept.insert(v);
    std::string line = "`" + t.name + "`: kept values " + listOf(kept_values) + "; values seen in the other " +
                       std::to_string(others) + " samples: " + formatValueSet(rest);
    if (!only_kept.empty() && others > 0) line += " (" + formatValueSet(only_kept) + " only in the kept samples)";
    lines.push_back(line);
  }
  // A last incomplete batch holds the original's last samples.
  const std::int64_t n = static_cast<std::int64_t>(kept.size());
  bool at_end = n > 0;
  for (std::int64_t i = 0; i < n && at_end; ++i) at_end = kept[static_cast<std::size_t>(i)] == original - n + i;
  if (at_end)
    lines.push_back("Last batch: yes: the kept samples are the original's last " + std::to_string(n) +
                    " (what a last incomplete batch of this size would hold)");
  else
    lines.push_back("Last batch: no: the kept samples are at positions " + listOf(kept) + " of 0.." +
                    std::to_string(original - 1) + " in the original, not its last " + std::to_string(n));
  lines.push_back("Sample ids: " + listOf(kept_ids, 32));
  return lines;
}

std::vector<std::string> describeReduction(const CaseView& view, const Selection& minimal,
                                           const std::vector<std::int64_t>& sample_ids) {
  std::vector<std::string> lines;
  if (const std::int64_t length = view.sequenceLength(); length > 0) {
    lines.push_back("Sequence window: positions " + std::to_string(minimal.seq_begin) + ".." +
                    std::to_string(minimal.seq_end) + " of " + std::to_string(length) + " (length " +
                    std::to_string(minimal.seq_end - minimal.seq_begin) + ")");
    const std::vector<std::int64_t> original = view.sampleLengths();
    for (const auto& [sample, cut] : minimal.lengths)
      lines.push_back("Sample id " + std::to_string(sample_ids[static_cast<std::size_t>(sample)]) + ": length " +
                      std::to_string(original[static_cast<std::size_t>(sample)]) + " shortened to " +
                      std::to_string(cut - minimal.seq_begin));
  }
  const std::vector<std::string> branches = view.optionalBranches();
  if (!branches.empty()) {
    std::string on, off;
    for (const auto& b : branches) (minimal.branches_off.count(b) ? off : on) += (std::string(", ") + b);
    lines.push_back("Branches needed: " + (on.empty() ? std::string("none") : on.substr(2)) +
                    (off.empty() ? "" : "; switched off without losing the failure: " + off.substr(2)));
  }
  if (!minimal.values_kept.empty())
    lines.push_back("Values: " + std::to_string(view.nonTrivialValues(minimal).size()) +
                    " non-trivial value(s) left; every other value is trivial (floats 0, integers their smallest "
                    "valid value, masks all-ones), dtypes and layouts unchanged");
  return lines;
}

}  // namespace minrepro
