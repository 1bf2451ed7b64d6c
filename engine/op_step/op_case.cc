#include "engine/op_step/op_case.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace minrepro {

namespace {

// Whether `size` is written in a non-tensor argument (a view's shape, a
// narrow's length): cutting along it would make a size error of its own.
bool sizeInArguments(std::int64_t size, const std::vector<std::string>& args) {
  const std::regex tensor(R"(T\['[^']*'\])");
  const std::regex number("(^|[^0-9A-Za-z_.])" + std::to_string(size) + "($|[^0-9A-Za-z_.])");
  for (const auto& arg : args)
    if (std::regex_search(std::regex_replace(arg, tensor, "T"), number)) return true;
  return false;
}

// The length most tensors have as their first axis, when two or more do and
// no tensor has it on two axes; 0 when none.
std::int64_t sharedLeadingLength(const std::vector<OpTensor>& tensors) {
  std::map<std::int64_t, int> leading;  // size > 1 -> tensors whose first axis has it
  for (const auto& t : tensors)
    if (!t.shape.empty() && t.shape[0] > 1) ++leading[t.shape[0]];
  std::int64_t chosen = 0;
  int most = 1;
  // The first tensor's first axis wins a tie (a loss's input before its target).
  if (!tensors.empty() && !tensors.front().shape.empty() && leading[tensors.front().shape[0]] > 1) {
    chosen = tensors.front().shape[0];
    most = leading[chosen];
  }
  for (const auto& [size, count] : leading)
    if (count > most) chosen = size, most = count;
  for (const auto& t : tensors)
    if (std::count(t.shape.begin(), t.shape.end(), chosen) > 1) return 0;  // a square matrix: which axis?
  return chosen;
}

}  // namespace

OpCaseAxes sharedSampleAxes(const std::vector<OpTensor>& tensors, const std::vector<std::string>& args) {
  OpCaseAxes result;
  const std::int64_t chosen = sharedLeadingLength(tensors);
  if (chosen != 0 && !sizeInArguments(chosen, args)) {
    result.cut = true;
    for (const auto& t : tensors) {
      const auto at = std::find(t.shape.begin(), t.shape.end(), chosen);
      if (at != t.shape.end()) result.axes[t.name] = static_cast<int>(at - t.shape.begin());
    }
    return result;
  }
  // Nothing to cut: one axis carries the case for the values pass, an axis of
  // length 1 where there is one (one unit, nothing for a minimality check to try).
  for (int want_one = 1; want_one >= 0; --want_one)
    for (const auto& t : tensors)
      for (std::size_t axis = 0; axis < t.shape.size(); ++axis)
        if (!want_one || t.shape[axis] == 1) return {{{t.name, static_cast<int>(axis)}}, false};
  return result;
}

std::string renderOpCase(const std::string& python, const OpCaseAxes& case_axes, const FailureSignature& signature,
                         std::chrono::milliseconds timeout, bool flaky) {
  const auto& axes = case_axes.axes;
  std::ostringstream yaml;
  yaml << "# The failing operator call's inputs, reduced by minrepro's op step.\nbatch: inputs.pt\nsamples:\n"
          "  tensors: {";
  bool first = true;
  for (const auto& [name, axis] : axes) yaml << (first ? "" : ", ") << '"' << name << "\": " << axis, first = false;
  // Forked trials whether there is an axis to cut or only values: the
  // server imports torch once, where a plain trial of repro_op.py imports it
  // every time; the op step's runs of the result alone are the plain check.
  std::string quoted;  // a YAML double-quoted scalar
  for (char c : python) quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  yaml << "}\ntrial:\n  command: [\"" << quoted << "\", \"{case_dir}/repro_op.py\", \"{batch}\"]\n"
       << "  timeout: " << std::max<long long>(1, timeout.count() / 1000)
       << "\nfailure:\n  family: " << familyName(signature.family) << (flaky ? "" : "\nflaky:\n  enabled: false")
       << "\nreducers: [" << (case_axes.cut ? "samples, values" : "values") << "]\nwork_dir: work\noutput: op.tar.gz\n";
  return yaml.str();
}

}  // namespace minrepro
