#include "core/log_streams.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace minrepro {
namespace {

using namespace text;

struct Stream {
  std::string name;                   // "rank 1"; empty for unprefixed lines
  Lines lines;                        // the lines without their prefix
  std::vector<std::size_t> log_line;  // where each came from in the log
};

// srun's "--label" prefix ("1: ") is only taken for one when a traceback
// carries it: a log's own lines may well start with a number and a colon.
bool hasSrunLabels(const Lines& lines) {
  static const std::regex labelled(R"(^\d+: +Traceback \(most recent call last\))");
  for (const auto& line : lines)
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) && std::regex_search(line, labelled))
      return true;
  return false;
}

// Reads the decimal number at `at`; npos when there is none. (Prefixes are
// read by hand: a training log has millions of lines, and most start with '['.)
std::size_t readNumber(std::string_view line, std::size_t at, std::string* number) {
  std::size_t end = at;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  if (end == at || end - at > 9) return std::string_view::npos;
  *number = std::string(line.substr(at, end - at));
  return end;
}

// "[rank1]: " (torch 2.x; the space is the prefix's), "[default1]:"
// (torchrun --tee) or "[3,1]<stderr>:" (Open MPI: job, rank).
std::pair<std::string, std::size_t> bracketPrefix(std::string_view line) {
  std::string number;
  for (const auto& [tag, name] :
       {std::pair<std::string_view, std::string_view>{"[rank", "rank "}, {"[default", "local rank "}}) {
    if (line.substr(0, tag.size()) != tag) continue;
    const std::size_t end = readNumber(line, tag.size(), &number);
    if (end == std::string_view::npos || line.substr(end, 2) != "]:") return {"", 0};
    const bool space = tag == "[rank" && end + 2 < line.size() && line[end + 2] == ' ';
    return {std::string(name) + number, end + 2 + (space ? 1 : 0)};
  }
  std::size_t end = readNumber(line, 1, &number);
  if (end == std::string_view::npos || end >= line.size() || line[end] != ',') return {"", 0};
  end = readNumber(line, end + 1, &number);
  if (end == std::string_view::npos) return {"", 0};
  for (std::string_view tail : {"]<stdout>:", "]<stderr>:"})
    if (line.substr(end, tail.size()) == tail) return {"rank " + number, end + tail.size()};
  return {"", 0};
}

// The stream a line belongs to and where its own text begins.
std::pair<std::string, std::size_t> linePrefix(const std::string& line, bool srun_labels) {
  if (line.empty()) return {"", 0};
  if (line[0] == '[') return bracketPrefix(line);
  std::string number;
  if (srun_labels) {
    const std::size_t end = readNumber(line, 0, &number);
    if (end != std::string_view::npos && line.compare(end, 2, ": ") == 0) return {"rank " + number, end + 2};
  }
  return {"", 0};
}

// Python's logging in torch 2.x writes an error as "E1203 22:44:53.698000
// 14708 torch/_subclasses/fake_tensor.py:3090] [0/0] " and then the text,
// a traceback among them (Dynamo logs the error its fake tensors met before
// it raises its own). The length of that prefix, for E and F lines; 0 else.
std::size_t loggingPrefix(std::string_view line) {
  if (line.size() < 24 || (line[0] != 'E' && line[0] != 'F')) return 0;
  for (std::size_t i = 1; i <= 4; ++i)
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return 0;
  if (line[5] != ' ' || line[8] != ':' || line[11] != ':') return 0;
  std::size_t end = line.find("] ", 12);
  if (end == std::string_view::npos) return 0;
  end += 2;
  if (line.substr(end, 1) == "[") {  // Dynamo's frame id: "[0/0] "
    const std::size_t close = line.find("] ", end);
    if (close != std::string_view::npos && close - end < 16) end = close + 2;
  }
  return end;
}

// The log's lines are moved into their streams, without their prefixes.
std::vector<Stream> splitStreams(Lines lines) {
  const bool srun_labels = hasSrunLabels(lines);
  std::vector<Stream> streams;
  std::unordered_map<std::string, std::size_t> stream_of;  // a job of 80 000 ranks has as many streams
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto prefix = linePrefix(lines[i], srun_labels);  // (stream name, where the text starts)
    const auto [at, is_new] = stream_of.try_emplace(prefix.first, streams.size());
    if (is_new) streams.push_back(Stream{prefix.first, {}, {}});
    Stream* stream = &streams[at->second];
    lines[i].erase(0, prefix.second);
    lines[i].erase(0, loggingPrefix(lines[i]));
    stream->lines.push_back(std::move(lines[i]));
    stream->log_line.push_back(i);
  }
  return streams;
}

// Lower is chosen first: what a process raised, then a report of a death
// that names the signal, then any report of a death, then the rest.
int rank(const RawError& error) {
  switch (error.role) {
    case ErrorRole::Raised:
      return 0;
    case ErrorRole::DeathReport:
      return error.signal_name.empty() ? 2 : 1;
    case ErrorRole::Consequence:
      return 3;
  }
  return 3;
}

}  // namespace

std::string LoggedError::where() const { return error.process.empty() ? stream : error.process; }

std::string setAsideKind(const RawError& error) {
  switch (error.role) {
    case ErrorRole::Consequence:
      return consequenceKind(error);
    case ErrorRole::DeathReport:
      return error.type.find("ChildFailedError") != std::string::npos ? "launcher summary" : "death report";
    case ErrorRole::Raised:
      return "later error";
  }
  return "later error";
}

FirstErrorChoice chooseFirstError(Lines lines, bool list_set_aside) {
  const AfterFirstRaised after = list_set_aside ? AfterFirstRaised::Continue : AfterFirstRaised::Stop;
  std::vector<LoggedError> errors;
  for (const Stream& stream : splitStreams(std::move(lines))) {
    for (RawError& error : readErrors(stream.lines, after)) {
      const std::size_t at = std::min(error.line, stream.log_line.size() - 1);
      errors.push_back(LoggedError{std::move(error), stream.log_line[at], stream.name, stream.lines[at]});
    }
  }
  std::stable_sort(errors.begin(), errors.end(),
                   [](const LoggedError& a, const LoggedError& b) { return a.log_line < b.log_line; });
  FirstErrorChoice choice;
  if (errors.empty()) return choice;
  auto first = std::min_element(errors.begin(), errors.end(), [](const LoggedError& a, const LoggedError& b) {
    return rank(a.error) < rank(b.error);
  });
  // A report of a death (torchrun's root cause) stands in only for a process
  // that printed nothing: when that rank's own lines hold an error, even a
  // timeout, that error is what happened there.
  if (first->error.role == ErrorRole::DeathReport && !first->where().empty()) {
    const std::string dead = first->where();
    auto own = std::find_if(errors.begin(), errors.end(), [&](const LoggedError& e) {
      return e.stream == dead && e.error.role != ErrorRole::DeathReport;
    });
    if (own != errors.end()) first = own;
  }
  choice.first = std::move(*first);
  errors.erase(first);
  if (list_set_aside) choice.set_aside = std::move(errors);
  return choice;
}

}  // namespace minrepro
