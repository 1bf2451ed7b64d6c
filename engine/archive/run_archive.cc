#include "engine/archive/run_archive.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/disk_space.h"
#include "core/errors.h"
#include "core/text_lines.h"
#include "engine/archive/scrub.h"
#include "engine/archive/seal.h"
#include "engine/archive/self_check.h"
#include "engine/archive/tar_gz.h"
#include "engine/diagnostics.h"
#include "engine/format_list.h"
#include "engine/timeline.h"

namespace fs = std::filesystem;

namespace minrepro {

int VerifyResult::asExpected() const {
  int n = 0;
  for (const auto& r : runs) n += r.as_expected;
  return n;
}

int VerifyResult::opAsExpected() const {
  int n = 0;
  for (const auto& r : op_runs) n += r.as_expected;
  return n;
}

int VerifyResult::neighboursAsExpected() const {
  int n = 0;
  for (const auto& r : neighbour_runs) n += r.as_expected;
  return n;
}

FlakyJudgement judgeFlakyRuns(const std::vector<RunResult>& runs, double rate, double alpha) {
  FlakyJudgement j;
  for (const auto& r : runs) {
    if (r.as_expected)
      ++j.same;
    else if (r.signature.failed())
      ++j.other;
    else
      ++j.passed;
  }
  j.reproduces = j.same > 0 && j.other == 0;
  const double p = std::clamp(rate, 1e-6, 1.0);
  j.runs_needed = p >= 1 ? 1 : static_cast<int>(std::ceil(std::log(alpha) / std::log1p(-p)));
  j.conclusive = j.same > 0 || j.other > 0 || static_cast<int>(runs.size()) >= j.runs_needed;
  return j;
}

std::string FlakyJudgement::describe(double rate) const {
  std::ostringstream out;
  out << std::setprecision(2) << "a flaky failure (recorded rate " << rate << "): " << same
      << " run(s) failed as recorded, " << passed << " passed, " << other << " failed another way; ";
  if (other > 0)
    out << "a run that fails another way is another bug showing: not as recorded";
  else if (same > 0)
    out << "consistent with the recorded rate";
  else if (conclusive)
    out << "a faithful archive would have failed at least once: it does not reproduce";
  else
    out << "inconclusive: " << runs_needed << " runs would tell (--runs " << runs_needed << ")";
  return out.str();
}

namespace {

// The manifest of an archive extracted under `dir` (its entries' `names`).
Manifest readManifest(const fs::path& dir, const std::vector<std::string>& names, const VerifyOptions& o) {
  const std::string name = o.archive.string();
  const auto has = [&](const std::string& entry) {
    return std::find(names.begin(), names.end(), fs::path(entry).lexically_normal().string()) != names.end();
  };
  if (!has("repro.py")) throw BadInputError(name + ": no repro.py in the archive: not a minrepro reproducer");
  if (!has("signature.txt"))
    throw BadInputError(name +
                        ": no signature.txt in the archive (made before minrepro verify existed?); "
                        "run minrepro shrink --config case.yaml again on its case to record one");
  Manifest m = readManifestFile(dir / "signature.txt", name + ":signature.txt");
  if (!m.op_repro.empty() && !has(m.op_repro))
    throw BadInputError(name + ": signature.txt names the op-level reproducer '" + m.op_repro +
                        "', which the archive lacks");
  for (const auto& n : m.neighbours) {
    if (!has(n.file))
      throw BadInputError(name + ": signature.txt names the neighbour batch '" + n.file + "', which the archive lacks");
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

// After a fix: exit 0 is not enough; the run must have processed every
// sample, when the archive knows how many (the built-in harness). A trial
// command's program prints what it likes: exit 0 is all there is to check.
void judgePass(RunResult& r, std::optional<std::int64_t> known) {
  if (!r.outcome.passed()) {
    r.detail = "still fails: " + r.signature.summary() + " (" + describe(r.outcome) + ")";
    return;
  }
  if (!known) {
    r.as_expected = true;
    r.detail = "passed: exit 0 (a trial command's program: the archive records no sample count to check)";
    return;
  }
  const std::int64_t expected = *known;
  const auto line = readResultLine(r.outcome.stdout_text);
  if (!line || !line->processed) {
    r.detail = "exited 0 but printed no 'minrepro-result: processed=N' line";
    return;
  }
  const std::string counts =
      "processed " + std::to_string(*line->processed) + " of " + std::to_string(expected) + " expected samples";
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

// This machine's names, and the values of the variables the recorded
// message names as withheld (<secret:env-NAME>): given to the runs (the
// self-check) or set where verify runs (the maintainer), a run that prints
// one prints what the record says in its place.
ScrubContext runScrubContext(const Manifest& m, const std::map<std::string, std::string>& env) {
  ScrubContext scrub = machineScrubContext();
  static const std::regex kWithheld(R"(<secret:env-([A-Za-z_][A-Za-z0-9_]*)>)");
  for (std::sregex_iterator it(m.signature.message.begin(), m.signature.message.end(), kWithheld), end; it != end;
       ++it) {
    const std::string name = (*it)[1].str();
    const auto given = env.find(name);
    const char* set = std::getenv(name.c_str());
    const std::string value = given != env.end() ? given->second : set ? set : "";
    if (value.size() >= 4) scrub.secrets.emplace_back(value, withheldEnvPlaceholder(name));
  }
  return scrub;
}

}  // namespace

SignatureMatch matchRecorded(const Manifest& m, FailureSignature run, const std::map<std::string, std::string>& env) {
  // The archive quotes the message scrubbed of names, paths and secrets:
  // both are scrubbed alike before they are compared (an archive made
  // before the scrubbing quotes it raw). A user's pattern matched the raw
  // message in the trials, and still does.
  const ScrubContext scrub = runScrubContext(m, env);
  if (m.message_pattern.empty()) run.message = scrubText(run.message, scrub);
  FailureSignature recorded = m.signature;
  if (m.message_pattern.empty()) recorded.message = scrubText(recorded.message, scrub);
  if (!m.compare_operator) recorded.op.clear();
  // An archive made before signal names were recorded: any fatal signal.
  if (recorded.family == FailureFamily::Signal && recorded.signal_name.empty()) recorded.signal_name = run.signal_name;
  ExpectedFailure expected;
  expected.message_regex = m.message_pattern;
  expected.any_ending = !m.compare_ending;
  return matchSignature(recorded, run, expected);
}

namespace {

void judgeFail(RunResult& r, const Manifest& m, const VerifyOptions& o) {
  if (!r.signature.failed()) {
    r.detail = "did not reproduce: the run passed (" + describe(r.outcome) + ")";
    return;
  }
  const SignatureMatch match = matchRecorded(m, r.signature, o.env);
  r.as_expected = match.matches;
  r.detail = (match.matches ? "reproduced: " : "did not reproduce (" + match.why_not + "): ") + r.signature.summary() +
             " (" + describe(r.outcome) + ")";
}

// One plain run of a script of the extracted archive with `o.python`, the
// diagnostic variables removed, in a directory of its own beside it.
TrialOutcome runScript(const VerifyOptions& o, Executor& executor, std::vector<std::string> script_and_args,
                       const fs::path& work_dir) {
  TrialSpec spec;
  spec.argv = {o.python};
  for (auto& a : script_and_args) spec.argv.push_back(std::move(a));
  spec.env_unset = diagnosticVariables();
  spec.env_unset.insert(spec.env_unset.end(), o.env_unset.begin(), o.env_unset.end());
  spec.env_set = o.env;
  spec.work_dir = work_dir;
  spec.timeout = o.timeout;
  spec.cancel = o.cancel;
  TrialOutcome outcome = executor.run(spec);
  if (outcome.end == TrialEnd::FailedToStart && outcome.start_error.rfind("bwrap: ", 0) == 0 &&
      outcome.start_error.rfind("bwrap: execvp ", 0) != 0)
    throw TrialStartError("the sandbox could not be made: " + text::printable(outcome.start_error) +
                          "; check PYTHONPATH, LD_LIBRARY_PATH and LD_PRELOAD for entries under /tmp that lead "
                          "through a link to /tmp itself, or run with --sandbox off for an archive you trust");
  if (outcome.end == TrialEnd::FailedToStart)
    throw BadInputError("cannot start " + o.python + ": " + outcome.start_error +
                        "; give a Python with PyTorch "
                        "with --python");
  // A run whose directory's file system filled up lost what it wrote (its
  // traceback, a file it saved): its ending is no verdict on the archive,
  // as a full disk during extraction is none (probe 30: "reproduced in 0
  // of 2 runs", exit 1, with a TMPDIR on a small tmpfs).
  if (outcome.end != TrialEnd::Cancelled)
    requireRoomAfterRun(work_dir, "a run of " + fs::path(spec.argv[1]).filename().string());
  return outcome;
}

// A run's detail quotes its message, printed to a terminal and a CI log
// as verify's and regress's lines: a token or a URL's password the run
// printed is scrubbed there as shrink's own lines are (probe 25).
RunResult withSecretsScrubbed(RunResult r) {
  r.detail = scrubSecretsOnly(r.detail, machineScrubContext());
  return r;
}

// `neighbour` null: the minimal batch (repro.py's default); else repro.py
// is given the neighbour's batch and judged against its own count.
RunResult runOnce(const fs::path& dir, int index, const VerifyOptions& o, const Manifest& m, Executor& executor,
                  const NeighbourCase* neighbour = nullptr) {
  std::vector<std::string> args{(dir / "repro.py").string()};
  if (neighbour) args.push_back((dir / fs::path(neighbour->file).lexically_normal()).string());
  RunResult r;
  if (neighbour) r.neighbour = neighbour->name;
  r.outcome = runScript(o, executor, std::move(args), dir.parent_path() / ("run-" + std::to_string(index)));
  r.signature = classify(r.outcome);
  if (o.expect == Expect::Pass)
    judgePass(r, neighbour ? neighbour->processed : m.processed);
  else
    judgeFail(r, m, o);
  return withSecretsScrubbed(std::move(r));
}

// op/repro_op.py once: the call alone fails like the case, the operator
// aside (it is called directly, not from the program); after a fix it exits 0.
RunResult judgedOpRun(const fs::path& dir, int index, const VerifyOptions& o, const Manifest& m, Executor& executor) {
  RunResult r;
  r.neighbour = m.op_repro;
  r.outcome = runScript(o, executor, {(dir / fs::path(m.op_repro).lexically_normal()).string()},
                        dir.parent_path() / ("op-run-" + std::to_string(index)));
  r.signature = classify(r.outcome);
  if (o.expect == Expect::Pass) {
    r.as_expected = r.outcome.passed();
    r.detail = m.op_repro + (r.as_expected ? " passed"
                                           : " still fails: " + r.signature.summary() + " (" + describe(r.outcome) +
                                                 "; not judged: it passes only after a fix in PyTorch itself)");
    return r;
  }
  if (m.signature.family == FailureFamily::NonFinite) {
    // The call names its NaN or inf in its own words ("log.default returned
    // 0 NaN and 1 inf values"), not in the program's ("loss is nan"): the
    // family is what it must show, as the op step checked it.
    r.as_expected = r.signature.family == FailureFamily::NonFinite;
    r.detail =
        m.op_repro +
        (r.as_expected ? " reproduced: "
                       : " did not reproduce (family " + familyName(r.signature.family) + ", expected non-finite): ") +
        r.signature.summary() + " (" + describe(r.outcome) + ")";
    return r;
  }
  // The call raises in Python what the program may have died of (an
  // uncaught C++ error's abort), and is called directly, not from the
  // program: its ending and its operator are not compared.
  Manifest op_manifest = m;
  op_manifest.compare_operator = false;
  op_manifest.compare_ending = false;
  judgeFail(r, op_manifest, o);
  r.detail = m.op_repro + " " + r.detail;
  return r;
}

RunResult runOpOnce(const fs::path& dir, int index, const VerifyOptions& o, const Manifest& m, Executor& executor) {
  return withSecretsScrubbed(judgedOpRun(dir, index, o, m, executor));
}

void printRun(std::ostream* progress, const std::string& what, const RunResult& r) {
  if (!progress) return;
  *progress << "  " << what << ": " << r.detail << " in " << std::fixed << std::setprecision(1)
            << r.outcome.duration.count() / 1000.0 << " s\n"
            << std::flush;
}

}  // namespace

namespace {

// The archive's files that are the user's code or data (what the trial
// read), not minrepro's own: those --code may replace.
bool isBundledUserFile(const std::string& name) {
  static const std::set<std::string> kOwn = {"repro.py", "signature.txt", "case.yaml",      "REPORT.md", "REPORT.html",
                                             "batch.pt", "repro.cpp",     "CMakeLists.txt", "model.pt"};
  return !kOwn.count(name) && name.rfind("neighbours/", 0) != 0 && name.rfind("op/", 0) != 0;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Whether an archive made elsewhere may have --code copy the user's file of
// this name in: source code, no hidden part. A stranger's archive naming
// ".git-credentials" or ".ssh/id_rsa" had `--code ~` copy them into the
// sandboxed run, which printed them back (probe 25); an archive sealed by
// this user names what its own run read.
bool codeFileName(const std::string& name) {
  static const std::set<std::string> kCode = {".py",  ".pyi", ".pyx", ".c",  ".cc",  ".cpp",
                                              ".cxx", ".h",   ".hpp", ".cu", ".cuh", ".sh"};
  for (const auto& part : fs::path(name))
    if (part.string().front() == '.') return false;
  return kCode.count(fs::path(name).extension().string()) > 0;
}

// Where DIR holds the bundled file `name`: DIR/name, or for a file from
// outside the case directory, bundled as external/<its directory's name>/X,
// DIR/X when DIR is that directory (`--code .` from where the training
// script lives, as the guide has it; a new user had to copy their files
// into DIR/external/cap/ first).
fs::path codePathOf(const fs::path& code_dir, const std::string& name) {
  const fs::path path(name);
  auto part = path.begin();
  if (path.begin() == path.end() || *part != "external" || ++part == path.end()) return path;
  std::error_code ec;
  const fs::path dir_name = fs::weakly_canonical(code_dir, ec).filename();
  if (*part != dir_name || fs::exists(code_dir / path, ec)) return path;
  fs::path rest;
  for (++part; part != path.end(); ++part) rest /= *part;
  return rest.empty() ? path : rest;
}

// --code: the user's current files over the bundled copies of the same names.
void replaceBundledCode(const fs::path& dir, const std::vector<std::string>& names, const VerifyOptions& o, bool sealed,
                        std::ostream* progress) {
  if (o.code_dir.empty()) return;
  std::error_code ec;
  if (!fs::is_directory(o.code_dir, ec)) throw BadInputError(o.code_dir.string() + ": --code: not a directory");
  std::vector<std::string> replaced, bundled;
  for (const auto& name : names) {
    if (!isBundledUserFile(name) || !fs::is_regular_file(dir / name, ec)) continue;
    if (!sealed && !codeFileName(name)) continue;
    // For a stranger's archive, the file itself under DIR, through no link: a
    // link to a hidden file (probe 26), or a directory of DIR that is a link
    // to ~/.ssh (probe 28), would carry what lies elsewhere into the run.
    const fs::path own_name = codePathOf(o.code_dir, name), mine = o.code_dir / own_name;
    if (!sealed &&
        fs::weakly_canonical(mine, ec) != (fs::weakly_canonical(o.code_dir, ec) / own_name.lexically_normal()))
      continue;
    bundled.push_back(name);
    if (!fs::is_regular_file(mine, ec)) continue;
    // A hard link is another name of a file that may lie anywhere (probe 30:
    // code/hard.py for ~/hardsecret.txt): never for a stranger's archive.
    if (!sealed && fs::hard_link_count(mine, ec) != 1) continue;
    fs::copy_file(mine, dir / name, fs::copy_options::overwrite_existing);
    replaced.push_back(name);
  }
  // The names are the archive's: a token as a file name is scrubbed (probe 30).
  const auto scrubbed = [](const std::vector<std::string>& names) {
    return scrubSecretsOnly(text::printable(joinNames(names)), machineScrubContext());
  };
  if (replaced.empty())
    throw BadInputError(o.code_dir.string() + ": --code: holds none of the archive's bundled files (" +
                        (bundled.empty() ? std::string("it bundles none") : scrubbed(bundled)) +
                        "), relative to the directory given");
  if (progress) *progress << "your code from " << o.code_dir.string() << " replaces: " << scrubbed(replaced) << "\n";
}

}  // namespace

namespace {

// The runs of repro.py, and of op/repro_op.py beside the first `op_runs`,
// on the slots given (or --jobs of its own), kept in run order; runs not
// started when the caller cancels are left out.
void runAll(const fs::path& dir, const VerifyOptions& o, VerifyResult& result, Executor& executor,
            std::ostream* progress) {
  const bool op = !result.manifest.op_repro.empty();
  const int op_runs = !op ? 0 : o.op_runs < 0 ? o.runs : std::min(o.op_runs, o.runs);
  const std::size_t total = static_cast<std::size_t>(o.runs + op_runs);
  std::vector<RunResult> done(total);
  std::mutex print;
  // At most o.jobs at once, each also holding one of the caller's slots
  // when given (shrink's op step may hold the others).
  JobSlots own(o.jobs);
  std::vector<bool> ran;
  runInSlots(
      total, o.bound ? *o.bound : own,
      [&](std::size_t k) {
        std::optional<JobSlots::Held> shared;
        if (o.slots) shared.emplace(*o.slots);
        const bool is_op = k >= static_cast<std::size_t>(o.runs);
        const int i = static_cast<int>(is_op ? k - static_cast<std::size_t>(o.runs) : k) + 1;
        done[k] =
            is_op ? runOpOnce(dir, i, o, result.manifest, executor) : runOnce(dir, i, o, result.manifest, executor);
        // Killed by the interruption: no outcome of its own to judge (the
        // command gives no verdict), not "did not reproduce (cancelled)".
        if (done[k].outcome.end == TrialEnd::Cancelled)
          done[k].detail = (is_op ? result.manifest.op_repro + " " : std::string()) +
                           "not judged: stopped by the interruption before it ended";
        std::lock_guard<std::mutex> lock(print);
        printRun(progress,
                 (is_op ? result.manifest.op_repro + " " : std::string("run ")) + std::to_string(i) + "/" +
                     std::to_string(o.runs),
                 done[k]);
      },
      [&] { return o.cancelled(); }, &ran);
  for (std::size_t k = 0; k < total; ++k)
    if (ran[k]) (k < static_cast<std::size_t>(o.runs) ? result.runs : result.op_runs).push_back(std::move(done[k]));
}

}  // namespace

VerifyResult verifyArchive(const VerifyOptions& given, std::ostream* progress, Executor* executor) {
  if (given.runs < 1) throw BadInputError("--runs must be at least 1, found " + std::to_string(given.runs));
  // Streamed into a scratch directory, removed whatever happens; a refused
  // archive leaves nothing there even before that.
  ScratchDir tree("minrepro-verify");
  const fs::path dir = tree.path() / "repro";
  bool directory_entries = false;
  const std::vector<std::string> names = extractArchive(given.archive, dir, given.max_entry_bytes,
                                                        given.max_total_bytes, kMaxArchiveEntries, &directory_entries);
  VerifyResult result;
  result.manifest = readManifest(dir, names, given);
  VerifyOptions o = given;
  // A recorded hang's limit only, and never longer than --timeout's default:
  // an archive's 86400 held each run a day (probe 26).
  const bool hang_limit =
      !o.timeout_given && result.manifest.trial_timeout_s && result.manifest.signature.family == FailureFamily::Timeout;
  if (hang_limit)
    o.timeout =
        std::min(o.timeout, std::chrono::milliseconds(static_cast<long long>(*result.manifest.trial_timeout_s * 1000)));
  // Before anything of the archive runs, and before --code replaces files:
  // the seal covers the archive as it came.
  // Shrink writes no directory entries: an archive with one was repacked,
  // and its seal speaks for files only (probe 32).
  const bool sealed = !directory_entries && sealedByThisUser(dir, names);
  if (o.choose_python) {
    result.torch = chooseArchiveTorch(result.manifest.python, result.manifest.torch,
                                      o.python_given ? std::optional<std::string>(o.python) : std::nullopt, o.python,
                                      tree.path() / "torch-probe", sealed);
    o.python = result.torch.python;
    if (progress && result.torch.checked)  // --python's path may hold a token (probe 31)
      *progress << scrubSecretsOnly(result.torch.line, machineScrubContext()) << "\n";
  }
  const bool made_here = o.sandbox == SandboxMode::Auto && sealed;
  replaceBundledCode(dir, names, o, sealed, progress);
  result.op_runs_judged = o.expect == Expect::Fail;
  result.sandbox = chooseSandbox(o.sandbox, made_here);
  if (progress)
    *progress << "verify " << text::printableInLine(o.archive.string()) << ": " << result.sandbox.describe << "; "
              << o.runs << " run(s) of repro.py, each a fresh process, diagnostic variables removed"
              << (hang_limit
                      ? ", each given the recorded trial timeout, " +
                            secondsText(static_cast<double>(o.timeout.count()) / 1000) + " s (--timeout overrides)"
                      : std::string())
              << "\n";
  LocalExecutor plain;
  std::optional<SandboxedExecutor> sandboxed;
  if (result.sandbox.used)
    sandboxed.emplace(executor ? *executor : plain, dir, *findBubblewrap(), archiveKeyDirectories(),
                      inheritedByArchiveRuns);
  Executor& local = sandboxed ? static_cast<Executor&>(*sandboxed) : plain;
  if (sandboxed) executor = nullptr;  // every run goes through the sandbox
  runAll(dir, o, result, executor ? *executor : local, progress);
  // After a fix, the neighbour batches must pass too (docs/method.md, "Neighbour cases"): one
  // fresh run each, with the count recorded for that batch.
  if (o.expect == Expect::Pass) {
    int index = o.runs;
    for (const auto& n : result.manifest.neighbours) {
      if (o.cancelled()) break;  // a signal: no run starts, no verdict is printed (runVerify exits 130)
      RunResult run = runOnce(dir, ++index, o, result.manifest, executor ? *executor : local, &n);
      if (o.cancelled()) break;  // the run was stopped: it has no verdict either
      result.neighbour_runs.push_back(std::move(run));
      if (progress) {
        *progress << "  neighbour " << scrubSecretsOnly(text::printableInLine(n.name), machineScrubContext())
                  << " (ids " << formatList(n.ids, 8) << "): " << result.neighbour_runs.back().detail << " in "
                  << std::fixed << std::setprecision(1)
                  << result.neighbour_runs.back().outcome.duration.count() / 1000.0 << " s\n"
                  << std::flush;
      }
    }
    if (progress && !o.cancelled())
      for (const auto& why : result.manifest.neighbours_skipped) *progress << "  neighbour not made: " << why << "\n";
  }
  return result;
}

}  // namespace minrepro
