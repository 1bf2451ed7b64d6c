#include "engine/archive/reproducer.h"

#include "engine/archive/output_guard.h"

#include <cmath>
#include <future>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "core/process/sandbox.h"
#include "core/text_lines.h"
#include "engine/archive/bundle.h"
#include "engine/archive/manifest.h"
#include "engine/archive/minimal_batch_contrast.h"
#include "engine/archive/report_html.h"
#include "engine/archive/repro_cpp.h"
#include "engine/archive/scrub.h"
#include "engine/archive/seal.h"
#include "engine/archive/secrets.h"
#include "engine/archive/self_check.h"
#include "engine/case_branches.h"
#include "engine/format_list.h"
#include "engine/torch_versions.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// A correct run of the harness's repro.py must process every sample whose
// target is not ignore_index: a "fix" that drops or ignores samples does not
// pass (docs/method.md, "Confirmation in the normal configuration"). Known only for the built-in harness with integer
// targets.
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

std::string environmentValue(const KeyValues& environment, const std::string& key) {
  for (const auto& [k, v] : environment)
    if (k == key) return v;
  return "";
}

ArchiveEntry manifestEntry(const CaseConfig& config, const fs::path& minimal_batch, const FailureSignature& signature,
                           const NeighbourPlan& neighbours, const ReductionSummary& summary,
                           const ScrubContext& scrub) {
  Manifest m;
  m.flaky_rate = summary.flaky_rate;
  if (summary.op.status == OpStepStatus::Made) m.op_repro = "op/repro_op.py";
  // The torch that made the case (REPORT.md's environment), when its Python imported one.
  const std::string torch = environmentValue(summary.environment, "PyTorch");
  if (!torchMinorVersion(torch).empty() && torch.find(' ') == std::string::npos) {
    m.torch = torch;
    m.python = scrubInterpreterPath(environmentValue(summary.environment, "PyTorch from"), scrub);
  }
  m.signature = signature;
  if (signature.family == FailureFamily::Timeout)
    m.trial_timeout_s = static_cast<double>(config.timeout.count()) / 1000;
  // As the trials compared: the operator only for a trial command (see
  // Manifest) whose case did not relax invariants.operator.
  m.compare_operator = config.command.has_value() && config.invariants.op;
  m.compare_ending = config.command.has_value() && !config.expected.any_ending;
  m.message_pattern = config.expected.message_regex;
  m.processed = expectedProcessed(config, minimal_batch);
  m.neighbours = neighbours.cases;
  m.neighbours_skipped = neighbours.skipped;
  if (summary.self_check.failed()) m.not_alone = summary.self_check.failedWhy();
  return {"signature.txt", renderManifest(m)};
}

// "[-1, 0.25, nan]": a floating-point tensor's few values, as Python prints them.
std::string formatReals(const std::vector<double>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::ostringstream v;
    v << std::setprecision(6) << values[i];
    text += (i ? ", " : "") + (std::isnan(values[i]) ? std::string("nan") : v.str());
  }
  return text + "]";
}

KeyValues smallValues(const BatchStore& batch, const std::vector<TensorInfo>& tensors) {
  constexpr std::int64_t kMaxReals = 16;  // a target, a weight per sample: the value that may be the bug
  KeyValues values;
  for (const auto& t : tensors) {
    std::int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    const bool real = t.dtype.find("float") != std::string::npos || t.dtype == "half";
    if (numel > 0 && numel <= 64 && t.dtype.rfind("int", 0) == 0) {
      values.emplace_back(t.name, formatList(batch.integerValues(t.name, 64)));
    } else if (numel > 0 && numel <= kMaxReals && real && t.has_sample_axis) {
      std::vector<double> all;
      for (std::int64_t s = 0; s < batch.sampleCount(); ++s)
        for (double v : batch.sampleValues(t.name, s, kMaxReals)) all.push_back(v);
      if (!all.empty()) values.emplace_back(t.name, formatReals(all));
    }
  }
  return values;
}

// The integer fields of per-sample lists' records, each over every sample
// ("[1][*].labels" from "[1][0].labels", "[1][1].labels", ...: a detection
// target's labels, k per image), up to 4M values in all.
std::vector<SampleValues> listFieldIntegers(const CaseConfig& config, const BatchStore& batch,
                                            const std::vector<TensorInfo>& tensors) {
  std::map<std::string, SampleValues> fields;
  std::size_t total = 0;
  for (const auto& t : tensors) {
    const bool integral = t.dtype.rfind("int", 0) == 0 || t.dtype.rfind("uint", 0) == 0;
    if (!integral || t.list_sample < 0) continue;
    std::size_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<std::size_t>(d);
    if (numel == 0 || (total += numel) > (std::size_t{1} << 22)) continue;
    for (const std::string& list : config.sample_lists) {
      const std::string entry = list + "[" + std::to_string(t.list_sample) + "]";
      if (t.name.rfind(entry, 0) != 0) continue;
      const std::string pattern = list + "[*]" + t.name.substr(entry.size());
      if (pattern == config.sample_ids) break;  // the ids are said apart
      SampleValues& field = fields[pattern];
      for (const std::int64_t v : batch.integerValues(t.name, numel)) {
        field.values.push_back(v);
        field.owner.push_back(t.list_sample);
      }
      break;
    }
  }
  std::vector<SampleValues> out;
  for (auto& [name, field] : fields) {
    if (std::set<std::int64_t>(field.owner.begin(), field.owner.end()).size() < 2) continue;
    field.name = name;
    out.push_back(std::move(field));
  }
  return out;
}

// Integer tensors with a sample axis, not the ids: 1-D (one value per
// sample), and token-like tensors with the samples first (rows of values
// per sample, up to 4M values in all); then the per-sample lists' fields.
std::vector<SampleValues> perSampleIntegers(const CaseConfig& config, const BatchStore& batch,
                                            const std::vector<TensorInfo>& tensors) {
  std::vector<SampleValues> out;
  for (const auto& t : tensors) {
    const bool integral = t.dtype.rfind("int", 0) == 0 || t.dtype.rfind("uint", 0) == 0 || t.dtype == "bool";
    if (!integral || !t.has_sample_axis || t.name == config.sample_ids || t.shape.empty()) continue;
    std::size_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<std::size_t>(d);
    if (t.shape.size() == 1) {
      out.push_back({t.name, batch.integerValues(t.name, static_cast<std::size_t>(batch.sampleCount()))});
    } else if (t.sample_axis == 0 && t.shape[0] > 0 && numel <= (std::size_t{1} << 22)) {
      const std::size_t row = numel / static_cast<std::size_t>(t.shape[0]);
      const std::vector<std::int64_t> values = batch.integerValues(t.name, numel);
      const bool mask = t.dtype == "bool" || t.name == config.sequence.mask;
      if (!mask) {
        out.push_back({t.name, values, row});
        continue;
      }
      // A mask: how much of each sample it marks (a series whose whole
      // window is unobserved sums to 0, the rest to 39..47; an attention
      // mask's count is the sample's length: the one caption longer than a
      // position table holds 18 against at most 10).
      SampleValues marked{t.name + (t.dtype == "bool" ? " (true per sample)" : " (ones per sample)"), {}, 1};
      for (std::size_t at = 0; at + row <= values.size(); at += row)
        marked.values.push_back(std::accumulate(values.begin() + static_cast<std::ptrdiff_t>(at),
                                                values.begin() + static_cast<std::ptrdiff_t>(at + row),
                                                std::int64_t{0}));
      out.push_back(std::move(marked));
    }
  }
  for (SampleValues& field : listFieldIntegers(config, batch, tensors)) out.push_back(std::move(field));
  return out;
}

// The script's comments quote the error message: scrubbed like repro.py's
// (its code is tensors and a call, which scrubbing must not touch).
std::string scrubComments(const std::string& script, const ScrubContext& scrub) {
  std::string out;
  for (const std::string& line : text::splitLines(script))
    out += (line.rfind("# ", 0) == 0 ? scrubText(line, scrub) : line) + "\n";
  return out;
}

// REPORT.html, also kept in the work directory (where the live one was).
std::string htmlReport(const CaseConfig& config, const ReductionSummary& summary) {
  HtmlReportInput input{&summary, summary.timeline, summary.panels, summary.size_line, ""};
  std::string html = renderReportHtml(config, input);
  writeFileAtomically(config.work_dir / "REPORT.html", html);
  return html;
}

// The case as the archive shows it: the captured context scrubbed, the
// trial's secret variables withheld. What else it names (a tensor's name,
// a path) stays as it is, since the batch and the command use it.
CaseConfig shownCase(const CaseConfig& config, const ScrubContext& scrub) {
  CaseConfig shown = config;
  // A key is free text too (probe 25: a token as a context key stayed in case.yaml).
  shown.context.clear();
  for (const auto& [key, value] : config.context)
    shown.context[scrubText(key, scrub)] = scrubContextValue(key, value, scrub);
  if (shown.command)
    for (const auto& [name, value] : withheldEnv(shown.command->env))
      shown.command->env[name] = withheldEnvPlaceholder(name);
  return shown;
}

std::string archivedCaseYaml(const CaseConfig& shown) {
  return renderCase(shown, shown.base_dir, "batch.pt", "model.pt");
}

std::vector<ArchiveEntry> archiveEntries(const CaseConfig& config, const fs::path& minimal_batch,
                                         const ReductionSummary& summary, const NeighbourPlan& neighbours,
                                         const BundlePlan& bundle) {
  // Everything the archive carries as text is scrubbed (engine/archive/scrub.h):
  // the error message where repro.py, repro.cpp and signature.txt quote it,
  // the captured context in case.yaml; REPORT.md scrubs itself. The
  // unscrubbed originals stay in the work directory (journal, log).
  const ScrubContext scrub = scrubContextFor(config);
  FailureSignature signature = summary.signature;
  signature.message = scrubText(signature.message, scrub);
  const CaseConfig shown = shownCase(config, scrub);
  std::vector<ArchiveEntry> entries;
  entries.push_back({"REPORT.md", renderReport(config, summary)});
  entries.push_back({"REPORT.html", htmlReport(config, summary)});
  entries.push_back({"repro.py", renderReproPy(shown, signature), true});
  entries.push_back({"case.yaml", archivedCaseYaml(shown)});
  entries.push_back(manifestEntry(config, minimal_batch, signature, neighbours, summary, scrub));  // for verify
  if (summary.op.status == OpStepStatus::Made) {
    entries.push_back({"op/repro_op.py", scrubComments(summary.op.script, scrub), true});
    entries.push_back(fileEntry("op/inputs.pt", summary.op.dir / "inputs.pt"));
    entries.push_back({"op/call.txt", scrubText(readFileBytes(summary.op.dir / "call.txt"), scrub)});
  }
  entries.push_back(fileEntry("batch.pt", minimal_batch));
  for (const auto& n : neighbours.cases) entries.push_back(fileEntry(n.file, config.work_dir / n.file));
  if (config.harness) {
    entries.push_back(fileEntry("model.pt", config.harness->model));
    for (auto& e : reproCppEntries(*config.harness, signature)) entries.push_back(std::move(e));
  }
  // The command's own files and those the trial reads (engine/archive/bundle.h);
  // a script the command runs directly keeps its executable bit. A user's
  // file named like one of the archive's own (repro.py) cannot travel: the
  // self-check then tells.
  std::set<std::string> names;
  for (const auto& e : entries) names.insert(e.name);
  for (const auto& f : bundle.files) {
    if (!names.insert(f.archive_name).second) continue;
    std::error_code ec;
    const bool executable = (fs::status(f.source, ec).permissions() & fs::perms::owner_exec) != fs::perms::none;
    entries.push_back(fileEntry(f.archive_name, f.source, executable));
  }
  sealEntries(entries);  // last: over every entry as written (engine/archive/seal.h)
  return entries;
}

// What the file trace's run gave: the files the trial reads and, when the
// op recorder rode along and the run failed like the case, its record.
struct TraceResult {
  BundlePlan bundle;
  fs::path recorded;
};

// A variable the trial command's own environment (trial.env) sets.
std::optional<std::string> commandVariable(const CaseConfig& config, const std::string& name) {
  const auto own = config.command->env.find(name);
  return own == config.command->env.end() ? std::nullopt : std::optional<std::string>(own->second);
}

// The file tracer goes last in LD_PRELOAD: a library the trial preloads
// itself (an allocator, a sanitizer's runtime, which must come first)
// stays first.
std::string preloadWith(const CaseConfig& config, const std::string& library) {
  const char* inherited = std::getenv("LD_PRELOAD");
  const std::string preload = commandVariable(config, "LD_PRELOAD").value_or(inherited ? inherited : "");
  return preload + (preload.empty() ? "" : ":") + library;
}

// The op recorder's files and its record are minrepro's, not the trial's.
std::vector<fs::path> withoutRecorder(std::vector<fs::path> traced, const RecorderRide& recorder) {
  const std::string own = recorder.program_dir, record = recorder.record_dir.string();
  std::erase_if(traced, [&](const fs::path& f) {
    const std::string path = f.string();
    return (!own.empty() && path.starts_with(own + "/")) || path.starts_with(record + "/");
  });
  return traced;
}

// One plain run of the minimal case with the file tracer preloaded: the
// files the trial reads (engine/archive/bundle.h). Command trials only: the
// built-in harness reads the batch and the model, which the archive has.
// When `record` is set, the op recorder rides on the same run (it promises
// not to change what the program sees); its record is kept only if the run
// failed like the case, else the op step records a run of its own.
TraceResult traceBundleOrThrow(const CaseConfig& config, TrialOracle& oracle, const Selection& best,
                               const RecorderRide* record, Log& log) {
  std::vector<fs::path> traced;
  TraceResult result;
  const std::string library = fileTraceLibrary();
  if (config.command && library.empty())
    log.info(
        "warning: libminrepro_filetrace.so not found beside minrepro: files the trial reads are not traced; "
        "only trial.files and the command's own files are bundled");
  if (config.command && !library.empty()) {
    const fs::path trace = config.work_dir / "file-trace.txt", dir = config.work_dir / "trace";
    std::error_code ec;
    fs::remove(trace, ec);
    std::map<std::string, std::string> env{{"LD_PRELOAD", preloadWith(config, library)},
                                           {kFileTraceVariable, trace.string()}};
    if (record) {
      fs::remove_all(record->record_dir, ec);
      fs::create_directories(record->record_dir);
      for (const auto& [name, value] : record->env) env[name] = value;
    }
    const TrialOutcome outcome = oracle.runUncounted(best, env, dir);
    traced = record ? withoutRecorder(readTrace(trace), *record) : readTrace(trace);
    if (record && oracle.sameFailure(outcome)) result.recorded = record->record_dir;
    fs::remove_all(dir, ec);
    fs::remove(trace, ec);
    log.detail("file trace of the minimal case (" + describe(outcome) + "): " + std::to_string(traced.size()) +
               " file(s) read" + (record ? std::string("; the op recorder rode along") : ""));
  }
  result.bundle = planBundle(config, traced, trialPythonPath(config));
  std::string names;
  for (const auto& f : result.bundle.files) names += (names.empty() ? "" : ", ") + f.archive_name;
  if (!result.bundle.files.empty()) log.info("bundled with the archive, read by the trial: " + names);
  return result;
}

TraceResult traceBundle(const CaseConfig& config, TrialOracle& oracle, const Selection& best,
                        const RecorderRide* record, Log& log) {
  try {
    return traceBundleOrThrow(config, oracle, best, record, log);
  } catch (const std::exception& e) {
    // The trace is a help, not the run's result: without it the command's own files still travel.
    log.info(std::string("warning: the files the trial reads could not be traced (") + e.what() +
             "); only trial.files and the command's own files are bundled");
    return {planBundle(config, {}, trialPythonPath(config)), {}};
  }
}

// Why the op step (engine/op_step/op_step.h) does not run on this archive,
// or "" when it does: not asked for, a run that did not end reduced, or a
// non-finite failure whose batch itself holds the NaN or inf (no operator
// made the first one; a call that turns the batch's inf into a NaN would
// point the reader at a consequence).
std::string opStepNotRun(const ArchiveJob& job, ExitStatus status, const ReductionSummary& summary) {
  if (!job.skip_op_step.empty()) return job.skip_op_step;
  if (job.stop && job.stop->load()) return "the run was interrupted";
  if (status == ExitStatus::BudgetSpent) return "the budget was spent";
  if (status != ExitStatus::Reduced) return "the run was interrupted";
  if (summary.signature.family == FailureFamily::NonFinite && !summary.non_finite_inputs.empty())
    return "the batch itself holds the NaN or inf (see the first non-finite value): no operator made the first one";
  return "";
}

}  // namespace

// The neighbour batches , written beside the minimal batch in
// the work directory, with their ids and expected counts.
NeighbourPlan writeNeighbours(const CaseConfig& config, const BatchStore& batch, const Selection& minimal) {
  const std::vector<std::int64_t> lengths = batch.sampleLengths();
  NeighbourPlan plan = planNeighbours(batch.sampleCount(), minimal.samples, lengths.empty() ? nullptr : &lengths);
  const auto ids = batch.sampleIds();
  for (auto& n : plan.cases) {
    const fs::path file = config.work_dir / n.file;
    fs::create_directories(file.parent_path());
    batch.writeSubset(n.samples, file);
    for (auto i : n.samples) n.ids.push_back(ids[static_cast<std::size_t>(i)]);
    n.processed = expectedProcessed(config, file);
  }
  return plan;
}

namespace {

// The neighbours as REPORT.md lists them, and the samples REPORT.html draws.
void addNeighboursAndPanels(ReductionSummary& summary, const CaseConfig& config, const BatchStore& batch,
                            const Selection& minimal, const fs::path& minimal_batch, const NeighbourPlan& neighbours,
                            Log& log) {
  for (const auto& n : neighbours.cases)
    summary.neighbours.push_back("`" + n.file + "`: sample ids " + formatList(n.ids, 16) +
                                 (n.processed ? ", a correct run processes " + std::to_string(*n.processed) : ""));
  for (const auto& why : neighbours.skipped) summary.neighbours.push_back("not made: " + why);
  try {
    summary.panels = collectSamplePanels(config, batch, minimal_batch, minimal.samples);
    for (auto& line : outlierLines(summary.panels)) summary.apart.push_back(std::move(line));
  } catch (const std::exception& e) {  // a picture is not worth the run: REPORT.html then shows none
    log.info("note: REPORT.html shows no samples: " + std::string(e.what()));
  }
}

}  // namespace

ReductionSummary summarize(KeyValues environment, const CaseConfig& config, const BatchStore& batch,
                           const TrialOracle& oracle, const Selection& minimal, const fs::path& minimal_batch,
                           const NeighbourPlan& neighbours, Log& log) {
  ReductionSummary summary;
  if (config.command)
    summary.compile_cache = config.share_compile_cache
                                ? "shared between trials (work_dir/compile-cache), as your own runs share "
                                  "torch.compile's default cache; `trial.compile_cache: fresh` compiles in every "
                                  "trial anew"
                                : "fresh in every trial (trial.compile_cache: fresh)";
  summary.size_line = minimalCaseLine(measureSize(fullSelection(batch), batch), measureSize(minimal, batch), minimal);
  summary.signature = oracle.reference();
  if (const auto own = oracle.ownFailureOf(minimal); own && own->message != summary.signature.message) {
    summary.original_message = summary.signature.message;
    summary.signature.message = own->message;
  }
  summary.exit_description = oracle.firstFailureExit();
  summary.original_samples = batch.sampleCount();
  summary.original_tensors = batch.describe();
  CaseConfig minimal_config = config;
  minimal_config.batch = minimal_batch;
  const auto reduced = BatchStore::open(minimal_config);
  summary.minimal_tensors = reduced->describe();
  summary.small_values = smallValues(*reduced, summary.minimal_tensors);
  const auto ids = batch.sampleIds();
  for (auto i : minimal.samples) summary.kept_ids.push_back(ids[static_cast<std::size_t>(i)]);
  // Read well past what REPORT.md shows: it scrubs the whole text before it
  // cuts it (engine/archive/report.cc).
  constexpr std::size_t kEntryChars = 4096, kEntriesShown = 8;
  for (std::size_t k = 0; k < minimal.samples.size() && summary.kept_entries.size() < kEntriesShown; ++k)
    for (auto& [list, text] : batch.sampleEntries(minimal.samples[k], kEntryChars))
      summary.kept_entries.push_back({summary.kept_ids[k], std::move(list), std::move(text)});
  summary.apart = describeApart(batch.sampleCount(), minimal.samples, summary.kept_ids,
                                perSampleIntegers(config, batch, summary.original_tensors));
  for (auto& line : describeReduction(batch, minimal, ids)) summary.apart.push_back(std::move(line));
  if (summary.signature.family == FailureFamily::NonFinite)
    for (const BatchStore::NonFinite& v : batch.nonFiniteValues(minimal.samples))
      summary.non_finite_inputs.push_back(
          "`" + v.tensor + "`" +
          (v.sample < 0 ? " (kept whole)" : ", sample id " + std::to_string(ids[static_cast<std::size_t>(v.sample)])) +
          ": " + (v.nans ? std::to_string(v.nans) + " NaN" : "") + (v.nans && v.infs ? ", " : "") +
          (v.infs ? std::to_string(v.infs) + " inf" : ""));
  summary.stats = oracle.stats();
  summary.rate = oracle.rate();
  summary.flaky = config.flaky;
  summary.seed = config.seed;
  summary.environment = std::move(environment);
  summary.environment.emplace_back("Trial determinism",
                                   "MINREPRO_SEED=PYTHONHASHSEED=" + std::to_string(config.seed) +
                                       ", MINREPRO_TRIAL=<trial number>, deterministic algorithms " +
                                       (config.deterministic ? "on" : "off"));
  addNeighboursAndPanels(summary, config, batch, minimal, minimal_batch, neighbours, log);
  return summary;
}

// What looks like a secret in the files the archive carries (text files up
// to 2 MiB, the strings of pickles and what compressed files and archives
// of files hold up to 64 MiB: the bundled files, the
// minimal batch and its neighbours, whose per-sample records may hold a
// signed URL or a token; engine/archive/secrets.h) and in its case.yaml
// (a tensor's name, which the batch keys by it), at most 20 lines of it.
std::vector<std::string> secretsIn(const std::vector<BundledFile>& files, const std::string& case_yaml) {
  constexpr std::uintmax_t kMaxTextBytes = std::uintmax_t{2} << 20, kMaxBinaryBytes = std::uintmax_t{64} << 20;
  constexpr std::size_t kListed = 20;
  std::vector<SecretFinding> found = findSecrets(case_yaml, "case.yaml");
  for (const auto& f : files) {
    if (scrubRandomTokens(scrubSecrets(f.archive_name)) != f.archive_name)
      found.push_back({f.archive_name, 0, kSecretInFileName});
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(f.source, ec);
    if (!fs::is_regular_file(f.source, ec) || ec || size > kMaxBinaryBytes) continue;
    // Compressed or packed (creds.json.gz, a .env inside vocab.tar.gz): what it holds, as a binary's
    // strings. A zip is read as it is too: torch.save's stores its pickles uncompressed, behind
    // entries a streaming reader cannot size.
    const auto packed = packedContents(f.source, kMaxBinaryBytes);
    const std::string text = readFileBytes(f.source);
    // Binary (a captured step's state, a model, a batch): the strings its pickles hold.
    const bool binary = text.find('\0') != std::string::npos;
    std::set<std::string> rules;
    if ((!packed || text.starts_with("PK")) && (binary || size <= kMaxTextBytes))
      for (SecretFinding& s : binary ? findSecretsInPickles(text, f.archive_name) : findSecrets(text, f.archive_name)) {
        rules.insert(s.rule);
        found.push_back(std::move(s));
      }
    if (packed)
      for (SecretFinding& s : findSecretsInPickles(*packed, f.archive_name))
        if (!rules.count(s.rule)) found.push_back({s.file, s.line, s.rule, true});
  }
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < found.size() && i < kListed; ++i) lines.push_back(found[i].describe());
  if (found.size() > kListed) lines.push_back("and " + std::to_string(found.size() - kListed) + " more lines");
  return lines;
}

namespace {

void addPhase(const ArchiveJob& job, const std::string& name, double from, const Log& log) {
  if (job.timeline) job.timeline->addPhase({name, from, log.elapsedSeconds()});
}

}  // namespace

ArchiveStep::ArchiveStep(const CaseConfig& config, TrialOracle& oracle, const Selection& best, const ArchiveJob& job,
                         ReductionSummary& summary, Log& log)
    : config_(config), oracle_(oracle), best_(best), job_(job), summary_(summary), log_(log), output_(config.output) {}

ArchiveStep::~ArchiveStep() {
  if (checking_.valid()) checking_.wait();
}

// Where the archive goes when config.output must be left alone: the work
// directory's repro.tar.gz, unless that is the output itself.
std::filesystem::path ArchiveStep::divertedOutput() const {
  const std::filesystem::path beside = config_.work_dir / "repro.tar.gz";
  std::error_code ec;
  return std::filesystem::weakly_canonical(beside, ec) == std::filesystem::weakly_canonical(config_.output, ec)
             ? config_.work_dir / "repro.new.tar.gz"
             : beside;
}

// The archive, with the files the trial reads, written once for the
// self-check and the op step to run; then the self-check started.
void ArchiveStep::write(ExitStatus status) {
  status_ = status;
  const auto stopped = [&] { return job_.stop && job_.stop->load(); };
  const double trace_from = log_.elapsedSeconds();
  const std::string op_not_run = opStepNotRun(job_, status, summary_);
  const bool record = op_not_run.empty() && !job_.recorder.env.empty();
  const TraceResult trace = status == ExitStatus::Interrupted
                                ? TraceResult{planBundle(config_, {}, trialPythonPath(config_)), {}}
                                : traceBundle(config_, oracle_, best_, record ? &job_.recorder : nullptr, log_);
  addPhase(job_, "file trace", trace_from, log_);
  bundle_ = trace.bundle;
  recorded_ = trace.recorded;
  if (bundle_.output_read) {
    // checkArchiveOutput refused the files the command names; this one only the trace saw.
    output_ = divertedOutput();
    log_.info("warning: " + config_.output.string() +
              " (--output) is a file the trial reads, which the archive carries: it is left as it is, and the "
              "archive goes to " +
              output_.string());
  } else if (const std::string taken = outputTakenDuringRun(config_.output, job_.force); !taken.empty()) {
    output_ = divertedOutput();
    log_.info("warning: " + config_.output.string() + " (--output) " + taken +
              " (it appeared while the trials ran): it is left as it is, and the archive goes to " + output_.string());
  }
  if (stopped() && status_ != ExitStatus::Interrupted) {
    status_ = ExitStatus::Interrupted;  // during the file trace: its list may be short
    log_.info("stopping: interrupted while tracing the files the trial reads");
  }
  const double archive_from = log_.elapsedSeconds();
  summary_.bundled_from_outside = bundle_.from_outside;
  summary_.left_out = bundle_.left_out;
  std::vector<BundledFile> carried = bundle_.files;
  carried.push_back({"batch.pt", job_.minimal_batch});
  for (const auto& n : job_.neighbours.cases) carried.push_back({n.file, config_.work_dir / n.file});
  // The command as archived: its switches' choices baked in, with their variables.
  archived_ = withBundledPaths(bakeBranches(config_, best_.branches_off), bundle_);
  if (archived_.command) {
    for (const std::string& name : moveArgumentSecretsToEnv(*archived_.command))
      log_.info("note: argument " + argumentOfSecretVariable(name) +
                " of the trial's command holds a secret: the archive writes it {env:" + name +
                "} (repro.py and the self-check take " + name + " from the environment)");
    // Given to the self-check's runs: an archive's own case run again holds
    // placeholders, whose values come from where this runs.
    withheld_ = withheldValues(*archived_.command);
  }
  for (const auto& [name, value] : withheld_)
    if (argumentOfSecretVariable(name).empty())
      log_.info("note: trial.env." + name + " looks like a secret: the archive leaves its value out (case.yaml says " +
                withheldEnvPlaceholder(name) + "; repro.py takes " + name + " from the environment it runs in)");
  // Searched once the command's secrets are variables: case.yaml as it is archived.
  summary_.secrets_in_files = secretsIn(carried, archivedCaseYaml(shownCase(archived_, scrubContextFor(archived_))));
  for (const auto& line : summary_.secrets_in_files)
    log_.info("warning: the archive carries " + line +
              " verbatim, which looks like a secret; remove it from the "
              "file before you send the archive");
  for (const auto& f : bundle_.files) summary_.bundled.push_back(f.archive_name);
  summary_.self_check.skipped = status_ == ExitStatus::Interrupted   ? "the run was interrupted"
                                : status_ == ExitStatus::BudgetSpent ? "the budget was spent"
                                                                     : job_.skip_self_check;
  summary_.seconds = log_.elapsedSeconds();
  summary_.op.why = op_not_run;
  writeTarGz(output_, archiveEntries(archived_, job_.minimal_batch, summary_, job_.neighbours, bundle_));
  addPhase(job_, "archive", archive_from, log_);
  startSelfCheck();
}

// The self-check's runs of repro.py from the extracted archive need nothing
// the op step makes, and the op step needs only the archive and the file
// trace's record: they run side by side on the --jobs slots. The op step's
// runs of the call alone stand in for the self-check's runs of
// op/repro_op.py: they run its script and inputs as archived (the script's
// comments aside, which scrubbing may change).
void ArchiveStep::startSelfCheck() {
  // An out-of-memory failure's runs go one at a time: two at once on one
  // device would each have less memory than the case had, and could fail
  // for each other.
  const bool memory = oracle_.reference().family == FailureFamily::OutOfMemory;
  slots_ = std::make_unique<JobSlots>(memory ? 1 : job_.jobs);
  const bool op_beside = summary_.op.why.empty();
  // A slot left to the op step's chain of runs while it goes on, which the
  // self-check's independent runs would otherwise hold up.
  bound_ = std::make_unique<JobSlots>(op_beside ? std::max<std::size_t>(1, slots_->size() - 1) : slots_->size());
  checked_from_ = checked_at_ = log_.elapsedSeconds();
  if (!summary_.self_check.skipped.empty()) return;
  log_.info("checking the archive on its own: repro.py in plain processes, extracted into an empty directory" +
            std::string(op_beside ? ", beside the op step" : ""));
  const SelfCheckPlan plan = planSelfCheck(oracle_.rate(), config_.flaky, job_.plain_passes, best_.samples.size());
  // Watched for reading the case's files where they lie here: the bundled
  // files' sources and the user's batch, which a maintainer does not have.
  // The Python the runs use is the user's, run where it lies (a wrapper in
  // the case's bin/ reads what lies beside it): not a case file read there.
  std::vector<fs::path> originals = {config_.batch};
  std::error_code ec;
  const fs::path interpreter_dir = fs::weakly_canonical(fs::path(job_.python), ec).parent_path();
  for (const auto& f : bundle_.files)
    if (f.source.parent_path() != interpreter_dir) originals.push_back(f.source);
  const SelfCheckWatch watch =
      watchTheCase(config_.command ? fileTraceLibrary() : std::string(), originals, job_.python);
  checking_ = std::async(std::launch::async, [this, plan, watch] {
    SelfCheck check = checkArchiveAlone(output_, plan, job_.python, config_.timeout, job_.stop,
                                        {bound_.get(), slots_.get()}, withheld_, watch);
    checked_at_ = log_.elapsedSeconds();
    return check;
  });
}

std::optional<OpStart> ArchiveStep::opStart() {
  if (!summary_.op.why.empty()) return std::nullopt;
  return OpStart{output_, recorded_, slots_.get(), withheld_};
}

void ArchiveStep::opStepDone(OpStepResult result) {
  summary_.op = std::move(result);
  if (slots_->size() > 1) bound_->grow();  // its slot is the self-check's now
}

// The self-check's verdict, then the archive written again with it and the
// op step's outcome.
ExitStatus ArchiveStep::finish() {
  if (checking_.valid()) {
    summary_.self_check = checking_.get();
    if (job_.timeline) job_.timeline->addPhase({"self-check", checked_from_, checked_at_});
    if (summary_.op.status == OpStepStatus::Made) {
      summary_.self_check.op_runs = summary_.op.alone_runs;
      summary_.self_check.op_reproduced = summary_.op.alone_failed;
    }
    if (job_.confirmation_is_self_check) {
      // Runs that failed for want of what the archive lacks say nothing of
      // the minimal case in a plain process: no search again, no blame on the batch.
      summary_.confirmed = summary_.self_check.passed() || summary_.self_check.lostToWhatTheArchiveLacks();
      summary_.confirmed_by_self_check = true;
    }
  }
  if (job_.stop && job_.stop->load()) status_ = ExitStatus::Interrupted;
  log_.info(std::string(summary_.incomplete.empty() ? "reduced " : "stopped at ") +
            std::to_string(summary_.original_samples) + " -> " + std::to_string(best_.samples.size()) +
            " samples (ids " + formatList(summary_.kept_ids) + ") in " +
            std::to_string(summary_.stats.trials + summary_.stats.replayed) + " trials; archive: " + output_.string());
  std::error_code ec;
  log_.info("memory: minrepro's own peak " + formatMegabytes(ownPeakMemoryBytes()) + " for a batch file of " +
            formatMegabytes(fs::file_size(config_.batch, ec)) +
            "; candidate files written: " + formatMegabytes(summary_.stats.bytes_written));
  log_.info("self-check: the archive " + summary_.self_check.describe());
  summary_.seconds = log_.elapsedSeconds();
  summary_.stats = oracle_.stats();
  for (const std::string& line : timeAccount(summary_)) log_.info("time: " + line);
  writeTarGz(output_, archiveEntries(archived_, job_.minimal_batch, summary_, job_.neighbours, bundle_));
  if (summary_.self_check.failed() && status_ == ExitStatus::Reduced) status_ = ExitStatus::ArchiveDoesNotReproduce;
  return status_;
}

}  // namespace minrepro
