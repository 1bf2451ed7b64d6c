// minrepro: the command line. Thin: parses options, calls the command, and
// lets commands/run_command.h turn whatever it throws into the
// documented exit status.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "commands/compare.h"
#include "commands/init.h"
#include "commands/regress.h"
#include "commands/run_command.h"
#include "commands/triage.h"
#include "commands/verify.h"
#include "core/failure_signature.h"
#include "core/process/containment.h"
#include "engine/shrink.h"
#include "engine/stop_signals.h"
#include "engine/torch_versions.h"
#include "engine/trial_executors.h"
#include "harness/batch_store.h"
#include "harness/contract.h"
#include "reducers/reducer.h"

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: minrepro <command> [options]\n\n"
    "commands:\n"
    "  shrink --config case.yaml   reduce a failing batch to a minimal reproducer archive\n"
    "  shrink --batch B.pt -- python step.py {batch}\n"
    "                              the same without case.yaml: inferred from the batch and the command\n"
    "  init --batch B.pt -- python step.py {batch}\n"
    "                              write the case.yaml that shrink --batch would use, commented\n"
    "  reducers                    list the reducer passes\n"
    "  triage LOG|-                read a log's first error: family, operator, first check, what to avoid\n"
    "  verify ARCHIVE [--expect fail|pass] [--runs K] [--jobs N] [--sandbox auto|on|off]\n"
    "                              rerun a reproducer archive in fresh processes and compare\n"
    "                              (runs the archive's code: in bubblewrap when made elsewhere)\n"
    "  check --batch B.pt --target NAME --classes K\n"
    "                              check class-index targets: int64, one per sample or per position, in [0, K) or "
    "ignore_index\n"
    "  regress DIR                 rerun a regression set (shrink --add-to DIR) and compare (runs its code)\n"
    "  compare ARCHIVE|case.yaml [--runs K]\n"
    "                              run the case under variants, one change at a time: CPU, float32,\n"
    "                              deterministic algorithms, each optional branch off (runs its code)\n"
    "  --version                   print the version\n\n"
    "exit status: 0 reduced, 1 internal error, 2 bad input, 3 the original does not reproduce,\n"
    "             4 trials cannot start, 5 budget spent (best so far written),\n"
    "             6 archive written but it does not reproduce on its own, 130 interrupted\n";

// Parses a subcommand's options: -1 to go on, 0 after --help; bad options
// are BadInputError (exit 2), after the options' help.
int parseSubcommand(const std::string& name, const po::options_description& opts,
                    const po::positional_options_description& positional, const std::vector<std::string>& args,
                    po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(args).options(opts).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw minrepro::BadInputError(std::string(e.what()) + "; see minrepro " + name + " --help");
  }
  return -1;
}

// shrink's options as typed, less those the go-on line writes itself (the
// case, the places, --resume) and the budgets a stopped run spent: a resumed
// run repeats them (--no-op-repro, --jobs 4, --python PY).
std::vector<std::string> optionsToRepeat(const po::options_description& opts, const std::vector<std::string>& args) {
  static const std::set<std::string> kNotRepeated{"config",     "batch",    "work-dir",         "output", "resume",
                                                  "max-trials", "max-time", "materialize-best", "help"};
  // A path given relative to where the run started, made absolute: the line
  // is pasted anywhere (a bare program name stays, looked up on PATH).
  static const std::set<std::string> kPaths{"python", "trial-binary", "add-to"};
  std::vector<std::string> repeated;
  for (const auto& option : po::command_line_parser(args).options(opts).run().options) {
    if (kNotRepeated.contains(option.string_key)) continue;
    const bool relative_path = kPaths.contains(option.string_key) && option.value.size() == 1 &&
                               !option.value[0].empty() && option.value[0].front() != '/' &&
                               (option.string_key == "add-to" || option.value[0].find('/') != std::string::npos);
    if (!relative_path) {
      repeated.insert(repeated.end(), option.original_tokens.begin(), option.original_tokens.end());
      continue;
    }
    repeated.push_back("--" + option.string_key);
    repeated.push_back(std::filesystem::absolute(option.value[0]).lexically_normal().string());
  }
  return repeated;
}

// A count option (--jobs, --runs, ...): a whole number of at least `least`.
// Read as text: a size_t option would take "-1" as 2^64 - 1.
// Counts have a ceiling too: `--runs 30000000` reserved memory for every
// run's record before the first one started (8.6 GB in 25 s).
std::int64_t countOption(const po::variables_map& vm, const std::string& name, std::int64_t least,
                         std::int64_t most = std::int64_t{1} << 40) {
  const std::string text = vm[name].as<std::string>();
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < least || value > most)
    throw minrepro::BadInputError("--" + name + " must be a whole number from " + std::to_string(least) + " to " +
                                  std::to_string(most) + ", found '" + text + "'");
  return value;
}

// A number of seconds: finite, at least 0 (or above 0 when `positive`).
double secondsOption(const po::variables_map& vm, const std::string& name, bool positive) {
  const std::string text = vm[name].as<std::string>();
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0 ||
      (positive && value == 0))
    throw minrepro::BadInputError("--" + name + " must be a number of seconds " +
                                  (positive ? "above 0" : "of at least 0") + ", found '" + text + "'");
  return value;
}

// --sandbox of verify, regress and compare: they run an archive's code (core/process/sandbox.h).
void addSandboxOption(po::options_description& opts) {
  opts.add_options()("sandbox", po::value<std::string>()->default_value("auto"),
                     "the archive's code (repro.py, op/repro_op.py, bundled scripts) is a program like any other: "
                     "auto runs it in a bubblewrap sandbox (no network, read-only file system, only the scratch "
                     "directory writable) when the archive was made on another machine and bwrap is installed; "
                     "on: always (bwrap required); off: never");
}

// The trial command after "--" (as typed in a shell), and the options before it.
std::pair<std::vector<std::string>, std::vector<std::string>> splitAtDashes(const std::vector<std::string>& args) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes == args.end()) return {args, {}};
  return {{args.begin(), dashes}, {dashes + 1, args.end()}};
}

minrepro::InitOptions initOptions(const std::string& batch, const std::vector<std::string>& command) {
  minrepro::InitOptions o;
  o.case_dir = std::filesystem::current_path();
  o.batch = std::filesystem::absolute(batch);
  std::error_code ec;
  if (std::filesystem::exists(o.batch, ec) && !std::filesystem::is_regular_file(o.batch, ec))
    throw minrepro::BadInputError(batch +
                                  ": not a regular file (a directory, FIFO, device or socket); save the "
                                  "failing batch to a file with torch.save and give that (--batch)");
  if (!std::filesystem::is_regular_file(o.batch))
    throw minrepro::BadInputError(batch + ": no such batch file (--batch: the failing batch, saved with torch.save)");
  o.argv = command;
  return o;
}

// minrepro init --batch B.pt -- CMD...: the case.yaml shrink --batch would use.
int initCommand(const std::vector<std::string>& all_args) {
  const auto [args, command] = splitAtDashes(all_args);
  po::options_description opts(
      "minrepro init --batch B.pt [options] -- COMMAND... {batch} ... (exit 0 written, 2 bad input)");
  std::string batch, output = "case.yaml";
  opts.add_options()("help,h", "show this help")(
      "batch,b", po::value(&batch)->required(),
      "the failing batch as torch.save wrote it: a dict, tuple or list of tensors, "
      "nested as your loop gave it")("output,o", po::value(&output), "the case file to write (default: case.yaml)")(
      "force", "replace the case file when it exists");
  po::variables_map vm;
  if (const int status = parseSubcommand("init", opts, {}, args, vm); status >= 0) return status;
  minrepro::InitOptions options = initOptions(batch, command);
  // The case's paths resolve from its own directory; the command's, typed here, from here.
  options.command_dir = options.case_dir;
  options.case_dir = std::filesystem::absolute(output).lexically_normal().parent_path();
  return minrepro::runInit(options, output, vm.count("force") > 0, std::cout);
}

int shrinkCommand(const std::vector<std::string>& all_args) {
  const auto [args, command] = splitAtDashes(all_args);
  po::options_description opts("minrepro shrink options");
  std::string config, batch, output, work_dir, trial_binary, python = minrepro::kDefaultPython, add_to, name;
  opts.add_options()("help,h", "show this help")("config,c", po::value(&config), "the case file (case.yaml)")(
      "batch,b", po::value(&batch),
      "instead of --config: the failing batch, with the trial command after -- "
      "(e.g. -- python step.py {batch}); the case is inferred (see minrepro init)")(
      "output,o", po::value(&output), "archive to write (default: case.yaml's output)")(
      "work-dir", po::value(&work_dir), "directory for trials and the log (default: case.yaml's work_dir)")(
      "trial-binary", po::value(&trial_binary), "minrepro-trial to use (default: next to minrepro)")(
      "python", po::value(&python),
      "Python with PyTorch, for the environment record, the archive's self-check "
      "and the op step (default: the trial command's own Python when its program is "
      "one, else the one this build's torch came from)")(
      "no-self-check",
      "do not run the archive's repro.py on its own before finishing (e.g. it needs a GPU "
      "this machine lacks); REPORT.md then says it was not checked")(
      "no-op-repro",
      "do not look for the failing operator call alone (op/repro_op.py: a run of repro.py with the "
      "op recorder, runs of the call alone and a reduction of its inputs)")(
      "force",
      "replace an existing file at the output that is not an archive minrepro wrote (never the batch, "
      "the model, the case file or a file the trial reads)")("quiet,q", "only print errors")(
      "progress", po::value<std::string>()->default_value("auto"),
      "auto: a status line redrawn on a terminal, and where stderr is a pipe or a file a 'progress:' line "
      "(size, trials, trials per minute, the pass's estimate left) every --progress-every seconds; never; "
      "always: the periodic lines on a terminal too")("progress-every", po::value<std::string>()->default_value("30"),
                                                      "seconds between the periodic progress lines")(
      "resume", "continue an interrupted run from the journal in the work directory")(
      "materialize-best",
      "run nothing: write the best case so far of the run whose journal is in the work "
      "directory to its best/ (after a kill -9; a running shrink does it on SIGUSR1)")(
      "jobs,j", po::value<std::string>()->default_value("1"), "trials to run at once")(
      "max-trials", po::value<std::string>()->default_value("0"), "stop after this many trials (0: no limit)")(
      "max-time", po::value<std::string>()->default_value("0"), "stop after this many seconds (0: no limit)")(
      "executor", po::value<std::string>(), "where trials run: local or slurm (default: case.yaml's executor.kind)")(
      "devices", po::value<std::string>(),
      "local trials get one of these devices each, e.g. 0,1,2 "
      "(default: case.yaml's; detected when --jobs > 1)")("trials-per-device", po::value<std::string>(),
                                                          "running trials that may share one device (default 1)")(
      "add-to", po::value(&add_to), "also store the archive in this regression set (see minrepro regress)")(
      "name", po::value(&name), "the case's name in the regression set (default: the case directory's name)");
  po::variables_map vm;
  if (const int status = parseSubcommand("shrink", opts, {}, args, vm); status >= 0) return status;
  if (config.empty() == batch.empty())
    throw minrepro::BadInputError(config.empty() ? "give --config case.yaml, or --batch B.pt -- COMMAND ... {batch}"
                                                 : "give --config or --batch, not both");
  if (!config.empty() && !command.empty())
    throw minrepro::BadInputError("a command after -- goes with --batch; with --config the command is case.yaml's");
  minrepro::ShrinkOptions options;
  options.config = config;
  options.repeated_options = optionsToRepeat(opts, args);
  if (!batch.empty()) {
    const minrepro::InitOptions init = initOptions(batch, command);
    const std::filesystem::path dir = std::filesystem::absolute(work_dir.empty() ? "minrepro-work" : work_dir);
    options.config = minrepro::writeZeroConfigCase(init, dir, vm.count("quiet") > 0, std::cout);
    options.case_dir = init.case_dir;
    options.zero_config_command = command;
    if (work_dir.empty()) work_dir = dir.string();
    config = options.config.string();
  }
  if (!output.empty()) options.output = output;
  if (!work_dir.empty()) options.work_dir = work_dir;
  options.trial_binary = trial_binary;
  options.python = python;
  options.python_given = vm.count("python") > 0;
  options.quiet = vm.count("quiet") > 0;
  options.self_check = vm.count("no-self-check") == 0;
  options.op_step = vm.count("no-op-repro") == 0;
  options.resume = vm.count("resume") > 0;
  options.force = vm.count("force") > 0;
  options.progress = minrepro::parseProgressMode(vm["progress"].as<std::string>());
  options.progress_seconds = secondsOption(vm, "progress-every", false);
  options.materialize_best = vm.count("materialize-best") > 0;
  options.jobs = static_cast<std::size_t>(countOption(vm, "jobs", 1, 1024));
  options.max_trials = static_cast<std::size_t>(countOption(vm, "max-trials", 0));
  options.max_seconds = secondsOption(vm, "max-time", false);
  options.executor = minrepro::parseExecutorOverrides(
      vm.count("executor") ? vm["executor"].as<std::string>() : "",
      vm.count("devices") ? vm["devices"].as<std::string>() : "",
      vm.count("trials-per-device") ? static_cast<std::size_t>(countOption(vm, "trials-per-device", 1)) : 0);
  // A bad --name or target costs no trial.
  if (!add_to.empty()) minrepro::checkRegressionTarget(add_to, minrepro::regressionName(config, name));
  const minrepro::ExitStatus status = minrepro::runShrink(options);
  if (status == minrepro::ExitStatus::Reduced && !add_to.empty())
    minrepro::addShrunkCase(config, output, add_to, name, std::cout, options.case_dir);
  return static_cast<int>(status);
}

// minrepro verify repro.tar.gz: the archive reproduces (or, after a fix,
// passes with every sample processed) in fresh processes.
int verifyCommand(const std::vector<std::string>& args) {
  minrepro::VerifyOptions o;
  std::string archive, expect = "fail";
  double timeout = 600;
  po::options_description opts(
      "minrepro verify ARCHIVE options (exit 0 as expected, 1 not, 2 bad input, 3 a flaky archive that K runs cannot "
      "judge, 4 did not reproduce under a torch other than the archive's, 130 interrupted)");
  opts.add_options()("help,h", "show this help")("archive", po::value(&archive)->required(),
                                                 "the repro.tar.gz to check")(
      "runs", po::value<std::string>()->default_value("3"), "how many fresh runs")(
      "jobs,j", po::value<std::string>()->default_value("1"),
      "runs at once (each its own process and directory; the extracted files are shared)")(
      "expect", po::value(&expect)->default_value("fail"),
      "fail: every run fails as recorded; pass: every run exits 0 and processes every sample")(
      "python", po::value(&o.python)->default_value(std::string(minrepro::kDefaultPython)),
      "Python with PyTorch (default: the archive's, when its torch is the one recorded, else this build's)")(
      "timeout", po::value<std::string>()->default_value("600"), "seconds per run")(
      "code", po::value(&o.code_dir),
      "a directory of your current code: its files replace the archive's bundled "
      "copies of the same names (step.py, ...), to check a fix in your code")(
      "max-size", po::value<std::string>()->default_value("4096"),
      "MiB the archive may expand to in all; a larger one is refused (exit 2) before it fills the disk");
  addSandboxOption(opts);
  po::positional_options_description positional;
  positional.add("archive", 1);
  po::variables_map vm;
  if (const int status = parseSubcommand("verify", opts, positional, args, vm); status >= 0) return status;
  if (expect != "fail" && expect != "pass")
    throw minrepro::BadInputError("--expect must be 'fail' or 'pass', found '" + expect + "'");
  o.archive = archive;
  o.choose_python = true;
  o.python_given = !vm["python"].defaulted();
  o.runs = static_cast<int>(countOption(vm, "runs", 1, 10000));
  o.jobs = static_cast<std::size_t>(countOption(vm, "jobs", 1, 1024));
  timeout = secondsOption(vm, "timeout", true);
  o.max_total_bytes = static_cast<std::uint64_t>(countOption(vm, "max-size", 1)) << 20;
  o.expect = expect == "pass" ? minrepro::Expect::Pass : minrepro::Expect::Fail;
  o.sandbox = minrepro::parseSandboxMode(vm["sandbox"].as<std::string>());
  o.timeout = std::chrono::milliseconds(static_cast<long long>(std::max(timeout, 0.001) * 1000));
  o.timeout_given = !vm["timeout"].defaulted();
  const minrepro::StopOnSignals stop(
      minrepro::StopOnSignals::kRunsStop);  // Ctrl-C: the running repro.py is killed, the scratch copy removed
  o.cancel = &minrepro::stopAsked();
  return minrepro::runVerify(o, std::cout, std::cerr);
}

// minrepro compare ARCHIVE|case.yaml: variants, one change at a time (docs/method.md, "One change at a time").
int compareCommand(const std::vector<std::string>& args) {
  minrepro::CompareOptions o;
  std::string input;
  po::options_description opts(
      "minrepro compare ARCHIVE|case.yaml options (exit 0 compared, 2 bad input, 3 the case as is does not fail, "
      "4 runs cannot start, 130 interrupted)");
  opts.add_options()("help,h", "show this help")("input", po::value(&input)->required(),
                                                 "a repro.tar.gz from minrepro shrink, or a case.yaml")(
      "runs", po::value<std::string>()->default_value("3"), "fresh runs per variant")(
      "trial-binary", po::value(&o.trial_binary), "minrepro-trial to use (default: next to minrepro)")(
      "python", po::value<std::string>(),
      "Python an archive's Python command runs with (default: the archive's, when its torch is the one recorded, "
      "else this build's)");
  addSandboxOption(opts);
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (const int status = parseSubcommand("compare", opts, positional, args, vm); status >= 0) return status;
  o.input = input;
  if (vm.count("python")) o.python = vm["python"].as<std::string>();
  o.runs = static_cast<int>(countOption(vm, "runs", 1, 10000));
  o.sandbox = minrepro::parseSandboxMode(vm["sandbox"].as<std::string>());
  const minrepro::StopOnSignals stop(minrepro::StopOnSignals::kRunsStop);
  o.cancel = &minrepro::stopAsked();
  return minrepro::runCompare(o, std::cout, std::cerr);
}

// minrepro regress DIR: every stored case rerun with the verify rules.
int regressCommand(const std::vector<std::string>& args) {
  minrepro::VerifyOptions o;
  std::string dir;
  po::options_description opts(
      "minrepro regress DIR options (exit 0 every case as expected, 1 some differ, 2 bad input, 4 only cases run "
      "under a torch other than their archive's differ, 130 interrupted)");
  opts.add_options()("help,h", "show this help")("dir", po::value(&dir)->required(),
                                                 "the regression set (NAME.tar.gz and NAME.expect files)")(
      "runs", po::value<std::string>()->default_value("1"), "fresh runs per case")(
      "python", po::value(&o.python)->default_value(std::string(minrepro::kDefaultPython)),
      "Python with PyTorch (default: each archive's, when its torch is the one recorded, else this build's)");
  addSandboxOption(opts);
  po::positional_options_description positional;
  positional.add("dir", 1);
  po::variables_map vm;
  if (const int status = parseSubcommand("regress", opts, positional, args, vm); status >= 0) return status;
  o.runs = static_cast<int>(countOption(vm, "runs", 1, 10000));
  o.choose_python = true;
  o.python_given = !vm["python"].defaulted();
  o.sandbox = minrepro::parseSandboxMode(vm["sandbox"].as<std::string>());
  const minrepro::StopOnSignals stop(minrepro::StopOnSignals::kRunsStop);
  o.cancel = &minrepro::stopAsked();
  return minrepro::runRegress(dir, o, std::cout);
}

// minrepro check: the class-index target contract of a batch (docs/method.md, "Target contracts").
int checkCommand(const std::vector<std::string>& args) {
  minrepro::TargetContract c;
  std::string batch;
  po::options_description opts("minrepro check options (exit 0 the contract holds, 1 violated, 2 bad input)");
  opts.add_options()("help,h", "show this help")("batch", po::value(&batch)->required(),
                                                 "the batch, a torch.save'd dict of tensors")(
      "target", po::value(&c.target)->required(), "the batch key of the class-index targets")(
      "classes", po::value(&c.classes)->required(), "number of classes K: valid targets are [0, K)")(
      "ignore-index", po::value(&c.ignore_index)->default_value(-100), "targets equal to it are ignored")(
      "ids", po::value(&c.ids), "batch key of per-sample ids, to name offending samples");
  po::variables_map vm;
  if (const int status = parseSubcommand("check", opts, {}, args, vm); status >= 0) return status;
  const minrepro::ContractResult result = minrepro::checkClassTargets(batch, c);
  std::cout << minrepro::renderContractResult(result, c, batch);
  return result.ok() ? 0 : 1;
}

// minrepro triage LOG: the log's first error and the guide's advice for it.
int triageCommand(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: minrepro triage LOG   (LOG '-' reads standard input)\n"
                 "exit status: 0 an error was found, 1 no error in the log, 2 the log cannot be read\n";
    return 0;
  }
  if (args.size() != 1)
    throw minrepro::BadInputError("expected one log file (or '-' for standard input); see minrepro triage --help");
  return minrepro::runTriage(args[0], std::cin, std::cout);
}

int reducersCommand(const std::vector<std::string>&) {
  for (const auto& r : minrepro::reducerRegistry()) std::cout << r.name << "\t" << r.description << "\n";
  return 0;
}

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

const Command kCommands[] = {
    {"shrink", shrinkCommand},   {"triage", triageCommand},   {"verify", verifyCommand},     {"check", checkCommand},
    {"regress", regressCommand}, {"compare", compareCommand}, {"reducers", reducersCommand}, {"init", initCommand},
};

}  // namespace

int main(int argc, char** argv) {
  // Candidates of a large batch are cut through buffers of up to 32 MB.
  // glibc raises its mmap threshold each time such a buffer is freed, after
  // which they come from the heap and stay in the process when freed: a
  // fixed threshold keeps every buffer of 1 MB or more a mapping of its own,
  // returned when freed (minrepro only; trials keep the allocator they have).
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (command != c.name) continue;
    // Whatever a trial starts and leaves behind is reparented here, found
    // and killed (core/process/containment.h); the rest when the command ends.
    minrepro::adoptOrphans();
    minrepro::exitOnStopSignals();
    const int status = minrepro::runCommand(c.name, std::cerr, [&] { return c.run(rest); });
    minrepro::killAllOrphans();
    if (minrepro::abandonedRegexSearch()) {  // its thread still runs: no destructor may run under it
      std::cout.flush();
      std::_Exit(status);
    }
    return status;
  }
  if (command == "--version" || command == "version") {
    // What the archive's REPORT.md records too: LibTorch (built in) and the
    // PyTorch of the Python that runs Python trials by default.
    std::cout << "minrepro " << MINREPRO_VERSION << "\n";
    const auto scratch = std::filesystem::temp_directory_path() / ("minrepro-version-" + std::to_string(getpid()));
    auto record = minrepro::libtorchEnvironment();
    for (auto& entry : minrepro::pythonTorchVersions(minrepro::kDefaultPython, scratch)) record.push_back(entry);
    for (const auto& [key, value] : record) std::cout << key << ": " << value << "\n";
    return 0;
  }
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "minrepro: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
