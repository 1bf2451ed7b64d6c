#include "engine/verify.h"

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include "harness/batch_store.h"

namespace fs = std::filesystem;

namespace minrepro {

// ---------------------------------------------------------------- manifest

std::string renderManifest(const Manifest& m) {
  std::ostringstream out;
  out << "# minrepro: what repro.py must do; read by `minrepro verify`\n"
      << "family: " << familyName(m.signature.family) << "\n"
      << "operator: " << m.signature.op << "\n"
      << "compare-operator: " << (m.compare_operator ? "yes" : "no") << "\n"
      << "message: " << m.signature.message << "\n";
  if (!m.signature.signal_name.empty()) out << "signal: " << m.signature.signal_name << "\n";
  if (!m.message_pattern.empty()) out << "message-pattern: " << m.message_pattern << "\n";
  if (m.processed) out << "processed: " << *m.processed << "\n";
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

std::int64_t parseCount(const std::string& value, const std::string& where) {
  std::size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 0) throw VerifyError(where + ": processed: expected a count, found '" + value + "'");
  return n;
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
    if (used == 0 || used != item.size()) throw VerifyError(where + ": neighbour ids: expected integers, found '" + item + "'");
  }
  return ids;
}

NeighbourCase parseNeighbour(const std::string& value, const std::string& where) {
  std::istringstream words(value);
  NeighbourCase n;
  if (!(words >> n.name >> n.file))
    throw VerifyError(where + ": neighbour: expected 'NAME FILE [processed=N] ids=...', found '" + value + "'");
  for (std::string word; words >> word;) {
    if (word.rfind("processed=", 0) == 0) n.processed = parseCount(word.substr(10), where);
    else if (word.rfind("ids=", 0) == 0) n.ids = parseIds(word.substr(4), where);
    else throw VerifyError(where + ": neighbour: unknown field '" + word + "'");
  }
  return n;
}

void setManifestKey(Manifest& m, const std::string& key, const std::string& value, const std::string& where) {
  if (key == "family") {
    const auto family = parseFamily(value);
    if (!family) throw VerifyError(where + ": unknown family '" + value + "'");
    m.signature.family = *family;
  } else if (key == "operator") {
    m.signature.op = value;
  } else if (key == "compare-operator") {
    m.compare_operator = value == "yes";
  } else if (key == "message") {
    m.signature.message = value;
  } else if (key == "message-pattern") {
    m.message_pattern = value;
  } else if (key == "signal") {
    m.signature.signal_name = value;  // a fatal signal's name: the same signal must end every run
  } else if (key == "processed") {
    m.processed = parseCount(value, where);
  } else if (key == "neighbour") {
    m.neighbours.push_back(parseNeighbour(value, where));
  } else if (key == "neighbour-skipped") {
    m.neighbours_skipped.push_back(value);
  } else {
    throw VerifyError(where + ": unknown key '" + key + "'");
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
    if (colon == std::string::npos) throw VerifyError(where + ": expected 'key: value', found '" + line + "'");
    const std::string value = line.substr(colon + 1);
    setManifestKey(m, line.substr(0, colon), value.empty() || value[0] != ' ' ? value : value.substr(1), where);
  }
  if (!m.signature.failed()) throw VerifyError(source + ": no 'family:' line: the recorded failure is unknown");
  return m;
}

// A correct run of the harness's repro.py must process every sample whose
// target is not ignore_index: a "fix" that drops or ignores samples does not
// pass (GUIDE.md §6). Known only for the built-in harness with integer targets.
std::optional<std::int64_t> expectedProcessed(const CaseConfig& config, const fs::path& minimal_batch) {
  if (!config.harness || config.harness->target.empty() || config.harness->loss == "none") return std::nullopt;
  CaseConfig minimal = config;
  minimal.batch = minimal_batch;
  const auto batch = BatchStore::open(minimal);
  for (const auto& t : batch->describe()) {
    if (t.name != config.harness->target) continue;
    if (t.dtype.rfind("int", 0) != 0) return std::nullopt;
    std::int64_t processed = 0;
    for (auto v : batch->integerValues(t.name, std::numeric_limits<std::int64_t>::max()))
      processed += v != config.harness->ignore_index;
    return processed;
  }
  return std::nullopt;
}

ArchiveEntry manifestEntry(const CaseConfig& config, const fs::path& minimal_batch, const FailureSignature& signature,
                           const NeighbourPlan& neighbours) {
  Manifest m;
  m.signature = signature;
  // As the trials compared: the operator only for a trial command (see
  // Manifest) whose case did not relax invariants.operator.
  m.compare_operator = config.command.has_value() && config.invariants.op;
  m.message_pattern = config.expected.message_regex;
  m.processed = expectedProcessed(config, minimal_batch);
  m.neighbours = neighbours.cases;
  m.neighbours_skipped = neighbours.skipped;
  return {"signature.txt", renderManifest(m)};
}

const std::vector<std::string>& diagnosticVariables() {
  static const std::vector<std::string> names = {
      "CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL",       "AMD_SERIALIZE_COPY",           "HIP_LAUNCH_BLOCKING",
      "TORCH_SHOW_CPP_STACKTRACES", "PYTORCH_NO_CUDA_MEMORY_CACHING", "TORCH_USE_CUDA_DSA", "CUDA_DEVICE_WAITS_ON_EXCEPTION"};
  return names;
}

int VerifyResult::asExpected() const {
  int n = 0;
  for (const auto& r : runs) n += r.as_expected;
  return n;
}

int VerifyResult::neighboursAsExpected() const {
  int n = 0;
  for (const auto& r : neighbour_runs) n += r.as_expected;
  return n;
}

// ---------------------------------------------------------------- extraction

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw VerifyError("cannot create a temporary directory in " + tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {


// readTarGz already refused absolute paths, '..', links and devices; the
// checks here keep that true for whatever calls this with other entries,
// since this is the place that writes to disk.
void writeEntries(const fs::path& root, const std::vector<ArchiveEntry>& entries, const std::string& source) {
  std::set<fs::path> seen;
  for (const auto& e : entries) {
    const fs::path rel = fs::path(e.name).lexically_normal();
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..")
      throw VerifyError(source + ": refused: '" + e.name + "' would be written outside the extraction directory");
    if (!seen.insert(rel).second) throw VerifyError(source + ": refused: '" + e.name + "' appears twice");
    const fs::path target = root / rel;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    if (ec || !out.write(e.contents.data(), static_cast<std::streamsize>(e.contents.size())))
      throw VerifyError(source + ": cannot extract '" + e.name + "' (an entry and a directory share a name?)");
    fs::permissions(target, e.executable ? fs::perms(0755) : fs::perms(0644));
  }
}

const ArchiveEntry* findEntry(const std::vector<ArchiveEntry>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (fs::path(e.name).lexically_normal() == name) return &e;
  return nullptr;
}

std::vector<ArchiveEntry> readArchive(const VerifyOptions& o) {
  if (!fs::is_regular_file(o.archive))
    throw VerifyError(o.archive.string() + ": no such archive; give the repro.tar.gz that minrepro shrink wrote");
  try {
    return readTarGz(o.archive, o.max_entry_bytes);
  } catch (const ArchiveError& e) {
    throw VerifyError(std::string(e.what()) + "; nothing was extracted. Only archives made by minrepro shrink "
                      "can be verified");
  }
}

Manifest readManifest(const std::vector<ArchiveEntry>& entries, const VerifyOptions& o) {
  const std::string name = o.archive.string();
  if (!findEntry(entries, "repro.py")) throw VerifyError(name + ": no repro.py in the archive: not a minrepro reproducer");
  const ArchiveEntry* sig = findEntry(entries, "signature.txt");
  if (!sig)
    throw VerifyError(name + ": no signature.txt in the archive (made before minrepro verify existed?); "
                      "run minrepro shrink --config case.yaml again on its case to record one");
  Manifest m = parseManifest(sig->contents, name + ":signature.txt");
  if (o.expect == Expect::Pass && !m.processed)
    throw VerifyError(name + ": the archive records no expected result (it was made with a trial command or without "
                      "integer targets), so --expect pass could only check that nothing failed; compare the "
                      "program's output yourself");
  for (const auto& n : m.neighbours) {
    if (!findEntry(entries, n.file))
      throw VerifyError(name + ": signature.txt names the neighbour batch '" + n.file + "', which the archive lacks");
    if (o.expect == Expect::Pass && !n.processed)
      throw VerifyError(name + ": signature.txt records no expected count for the neighbour '" + n.name + "'");
  }
  return m;
}

// ---------------------------------------------------------------- one run

struct ResultLine {
  std::optional<std::int64_t> processed;
  std::optional<double> loss;
};

// "minrepro-result: processed=1 loss=1.3862", the last one repro.py printed.
std::optional<ResultLine> readResultLine(const std::string& stdout_text) {
  const auto at = stdout_text.rfind("minrepro-result:");
  if (at == std::string::npos) return std::nullopt;
  std::istringstream words(stdout_text.substr(at + 16, stdout_text.find('\n', at) - at - 16));
  ResultLine r;
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    try {
      if (word.substr(0, eq) == "processed") r.processed = std::stoll(word.substr(eq + 1));
      if (word.substr(0, eq) == "loss") r.loss = std::stod(word.substr(eq + 1));
    } catch (const std::exception&) {
      // "loss=nan" is read by stod; anything unreadable stays unset and fails below.
    }
  }
  return r;
}

// After a fix: exit 0 is not enough; the run must have processed every sample.
void judgePass(RunResult& r, std::int64_t expected) {
  if (!r.outcome.passed()) {
    r.detail = "still fails: " + r.signature.summary() + " (" + describe(r.outcome) + ")";
    return;
  }
  const auto line = readResultLine(r.outcome.stdout_text);
  if (!line || !line->processed) {
    r.detail = "exited 0 but printed no 'minrepro-result: processed=N' line";
    return;
  }
  const std::string counts = "processed " + std::to_string(*line->processed) + " of " + std::to_string(expected) +
                             " expected samples";
  if (*line->processed != expected) {
    r.detail = "wrong result: " + counts + " (samples dropped or ignored instead of fixed?)";
  } else if (expected == 0) {
    // Every target ignored: the mean loss is 0/0 (nan) in PyTorch; nothing else to check.
    r.as_expected = true;
    r.detail = "passed: " + counts + " (every target is ignore_index: no loss to check)";
  } else if (!line->loss || !std::isfinite(*line->loss)) {
    r.detail = "wrong result: " + counts + " but the loss is not a finite number";
  } else {
    r.as_expected = true;
    std::ostringstream loss;
    loss << std::setprecision(6) << *line->loss;
    r.detail = "passed: " + counts + ", loss " + loss.str();
  }
}

void judgeFail(RunResult& r, const Manifest& m) {
  FailureSignature recorded = m.signature;
  if (!m.compare_operator) recorded.op.clear();
  // An archive made before signal names were recorded: any fatal signal.
  if (recorded.family == FailureFamily::Signal && recorded.signal_name.empty())
    recorded.signal_name = r.signature.signal_name;
  if (!r.signature.failed()) {
    r.detail = "did not reproduce: the run passed (" + describe(r.outcome) + ")";
    return;
  }
  ExpectedFailure expected;
  expected.message_regex = m.message_pattern;
  const SignatureMatch match = matchSignature(recorded, r.signature, expected);
  r.as_expected = match.matches;
  r.detail = (match.matches ? "reproduced: " : "did not reproduce (" + match.why_not + "): ") +
             r.signature.summary() + " (" + describe(r.outcome) + ")";
}

// `neighbour` null: the minimal batch (repro.py's default); else repro.py
// is given the neighbour's batch and judged against its own count.
RunResult runOnce(const fs::path& dir, int index, const VerifyOptions& o, const Manifest& m, Executor& executor,
                  const NeighbourCase* neighbour = nullptr) {
  TrialSpec spec;
  spec.argv = {o.python, (dir / "repro.py").string()};
  if (neighbour) spec.argv.push_back((dir / fs::path(neighbour->file).lexically_normal()).string());
  spec.env_unset = diagnosticVariables();
  spec.work_dir = dir.parent_path() / ("run-" + std::to_string(index));
  spec.timeout = o.timeout;
  spec.cancel = o.cancel;
  RunResult r;
  if (neighbour) r.neighbour = neighbour->name;
  r.outcome = executor.run(spec);
  if (r.outcome.end == TrialEnd::FailedToStart)
    throw VerifyError("cannot start " + o.python + ": " + r.outcome.start_error + "; give a Python with PyTorch "
                      "with --python");
  r.signature = classify(r.outcome);
  if (o.expect == Expect::Pass) judgePass(r, neighbour ? *neighbour->processed : *m.processed);
  else judgeFail(r, m);
  return r;
}

}  // namespace

std::vector<ArchiveEntry> extractArchive(const fs::path& archive, const fs::path& dir, std::size_t max_entry_bytes) {
  VerifyOptions o;
  o.archive = archive;
  o.max_entry_bytes = max_entry_bytes;
  std::vector<ArchiveEntry> entries = readArchive(o);
  writeEntries(dir, entries, archive.string());
  return entries;
}

VerifyResult verifyArchive(const VerifyOptions& o, std::ostream* progress, Executor* executor) {
  if (o.runs < 1) throw VerifyError("--runs must be at least 1, found " + std::to_string(o.runs));
  // Everything is read and checked in memory first: a refused archive
  // writes nothing at all.
  const std::vector<ArchiveEntry> entries = readArchive(o);
  VerifyResult result;
  result.manifest = readManifest(entries, o);
  if (progress)
    *progress << "verify " << o.archive.string() << ": " << o.runs << " run(s) of repro.py, each a fresh process, "
              << "diagnostic variables removed\n";
  ScratchDir tree("minrepro-verify");
  const fs::path dir = tree.path() / "repro";
  writeEntries(dir, entries, o.archive.string());
  LocalExecutor local;
  for (int i = 1; i <= o.runs && !(o.cancel && o.cancel->load()); ++i) {
    result.runs.push_back(runOnce(dir, i, o, result.manifest, executor ? *executor : local));
    if (progress)
      *progress << "  run " << i << "/" << o.runs << ": " << result.runs.back().detail << " in " << std::fixed
                << std::setprecision(1) << result.runs.back().outcome.duration.count() / 1000.0 << " s\n"
                << std::flush;
  }
  // After a fix, the neighbour batches must pass too (GUIDE.md §6): one
  // fresh run each, with the count recorded for that batch.
  if (o.expect == Expect::Pass) {
    int index = o.runs;
    for (const auto& n : result.manifest.neighbours) {
      result.neighbour_runs.push_back(runOnce(dir, ++index, o, result.manifest, executor ? *executor : local, &n));
      if (progress) {
        std::vector<std::int64_t> ids = n.ids;
        std::ostringstream list;
        for (std::size_t i = 0; i < ids.size() && i < 8; ++i) list << (i ? ", " : "") << ids[i];
        if (ids.size() > 8) list << ", ... (" << ids.size() << " in all)";
        *progress << "  neighbour " << n.name << " (ids [" << list.str() << "]): " << result.neighbour_runs.back().detail
                  << " in " << std::fixed << std::setprecision(1)
                  << result.neighbour_runs.back().outcome.duration.count() / 1000.0 << " s\n" << std::flush;
      }
    }
    if (progress)
      for (const auto& why : result.manifest.neighbours_skipped) *progress << "  neighbour not made: " << why << "\n";
  }
  return result;
}

int runVerify(const VerifyOptions& o, std::ostream& out, std::ostream& err) {
  try {
    const VerifyResult r = verifyArchive(o, &out);
    const Manifest& m = r.manifest;
    const int n = static_cast<int>(r.runs.size()), ok = r.asExpected();
    if (o.expect == Expect::Fail)
      out << "recorded failure: " << m.signature.summary() << "\nreproduced in " << ok << " of " << n << " runs ("
          << 100 * ok / n << "%)\n";
    else
    {
      out << "expected: exit 0 and processed=" << *m.processed << "\npassed in " << ok << " of " << n << " runs ("
          << 100 * ok / n << "%)\n";
      if (!r.neighbour_runs.empty())
        out << "neighbours passed: " << r.neighboursAsExpected() << " of " << r.neighbour_runs.size() << "\n";
    }
    return r.allAsExpected() ? 0 : 1;
  } catch (const VerifyError& e) {
    err << "minrepro verify: error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace minrepro
