#include "engine/archive/self_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <regex>
#include <set>

#include "core/process/sandbox.h"
#include "core/text_lines.h"
#include "engine/archive/bundle.h"
#include "engine/archive/run_archive.h"
#include "engine/archive/scrub.h"
#include "engine/archive/tar_gz.h"

extern char** environ;

namespace minrepro {

bool SelfCheck::passed() const {
  if (!ran || !error.empty() || runs == 0 || touchedTheCase()) return false;
  const bool op_ok = require_every_run ? op_reproduced == op_runs : op_runs == 0 || op_reproduced > 0;
  // A flaky archive by the rule verify applies too (judgeFlakyRuns): one run failing as recorded, none otherwise.
  return op_ok && other_failures == 0 && (require_every_run ? reproduced == runs : reproduced > 0);
}

bool SelfCheck::failed() const {
  return ran && error.empty() && runs > 0 && !passed() &&
         (require_every_run || conclusive || other_failures > 0 || touchedTheCase());
}

std::string SelfCheck::failedWhy() const {
  std::string why = std::to_string(reproduced) + " of " + std::to_string(runs) +
                    " runs of repro.py in an empty directory failed as recorded";
  if (!originals_read.empty())
    why += "; the runs read " + std::to_string(originals_read.size()) +
           " file(s) of the case at their place on the machine that made it";
  if (!places_touched.empty())
    why += "; the runs looked at " + std::to_string(places_touched.size()) +
           " path(s) beside the case's files there that the archive does not carry";
  if (!missing_file.empty()) why += "; a run could not find a file the archive does not carry";
  return why;
}

std::string SelfCheck::describe() const {
  if (!ran) return "was not checked on its own (" + skipped + "): run `minrepro verify` on it";
  if (!error.empty()) return "could not be checked: " + error;
  const std::string how =
      std::string(" (plain processes, extracted into an empty directory, no diagnostic variables; ") +
      (require_every_run ? "every run must fail" : "a flaky failure: at least one, none failing another way") + ")";
  const std::string counted = std::to_string(reproduced) + " of " + std::to_string(runs) + " runs of repro.py";
  // Runs that failed like the case by reading the user's files did not
  // reproduce it on its own: say both, not "did not reproduce in 3 of 3".
  std::string text = passed()                             ? "reproduced on its own in " + counted + how
                     : touchedTheCase() && reproduced > 0 ? "did NOT reproduce on its own: " + counted + how +
                                                                " failed like the case, but by reading what the "
                                                                "archive does not carry"
                                                          : "did NOT reproduce on its own in " + counted + how;
  if (!failed() && !passed()) text += "; inconclusive: a failure this rare can pass 30 runs of a faithful archive";
  if (op_runs > 0)
    text += "; op/repro_op.py failed like the case in " + std::to_string(op_reproduced) + " of " +
            std::to_string(op_runs) + " runs";
  if (other_failures > 0) text += "; " + std::to_string(other_failures) + " run(s) failed another way";
  if (!first_difference.empty()) text += "; first run that did not: " + first_difference;
  if (!missing_file.empty()) text += "; it could not find " + missing_file + " (add it with trial.files)";
  if (!originals_read.empty()) {
    text += "; the runs read " + std::to_string(originals_read.size()) +
            " file(s) of the case at their place on this machine, by a path the archive cannot redirect, which a "
            "maintainer does not have: ";
    for (std::size_t i = 0; i < originals_read.size() && i < 5; ++i) text += (i ? ", " : "") + originals_read[i];
    text +=
        " (open them relative to the script, os.path.dirname(os.path.abspath(__file__)), or name them in the "
        "command as {case_dir}/NAME)";
  }
  if (!places_touched.empty()) {
    text += "; the runs looked at " + std::to_string(places_touched.size()) +
            " path(s) beside the case's files on this machine that the archive does not carry (a file whose "
            "existence was asked, a directory listed), which a maintainer does not have: ";
    for (std::size_t i = 0; i < places_touched.size() && i < 5; ++i) text += (i ? ", " : "") + places_touched[i];
    if (places_touched.size() > 5) text += " and " + std::to_string(places_touched.size() - 5) + " more";
    text +=
        " (carry a file with trial.files and name it relative to the script, "
        "os.path.dirname(os.path.abspath(__file__)))";
  }
  // The variables the runs lacked only when nothing else explains the
  // failure: a list of a dozen CA bundles' names beside a file the runs
  // read at its place hides the cause.
  if (!passed() && !not_given.empty() && !touchedTheCase() && missing_file.empty()) {
    constexpr std::size_t kNamed = 12;
    text += "; the runs did not get what the archive does not carry: ";
    for (std::size_t i = 0; i < not_given.size() && i < kNamed; ++i) text += (i ? ", " : "") + not_given[i];
    if (not_given.size() > kNamed) text += " and " + std::to_string(not_given.size() - kNamed) + " more";
    text +=
        " (a step that needs a variable: set it in trial.env; code outside the case directory: import it "
        "from a directory on PYTHONPATH, or name it with trial.files)";
  }
  return text;
}

SelfCheckPlan planSelfCheck(const FailureRate& rate, const FlakyOptions& flaky, std::size_t plain_passes,
                            std::size_t size) {
  SelfCheckPlan plan;
  if (!flaky.enabled || (rate.passes() == 0 && plain_passes == 0)) return plan;
  // Enough runs that a faithful archive of a failure with this rate (at the
  // minimal case's size) fails at least once with probability 1 - alpha: the
  // same rule as a rejection, at most 30 runs.
  constexpr std::size_t kMaxRuns = 30;
  const std::size_t needed = rate.passesToReject(flaky.alpha, flaky.max_passes, size);
  plan.require_every_run = false;
  plan.runs = static_cast<int>(std::clamp<std::size_t>(needed, 3, kMaxRuns));
  plan.conclusive = needed <= kMaxRuns;
  return plan;
}

std::string missingFileIn(const std::string& output) {
  static const std::regex kPatterns[] = {
      std::regex(R"(No such file or directory: '([^']+)')"),
      std::regex(R"(The provided filename (\S+) does not exist)"),
      std::regex(R"(open file failed[^\n]*?file name: ?(\S+))"),
  };
  // The last match: a traceback quotes the raising source line first
  // ("The provided filename {} does not exist".format(f)), the message after.
  for (const auto& pattern : kPatterns) {
    std::string last;
    for (auto it = std::sregex_iterator(output.begin(), output.end(), pattern); it != std::sregex_iterator(); ++it)
      if ((*it)[1].str().find('{') == std::string::npos) last = (*it)[1].str();
    if (!last.empty()) return last;
  }
  return "";
}

namespace {

// A PYTHONPATH directory of the environment rather than the user's code:
// installed packages, or a torch found there (a source build's).
bool environmentDirectory(const std::filesystem::path& dir) {
  const std::string text = dir.string();
  std::error_code ec;
  return text.find("site-packages") != std::string::npos || text.find("dist-packages") != std::string::npos ||
         std::filesystem::exists(dir / "torch" / "__init__.py", ec);
}

// What any machine's environment has, which the self-check's runs keep:
// the system's and the user's basics, the locale, temporary directories,
// the GPU's and the math libraries' settings, the Python environment in
// use. A variable of the user's own (MY_FLAG=4 in the shell) is not among
// them: a maintainer does not have it either.
bool machineVariable(const std::string& name) {
  static const std::set<std::string> kNames{"PATH",
                                            "HOME",
                                            "USER",
                                            "LOGNAME",
                                            "SHELL",
                                            "LANG",
                                            "LANGUAGE",
                                            "TERM",
                                            "TZ",
                                            "TMPDIR",
                                            "TMP",
                                            "TEMP",
                                            "PWD",
                                            "LD_LIBRARY_PATH",
                                            "LD_PRELOAD",
                                            "VIRTUAL_ENV",
                                            "PYTHONHOME",
                                            "PYTHONNOUSERSITE",
                                            "PYTHONIOENCODING",
                                            "PYTHONUTF8",
                                            "PYTHONDONTWRITEBYTECODE",
                                            "PYTHONUNBUFFERED",
                                            "SSL_CERT_FILE",
                                            "SSL_CERT_DIR",
                                            "XDG_CACHE_HOME",
                                            "XDG_RUNTIME_DIR",
                                            "_",
                                            "SHLVL",
                                            "OLDPWD"};
  static const std::vector<std::string> kPrefixes{"LC_",  "CUDA_", "NVIDIA_", "HIP_", "ROCR_",     "ROCM_",
                                                  "HSA_", "OMP_",  "MKL_",    "KMP_", "OPENBLAS_", "CONDA_"};
  if (kNames.contains(name)) return true;
  return std::any_of(kPrefixes.begin(), kPrefixes.end(), [&](const std::string& p) { return name.starts_with(p); });
}

// What the self-check's runs do not inherit from this process (see
// checkArchiveAlone), recorded in `check.not_given`; sets or unsets
// PYTHONPATH in `options`.
void leaveOutWhatTheArchiveDoesNotCarry(VerifyOptions& options, SelfCheck& check) {
  if (const char* inherited = std::getenv("PYTHONPATH"); inherited != nullptr && options.env.count("PYTHONPATH") == 0) {
    std::string kept;
    for (const std::string& dir : text::searchPathEntries(inherited)) {
      if (environmentDirectory(dir))
        kept += (kept.empty() ? "" : ":") + dir;
      else
        check.not_given.push_back("PYTHONPATH's " + dir);
    }
    if (kept.empty())
      options.env_unset.push_back("PYTHONPATH");
    else
      options.env["PYTHONPATH"] = kept;
  }
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string pair(*entry);
    const std::string name = pair.substr(0, pair.find('='));
    if (name == "PYTHONPATH" || options.env.count(name) != 0) continue;
    if (!inheritedByArchiveRuns(name)) {
      options.env_unset.push_back(name);
      check.not_given.push_back(name);
    }
  }
}

// The runs traced (bundle.h's tracer, beside any LD_PRELOAD of the machine's)
// into `trace`.
void watchWhatTheRunsRead(VerifyOptions& options, const SelfCheckWatch& watch, const std::filesystem::path& trace) {
  if (watch.trace_library.empty()) return;
  std::string places;
  for (const auto& place : watch.places)
    if (place.string().find_first_of(":\n") == std::string::npos)
      places += (places.empty() ? "" : ":") + place.string();
  if (!places.empty()) options.env[kFileTraceWatchVariable] = places;
  const char* inherited = std::getenv("LD_PRELOAD");
  options.env["LD_PRELOAD"] =
      std::string(inherited && *inherited ? std::string(inherited) + ":" : "") + watch.trace_library;
  options.env[kFileTraceVariable] = trace.string();
}

bool atOrUnder(const std::filesystem::path& path, const std::vector<std::filesystem::path>& dirs) {
  return std::any_of(dirs.begin(), dirs.end(), [&](const std::filesystem::path& dir) {
    const std::string d = dir.string(), p = path.string();
    return p.rfind(d, 0) == 0 && (p.size() == d.size() || p[d.size()] == '/' || d == "/");
  });
}

// What the runs read of the originals, and what else they touched at the places.
void caseFilesIn(const std::filesystem::path& trace, const SelfCheckWatch& watch, SelfCheck& check) {
  if (watch.trace_library.empty()) return;
  std::set<std::string> originals, seen;
  std::error_code ec;
  for (const auto& p : watch.originals) originals.insert(std::filesystem::weakly_canonical(p, ec).string());
  for (const auto& traced : readTrace(trace)) {
    const std::filesystem::path p = traced.lexically_normal();
    if (!seen.insert(p.string()).second) continue;
    if (originals.contains(p.string()))
      check.originals_read.push_back(p.string());
    else if (atOrUnder(p, watch.places) && !atOrUnder(p, watch.environment))
      check.places_touched.push_back(p.string());
  }
}

// Directories any run looks at: one of them is no place of the case's.
bool everyRunsPlace(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> common = {"/", "/tmp", "/var/tmp", "/usr", "/home"};
  for (const char* name : {"HOME", "TMPDIR"})
    if (const char* value = std::getenv(name); value && *value == '/') common.emplace_back(value);
  return std::any_of(common.begin(), common.end(), [&](const std::filesystem::path& c) {
    return atOrUnder(c.lexically_normal(), {dir});  // the place holds it (or is it)
  });
}

}  // namespace

bool inheritedByArchiveRuns(const std::string& name) { return machineVariable(name) && !namesASecret(name); }

SelfCheckWatch watchTheCase(std::string trace_library, const std::vector<std::filesystem::path>& originals,
                            const std::string& python) {
  SelfCheckWatch watch{std::move(trace_library), originals, {}, {}};
  if (watch.trace_library.empty()) return watch;
  watch.environment = pythonEnvironmentDirs(python);
  const auto add = [&](const std::filesystem::path& place) {
    if (std::find(watch.places.begin(), watch.places.end(), place) == watch.places.end()) watch.places.push_back(place);
  };
  std::error_code ec;
  for (const auto& original : originals) {
    const std::filesystem::path named = std::filesystem::absolute(original, ec).lexically_normal();
    for (const std::filesystem::path& file : {named, std::filesystem::weakly_canonical(named, ec)})
      if (!file.empty()) add(everyRunsPlace(file.parent_path()) ? file : file.parent_path());
  }
  return watch;
}

SelfCheck checkArchiveAlone(const std::filesystem::path& archive, const SelfCheckPlan& plan, const std::string& python,
                            std::chrono::milliseconds timeout, const std::atomic<bool>* cancel, SelfCheckSlots slots,
                            const std::map<std::string, std::string>& env, const SelfCheckWatch& watch) {
  SelfCheck check;
  check.ran = true;
  check.require_every_run = plan.require_every_run;
  check.conclusive = plan.conclusive;
  VerifyOptions options;
  options.archive = archive;
  options.runs = plan.runs;
  options.op_runs = 0;
  options.bound = slots.bound;
  options.slots = slots.slots;
  options.python = python;
  options.env = env;
  leaveOutWhatTheArchiveDoesNotCarry(options, check);
  const auto trace_dir = std::make_unique<ScratchDir>("minrepro-self-check-trace");
  const std::filesystem::path trace = trace_dir->path() / "read.txt";
  watchWhatTheRunsRead(options, watch, trace);
  // The archive this run just wrote, from the user's own case: plain, as the trials ran.
  options.sandbox = SandboxMode::Off;
  options.timeout = timeout;
  options.cancel = cancel;
  try {
    const VerifyResult result = verifyArchive(options, nullptr);
    if (cancel && cancel->load()) {
      check.ran = false;
      return check;  // "the run was interrupted"
    }
    check.runs = static_cast<int>(result.runs.size());
    caseFilesIn(trace, watch, check);
    check.reproduced = result.asExpected();
    check.op_runs = static_cast<int>(result.op_runs.size());
    check.op_reproduced = result.opAsExpected();
    std::vector<RunResult> all = result.runs;
    all.insert(all.end(), result.op_runs.begin(), result.op_runs.end());
    for (const RunResult& run : all) check.other_failures += !run.as_expected && run.signature.failed();
    for (const RunResult& run : all) {
      if (run.as_expected) continue;
      // The Python that runs repro.py lacks torch: no verdict on the archive.
      if (run.outcome.stderr_text.find("No module named 'torch'") != std::string::npos) {
        check.error = python + " has no torch (give a Python with PyTorch with --python)";
        break;
      }
      check.first_difference = run.detail;
      const std::string output = run.outcome.stderr_text + "\n" + run.outcome.stdout_text;
      check.missing_file = missingFileIn(output);
      // What the run's own output names first ('MR_FLAG' of a KeyError), then the rest.
      const auto named =
          std::stable_partition(check.not_given.begin(), check.not_given.end(), [&](const std::string& name) {
            const std::string bare = name.starts_with("PYTHONPATH's ") ? name.substr(13) : name;
            return text::hasWord(output, bare);
          });
      check.output_names_not_given = named != check.not_given.begin();
      break;
    }
  } catch (const std::exception& e) {
    check.error = e.what();
  }
  return check;
}

}  // namespace minrepro
