#include "engine/archive/minimal_batch_contrast.h"

#include "engine/format_list.h"

#include <optional>
#include <sstream>

namespace minrepro {

namespace {

// The report's list format, shorter here.
std::string listOf(const std::vector<std::int64_t>& values, std::size_t max_items = 16) {
  return formatList(values, max_items);
}

// A tensor of several values per sample (token ids): the values only the kept
// samples hold, against the range the other samples span. Listing every
// kept value would bury the one that matters.
std::optional<std::string> describeRows(std::int64_t original, const std::set<std::int64_t>& kept,
                                        const SampleValues& t) {
  const bool ragged = !t.owner.empty();
  if (ragged ? t.owner.size() != t.values.size() : t.values.size() != static_cast<std::size_t>(original) * t.row)
    return std::nullopt;
  std::set<std::int64_t> kept_distinct, rest;
  for (std::size_t i = 0; i < t.values.size(); ++i)
    (kept.count(ragged ? t.owner[i] : static_cast<std::int64_t>(i / t.row)) ? kept_distinct : rest).insert(t.values[i]);
  std::set<std::int64_t> only_kept;
  for (auto v : kept_distinct)
    if (!rest.count(v)) only_kept.insert(v);
  const std::int64_t others = original - static_cast<std::int64_t>(kept.size());
  std::string line = "`" + t.name + "` (" +
                     (ragged ? std::string("in each sample's entry") : std::to_string(t.row) + " values per sample") +
                     "): ";
  if (others == 0 || rest.empty()) return line + "kept values " + formatValueSet(kept_distinct);
  const std::string range = std::to_string(*rest.begin()) + ".." + std::to_string(*rest.rbegin());
  std::set<std::int64_t> outside, inside;
  for (auto v : only_kept) (v < *rest.begin() || v > *rest.rbegin() ? outside : inside).insert(v);
  if (!outside.empty())
    line += "the kept samples hold " + formatValueSet(outside) + ", outside the range " + range + " that the other " +
            std::to_string(others) + " samples span";
  else
    line +=
        "no kept value is outside the range " + range + " that the other " + std::to_string(others) + " samples span";
  if (!inside.empty()) line += "; within it, only the kept samples hold " + formatValueSet(inside);
  return line;
}

}  // namespace

std::string formatValueSet(const std::set<std::int64_t>& values, std::size_t max_items) {
  if (values.empty()) return "none";
  std::vector<std::string> items;
  for (auto it = values.begin(); it != values.end();) {
    const std::int64_t first = *it;
    std::int64_t last = first;
    for (++it; it != values.end() && *it == last + 1; ++it) last = *it;
    items.push_back(first == last       ? std::to_string(first)
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
    if (t.row > 1 || !t.owner.empty()) {
      if (auto line = describeRows(original, kept_set, t)) lines.push_back(*line);
      continue;
    }
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
    // A value the others do not hold sets the kept samples apart when the
    // others hold few values (camera ids, classes); where they spread over
    // many (lengths), one inside their range is chance (22 among 21 and 23).
    constexpr std::size_t kSpread = 8;
    const bool spread = rest.size() >= kSpread;
    std::set<std::int64_t> only_kept;
    for (auto v : kept_distinct)
      if (!rest.count(v) && !(spread && *rest.begin() < v && v < *rest.rbegin())) only_kept.insert(v);
    std::string line = "`" + t.name + "`: kept values " + listOf(kept_values) + "; values seen in the other " +
                       std::to_string(others) + " samples: " + formatValueSet(rest);
    if (!only_kept.empty() && others > 0) line += " (" + formatValueSet(only_kept) + " only in the kept samples)";
    lines.push_back(line);
  }
  // A last incomplete batch holds the original's last samples.
  const std::int64_t n = static_cast<std::int64_t>(kept.size());
  bool at_end = n > 0;
  for (std::int64_t i = 0; i < n && at_end; ++i) at_end = kept[static_cast<std::size_t>(i)] == original - n + i;
  if (n == original)  // nothing was removed: the position tells nothing (a new user read "yes" there)
    lines.push_back("Last batch: not told: every sample of the original was kept");
  else if (at_end)
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
  // Each pass says what it changed (reducers/reducer.h); the samples' own
  // part is describeApart's.
  std::vector<std::string> lines;
  for (const auto& info : reducerRegistry())
    for (auto& line : info.create(view)->describe(minimal, sample_ids)) lines.push_back(std::move(line));
  return lines;
}

}  // namespace minrepro
