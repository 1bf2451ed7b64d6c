// Reading a log of any size in bounded memory (see the header for why).
#include "commands/log_window.h"

#include <array>
#include <istream>
#include <string_view>

namespace minrepro {

bool mayBelongToAnError(const std::string& line) {
  // A superset of what engine/error_readers keys on: error and exception
  // lines, traceback headers and frames, C++ terminate reports, signals
  // and fatal errors, device and collective messages, launcher summaries.
  static constexpr std::array<std::string_view, 44> kWords = {"rror",
                                                              "xception",
                                                              "Traceback",
                                                              "File \"",
                                                              "raise",
                                                              "ssert",
                                                              "ault",
                                                              "ignal",
                                                              "SIG",
                                                              "terminate",
                                                              "what():",
                                                              "bort",
                                                              "illed",
                                                              "xit",
                                                              "ail",
                                                              "FAIL",
                                                              "atal",
                                                              "CUDA",
                                                              "cuda",
                                                              "HIP",
                                                              "hip",
                                                              "NCCL",
                                                              "Root Cause",
                                                              "rank",
                                                              "frame #",
                                                              "Stack",
                                                              "Thread 0x",
                                                              "Current thread",
                                                              "Extension modules",
                                                              "rocess",
                                                              "worker",
                                                              "=====",
                                                              "imed out",
                                                              "imeout",
                                                              "emory",
                                                              "nterrupt",
                                                              "nsupported",
                                                              "exc.",
                                                              "llegal",
                                                              "loating point",
                                                              "core dumped",
                                                              "aten::",
                                                              "c10::",
                                                              "arning"};
  for (std::string_view word : kWords)
    if (line.find(word) != std::string::npos) return true;
  return false;
}

namespace {

// Keeps every line until told to window, then the lines near errors; of
// those, the first head_bytes and the last tail_bytes.
class LineKeeper {
 public:
  LineKeeper(LogLines& out, std::size_t head_bytes, std::size_t tail_bytes)
      : out_(out), head_bytes_(head_bytes), tail_bytes_(tail_bytes) {}

  void add(std::string line) {
    ++number_;
    if (!windowed_) {
      kept_bytes_ += costOf(line);
      out_.lines.push_back(std::move(line));
      if (kept_bytes_ > head_bytes_) window();
      return;
    }
    if (mayBelongToAnError(line)) {
      flushBefore();
      keep(std::move(line), number_);
      after_ = kContext;
    } else if (after_ > 0) {
      keep(std::move(line), number_);
      --after_;
    } else {
      before_.emplace_back(std::move(line), number_);
      if (before_.size() > kContext) {
        before_.pop_front();
        ++out_.dropped;
      }
    }
  }

  // From here on only lines near errors are kept; those already read are
  // kept with their numbers.
  void window() {
    if (windowed_) return;
    windowed_ = true;
    for (std::size_t i = 0; i < out_.lines.size(); ++i) out_.numbers.push_back(i + 1);
  }

  void finish() {
    out_.dropped += before_.size();
    for (auto& [line, number] : tail_) append(std::move(line), number);
    tail_.clear();
  }

 private:
  // A line's bytes and what a std::string and its number cost beside them.
  static std::size_t costOf(const std::string& line) { return line.size() + 48; }

  // Into the head while it has room, else into the tail, whose oldest line
  // is then counted as not read.
  void keep(std::string line, std::size_t number) {
    if (kept_bytes_ + costOf(line) <= head_bytes_ && tail_.empty()) {
      kept_bytes_ += costOf(line);
      append(std::move(line), number);
      return;
    }
    tail_held_ += costOf(line);
    tail_.emplace_back(std::move(line), number);
    while (tail_held_ > tail_bytes_ && !tail_.empty()) {
      const std::size_t gone = tail_.front().second;
      if (out_.not_read++ == 0) out_.first_not_read = gone;
      out_.last_not_read = gone;
      tail_held_ -= costOf(tail_.front().first);
      tail_.pop_front();
    }
  }
  void append(std::string line, std::size_t number) {
    if (!out_.numbers.empty() && number > out_.numbers.back() + 1) {  // a blank line for what was dropped
      out_.lines.emplace_back();
      out_.numbers.push_back(number - 1);
    }
    out_.lines.push_back(std::move(line));
    out_.numbers.push_back(number);
  }
  void flushBefore() {
    for (auto& [line, number] : before_) keep(std::move(line), number);
    before_.clear();
  }

  LogLines& out_;
  const std::size_t head_bytes_, tail_bytes_;
  bool windowed_ = false;
  std::size_t number_ = 0, after_ = 0, kept_bytes_ = 0, tail_held_ = 0;
  std::deque<std::pair<std::string, std::size_t>> before_, tail_;
};

}  // namespace

LogLines readLogBounded(std::istream& in, std::size_t exact_bytes, std::size_t head_bytes, std::size_t tail_bytes) {
  LogLines out;
  LineKeeper keeper(out, head_bytes, tail_bytes);
  std::string line;
  bool cutting = false;
  std::size_t read = 0;
  std::vector<char> buffer(1 << 16);
  const auto endLine = [&] {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    text::removeColor(line);
    keeper.add(std::move(line));
    line.clear();
    cutting = false;
  };
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    const std::string_view chunk(buffer.data(), static_cast<std::size_t>(in.gcount()));
    read += chunk.size();
    if (read > exact_bytes) keeper.window();
    for (std::size_t at = 0; at < chunk.size();) {
      const std::size_t newline = chunk.find('\n', at);
      const std::size_t end = newline == std::string_view::npos ? chunk.size() : newline;
      const std::size_t room = text::kMaxLine - line.size();
      if (end - at > room && !cutting) {
        cutting = true;
        ++out.cut_lines;
      }
      line.append(chunk.substr(at, std::min(end - at, room)));
      if (newline == std::string_view::npos) break;
      endLine();
      at = newline + 1;
    }
  }
  if (!line.empty() || cutting) endLine();
  keeper.finish();
  return out;
}

}  // namespace minrepro
