#include "engine/archive/manifest.h"

#include <fstream>
#include <sstream>

#include "core/text_lines.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string renderManifest(const Manifest& m) {
  std::ostringstream out;
  out << "# minrepro: what repro.py must do; read by `minrepro verify`\n"
      << "family: " << familyName(m.signature.family) << "\n"
      << "operator: " << m.signature.op << "\n"
      << "compare-operator: " << (m.compare_operator ? "yes" : "no") << "\n"
      << "compare-ending: " << (m.compare_ending ? "yes" : "no") << "\n"
      << "message: " << m.signature.message << "\n";
  if (!m.signature.signal_name.empty()) out << "signal: " << m.signature.signal_name << "\n";
  if (!m.message_pattern.empty()) out << "message-pattern: " << m.message_pattern << "\n";
  if (m.processed) out << "processed: " << *m.processed << "\n";
  if (!m.op_repro.empty()) out << "op-repro: " << m.op_repro << "\n";
  if (m.flaky_rate) out << "flaky-rate: " << *m.flaky_rate << "\n";
  if (!m.python.empty()) out << "python: " << m.python << "\n";
  if (!m.torch.empty()) out << "torch: " << m.torch << "\n";
  if (m.trial_timeout_s) out << "trial-timeout: " << *m.trial_timeout_s << "\n";
  if (!m.not_alone.empty()) out << "not-alone: " << m.not_alone << "\n";
  // neighbour: NAME FILE [processed=N] ids=ID,ID,...
  for (const auto& n : m.neighbours) {
    out << "neighbour: " << n.name << " " << n.file;
    if (n.processed) out << " processed=" << *n.processed;
    out << " ids=";
    for (std::size_t i = 0; i < n.ids.size(); ++i) out << (i ? "," : "") << n.ids[i];
    out << "\n";
  }
  for (const auto& why : m.neighbours_skipped) out << "neighbour-skipped: " << why << "\n";
  return out.str();
}

namespace {

// minrepro writes at most four neighbours (plus_one, last_batch, shortest,
// longest), each a run of verify --expect pass: a forged list of thousands
// kept verify running for hours (probe 30).
constexpr std::size_t kMaxNeighbours = 16;

std::int64_t parseCount(const std::string& value, const std::string& where) {
  std::size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 0)
    throw BadInputError(where + ": processed: expected a count, found '" + value + "'");
  return n;
}

// A number in (0, most], else BadInputError saying `expected`.
double parseNumberIn(const std::string& value, double most, const std::string& expected) {
  std::size_t used = 0;
  double number = -1;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
  }
  if (used != value.size() || !(number > 0 && number <= most))
    throw BadInputError(expected + ", found '" + value + "'");
  return number;
}

std::vector<std::int64_t> parseIds(const std::string& text, const std::string& where) {
  std::vector<std::int64_t> ids;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::size_t used = 0;
    try {
      ids.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw BadInputError(where + ": neighbour ids: expected integers, found '" + item + "'");
  }
  return ids;
}

NeighbourCase parseNeighbour(const std::string& value, const std::string& where) {
  std::istringstream words(value);
  NeighbourCase n;
  if (!(words >> n.name >> n.file))
    throw BadInputError(where + ": neighbour: expected 'NAME FILE [processed=N] ids=...', found '" + value + "'");
  for (std::string word; words >> word;) {
    if (word.rfind("processed=", 0) == 0)
      n.processed = parseCount(word.substr(10), where);
    else if (word.rfind("ids=", 0) == 0)
      n.ids = parseIds(word.substr(4), where);
    else
      throw BadInputError(where + ": neighbour: unknown field '" + word + "'");
  }
  return n;
}

void setManifestKey(Manifest& m, const std::string& key, const std::string& value, const std::string& where) {
  if (key == "family") {
    const auto family = parseFamily(value);
    if (!family) throw BadInputError(where + ": unknown family '" + value + "'");
    m.signature.family = *family;
  } else if (key == "operator") {
    m.signature.op = value;
  } else if (key == "compare-operator") {
    m.compare_operator = value == "yes";
  } else if (key == "compare-ending") {
    m.compare_ending = value == "yes";
  } else if (key == "message") {
    // What a trial's message can be (lines of at most 2 KiB, a few of
    // them): a recorded one of megabytes, which only a changed archive
    // holds, kept verify and compare normalizing it for minutes, deaf to
    // Ctrl-C (probe 24: 1 MB, 72 s; 600 MB, hours).
    constexpr std::size_t kMaxMessage = 16 * 1024;
    m.signature.message = value.substr(0, kMaxMessage);
  } else if (key == "message-pattern") {
    m.message_pattern = value;
  } else if (key == "signal") {
    m.signature.signal_name = value;  // a fatal signal's name: the same signal must end every run
  } else if (key == "processed") {
    m.processed = parseCount(value, where);
  } else if (key == "op-repro") {
    if (value.empty() || value[0] == '/' || value.find("..") != std::string::npos)
      throw BadInputError(where + ": op-repro: expected a path inside the archive, found '" + value + "'");
    m.op_repro = value;
  } else if (key == "flaky-rate") {
    m.flaky_rate = parseNumberIn(value, 1, where + ": flaky-rate: expected a rate in (0, 1]");
  } else if (key == "neighbour") {
    if (m.neighbours.size() >= kMaxNeighbours)
      throw BadInputError(where + ": more than " + std::to_string(kMaxNeighbours) +
                          " neighbour lines, where minrepro writes at most 4: refused (only archives made by minrepro "
                          "shrink can be verified)");
    m.neighbours.push_back(parseNeighbour(value, where));
  } else if (key == "seal") {
    m.seal = value;
  } else if (key == "made-on") {
    // Before seals: a line any archive could copy, not trusted.
  } else if (key == "python") {
    m.python = value;
  } else if (key == "torch") {
    m.torch = value;
  } else if (key == "trial-timeout") {
    m.trial_timeout_s = parseNumberIn(value, 86400, where + ": trial-timeout: expected seconds in (0, 86400]");
  } else if (key == "not-alone") {
    m.not_alone = value;
  } else if (key == "neighbour-skipped") {
    if (m.neighbours_skipped.size() < kMaxNeighbours) m.neighbours_skipped.push_back(value);
  } else {
    throw BadInputError(where + ": unknown key '" + key + "'");
  }
}

}  // namespace

Manifest parseManifest(const std::string& text, const std::string& source) {
  Manifest m;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(number);
    const auto colon = line.find(':');
    if (colon == std::string::npos) throw BadInputError(where + ": expected 'key: value', found '" + line + "'");
    const std::string value = text::printable(line.substr(colon + 1));
    setManifestKey(m, line.substr(0, colon), value.empty() || value[0] != ' ' ? value : value.substr(1), where);
  }
  if (!m.signature.failed()) throw BadInputError(source + ": no 'family:' line: the recorded failure is unknown");
  return m;
}

Manifest readManifestFile(const fs::path& file, const std::string& source) {
  constexpr std::uintmax_t kMaxManifest = 1 << 20;
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw BadInputError(source + ": cannot be read (" + ec.message() + ")");
  if (size > kMaxManifest)
    throw BadInputError(source + ": " + std::to_string(size) +
                        " bytes, where minrepro writes a few KB: refused (only archives made by minrepro shrink can "
                        "be verified)");
  std::ifstream in(file, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  return parseManifest(text, source);
}

}  // namespace minrepro
