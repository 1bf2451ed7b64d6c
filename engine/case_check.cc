#include "engine/case_check.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <regex>
#include <set>

#include "core/errors.h"
#include "core/text_lines.h"
#include "engine/log.h"
#include "engine/oracle.h"

namespace minrepro {

namespace {

constexpr std::size_t kSameOtherStreak = 20;
constexpr std::size_t kOnlyOtherTrials = 30;
constexpr double kOnlyOtherSeconds = 60;

std::string shapeText(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

bool hasDimension(const TensorInfo& t, std::int64_t n) {
  return std::find(t.shape.begin(), t.shape.end(), n) != t.shape.end();
}

// Whether `number` stands alone in the message (not part of 640 or 1.64).
bool namesNumber(const std::string& message, std::int64_t number) {
  const std::regex re("(^|[^0-9.])" + std::to_string(number) + "($|[^0-9])");
  return std::regex_search(message, re);
}

// Whether the message names the tensor (its path, or the last part of it) as a word.
bool namesWord(const std::string& message, const std::string& path) {
  const std::string leaf = path.substr(path.find_last_of(".[]") == std::string::npos ? 0 : path.find_last_of(".]") + 1);
  return text::hasWord(message, path) || text::hasWord(message, leaf);
}

std::vector<TensorInfo> keptWhole(const BatchStore& batch) {
  std::vector<TensorInfo> whole;
  for (const TensorInfo& t : batch.describe())
    if (!t.has_sample_axis && !t.in_sample_list) whole.push_back(t);
  std::stable_partition(whole.begin(), whole.end(),
                        [&](const TensorInfo& t) { return hasDimension(t, batch.sampleCount()); });
  return whole;
}

// Two failures the same way: their family, operator and message, the
// numbers aside (each half's sizes differ: "Expected tensor to have size 47
// ... got size 78", then 31 for the other half).
std::string failureShape(const FailureSignature& s) {
  return familyName(s.family) + " " + s.op + ": " + messageShape(s.message);
}

// Whether the message names the batch's size, a tensor kept whole, or the
// first dimension of one ("got size 78 for argument #2 'targets'": joined
// targets kept whole, in a tuple that names nothing).
bool pointsAtTheCase(const std::string& message, const BatchStore& batch) {
  if (namesNumber(message, batch.sampleCount())) return true;
  for (const TensorInfo& t : keptWhole(batch))
    if (namesWord(message, t.name) ||
        (!t.shape.empty() && t.shape.front() > 1 && namesNumber(message, t.shape.front())))
      return true;
  return false;
}

}  // namespace

void checkHarnessKeys(const CaseConfig& config, const BatchStore& batch) {
  if (!config.harness) return;
  std::set<std::string> names;
  for (const auto& t : batch.describe()) names.insert(t.name);
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  const std::pair<const char*, std::string> keys[] = {{"input", config.harness->input},
                                                      {"target", config.harness->target}};
  for (const auto& [key, name] : keys)
    if (!name.empty() && !names.count(name))
      throw BadInputError(config.case_file.string() + ": trial.harness." + key + " names '" + name + "', which " +
                          config.batch.string() + " does not hold (its tensors: " + known + ")");
}

std::string tensorsKeptWhole(const BatchStore& batch) {
  std::string out;
  for (const TensorInfo& t : keptWhole(batch))
    out += (out.empty() ? "" : ", ") + t.name + " " + shapeText(t.shape) + " " + t.dtype;
  return out;
}

std::string wrongCaseMessage(const std::string& what_happened, const FailureSignature& other, const BatchStore& batch) {
  const std::int64_t n = batch.sampleCount();
  std::string text = what_happened + " (" + other.summary() + "): the case, not the batch, is likely wrong.";
  const std::vector<TensorInfo> whole = keptWhole(batch);
  if (whole.empty()) {
    text += " The case keeps no tensor whole; check the samples section against what the step does with each entry";
  } else {
    text += " The case keeps these whole in every candidate: " + tensorsKeptWhole(batch) + ".";
    if (hasDimension(whole.front(), n))
      text += " '" + whole.front().name + "' has a dimension of " + std::to_string(n) +
              ", the batch's size: if it holds one entry per sample, name it under samples.tensors (e.g. " +
              whole.front().name + ": 0) so that it is cut with the samples";
    else
      text += " Name under samples.tensors each that holds one entry per sample";
  }
  return text +
         "; or leave the samples section out and minrepro infers it from the batch (minrepro init shows what it "
         "infers). When it was inferred already (no case.yaml), save what it keeps whole with one entry per sample: "
         "a list of one tensor per sample, or padded into one [samples, ...] tensor with a lengths tensor beside it";
}

std::string perSampleLookingKeptWhole(const BatchStore& batch) {
  const std::int64_t n = batch.sampleCount();
  std::string names;
  for (const TensorInfo& t : keptWhole(batch))
    if (n > 1 && !t.shape.empty() && t.shape.front() == n)
      names += (names.empty() ? "" : ", ") + t.name + " " + shapeText(t.shape) + " " + t.dtype;
  if (names.empty()) return "";
  return names + ": the batch's " + std::to_string(n) +
         " along the first dimension, but the case keeps it whole, so every candidate carries all " +
         std::to_string(n) + " rows. If a tensor holds one row per sample, name it under samples.tensors " +
         "(NAME: 0) so that it is cut with the samples; leave the samples section out and minrepro infers it";
}

std::string samplesDoNotMatterMessage(const BatchStore& batch) {
  return "the step fails the same way with none of the " + std::to_string(batch.sampleCount()) +
         " samples, so what fails is in what the case keeps whole (" + tensorsKeptWhole(batch) +
         "), and a reduction would keep an arbitrary sample. Name under samples.tensors each tensor that holds "
         "rows of the samples (e.g. x: 0); when the rows belong to the samples unevenly (a graph batch: the nodes "
         "and edges of every graph concatenated, with a vector naming each node's graph), save one dict of tensors "
         "per sample in a list, as your dataset returns them before they are joined, and join them in the step";
}

void checkHalves(const BatchStore& batch, TrialOracle& oracle, const Selection& all, const Selection& first_query,
                 Log& log) {
  const std::size_t n = all.samples.size();
  if (n < 2) return;
  // One half is the search's own first question when it cuts samples (its
  // answer is then reused); the other is asked only when that one fails
  // another way: a healthy case pays nothing for the check.
  Selection first = all, second = all;
  const bool search_asks_it = first_query.samples.size() < n && first_query.samples.size() >= n / 4;
  if (search_asks_it)
    first.samples = first_query.samples;
  else
    first.samples.assign(all.samples.begin(), all.samples.begin() + static_cast<std::ptrdiff_t>(n / 2));
  second.samples.clear();
  std::set_difference(all.samples.begin(), all.samples.end(), first.samples.begin(), first.samples.end(),
                      std::back_inserter(second.samples));
  std::optional<FailureSignature> seen;
  bool points_at_case = false;
  for (const Selection* half : {&first, &second}) {
    if (oracle.interesting(*half)) return;  // the batch reduces
    const std::optional<FailureSignature> other = oracle.otherFailureOf(*half);
    if (!other || (seen && failureShape(*seen) != failureShape(*other))) return;
    seen = other;
    points_at_case = points_at_case || pointsAtTheCase(other->message, batch);
  }
  if (!points_at_case) {
    log.detail("both halves of the batch fail another way (" + seen->summary() +
               "), which names neither the batch's size nor a tensor kept whole: searching on");
    return;
  }
  throw DoesNotReproduceError(wrongCaseMessage(
      "both halves of the batch fail another way, the same way, naming the batch's size or a tensor kept whole", *seen,
      batch));
}

std::optional<std::string> noSampleWentWarning(const BatchStore& batch, std::size_t kept, const OracleStats& stats) {
  const std::size_t n = batch.sampleCount();
  if (n < 2 || kept < n || stats.other_bugs.empty()) return std::nullopt;
  const auto most = std::max_element(stats.other_bugs.begin(), stats.other_bugs.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string advice = perSampleLookingKeptWhole(batch);
  if (advice.empty())
    advice =
        "the step may hold per-sample data the case keeps whole: a list or tensor of its own with one entry per "
        "sample (with minrepro_capture, a variable the block reads that is not the batch given to capture(), "
        "which capture names in its notes), or a tensor outside samples.tensors";
  return "none of the " + std::to_string(n) + " samples could go: smaller batches failed another way (most often " +
         most->first + ", " + std::to_string(most->second) + " time(s)). " + advice;
}

std::optional<std::string> OtherFailureWatch::add(bool accepted, const FailureSignature& last, std::size_t trials,
                                                  double seconds) {
  if (first_seconds_ < 0) first_seconds_ = seconds, first_trials_ = trials;
  if (accepted) accepted_ = true;
  if (accepted_) return std::nullopt;  // the batch reduces: other failures are the search's business
  if (!last.failed()) {
    passed_ = true;
    streak_ = 0;
    return std::nullopt;
  }
  ++others_;
  streak_ = failureShape(last) == streak_signature_ ? streak_ + 1 : 1;
  streak_signature_ = failureShape(last);
  if (streak_ >= kSameOtherStreak)
    return "the last " + std::to_string(streak_) + " candidates all failed another way, the same way, and none " +
           "failed as the original did";
  const std::size_t spent = trials - first_trials_;
  if (!passed_ && (spent >= kOnlyOtherTrials || (seconds - first_seconds_ >= kOnlyOtherSeconds && others_ >= 3)))
    return "the search's first " + std::to_string(others_) + " candidates (" + std::to_string(spent) +
           " trials) all failed another way and none failed as the original did or passed";
  return std::nullopt;
}

}  // namespace minrepro
