#include "core/op_call.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "core/process/process.h"
#include "core/text_lines.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// call.txt holds one call: its lines and its tensors' descriptions.
constexpr std::size_t kMaxCallFileBytes = std::size_t{16} << 20;

// "[3,4]" -> {3, 4}; "[]" -> {}.
std::vector<std::int64_t> parseSizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::string digits;
  for (char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (!digits.empty()) {
      sizes.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  return sizes;
}

// "self float32 [3,4] stride [4,1] offset 0 cpu storage own"
std::optional<OpTensor> parseTensorLine(const std::string& value) {
  std::istringstream words(value);
  OpTensor t;
  std::string shape, stride_word, stride, offset_word, offset, storage_word;
  if (!(words >> t.name >> t.dtype >> shape >> stride_word >> stride >> offset_word >> offset >> t.device >>
        storage_word))
    return std::nullopt;
  t.shape = parseSizes(shape);
  t.layout = "stride " + stride + " offset " + offset;
  std::getline(words, t.storage);
  t.storage = text::trim(t.storage);
  return t;
}

void readCallField(OpCall& call, const std::string& key, const std::string& value) {
  if (key == "op")
    call.op = value;
  else if (key == "call")
    call.call = value;
  else if (key == "phase")
    call.phase = value;
  else if (key == "error")
    call.error = value;
  else if (key == "unsupported")
    call.unsupported = value;
  else if (key == "arg")
    call.args.push_back(value);
  else if (key == "kwarg")
    call.args.push_back(value);
  else if (key == "index")
    call.index = std::strtoull(value.c_str(), nullptr, 10);
  else if (key == "tensor") {
    if (auto t = parseTensorLine(value)) call.tensors.push_back(std::move(*t));
  }
}

}  // namespace

std::string OpTensor::describe() const {
  std::string text = name + " " + dtype + " [";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "] " + layout + " " + device + (storage == "own" ? "" : ", " + storage);
}

std::optional<OpCall> readOpCall(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  OpCall call;
  for (const std::string& line : text::splitLines(readFileCapped(file, kMaxCallFileBytes))) {
    const auto colon = line.find(": ");
    if (colon != std::string::npos) readCallField(call, line.substr(0, colon), line.substr(colon + 2));
  }
  if (call.op.empty() || call.call.empty()) return std::nullopt;
  return call;
}

}  // namespace minrepro
