#include "engine/batch_dependence.h"

#include <regex>
#include <vector>

#include "core/error_readers.h"
#include "core/text_lines.h"
#include "harness/batch_store.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// The first error the trial raised, as its signature reads it
// (core/error_readers.h): "ModuleNotFoundError", "No module named 'x'".
struct PythonError {
  std::string type;
  std::string line;  // "ModuleNotFoundError: No module named 'x'"
};

std::optional<PythonError> firstPythonError(const std::string& text) {
  for (const RawError& e : readErrors(text::splitLines(text), AfterFirstRaised::Stop)) {
    if (e.role != ErrorRole::Raised || e.type.empty()) continue;
    const auto dot = e.type.rfind('.');
    return PythonError{dot == std::string::npos ? e.type : e.type.substr(dot + 1), e.type + ": " + e.message};
  }
  return std::nullopt;
}

bool isUsageError(const TrialOutcome& outcome) {
  static const std::regex kUsage(R"((^|\n)usage: .*\n(.*\n)*.*error: )");
  return outcome.end == TrialEnd::Exited && outcome.exit_code == 2 && std::regex_search(outcome.stderr_text, kUsage);
}

// Where the user's shell is: the case's directory, the directory minrepro
// was started in, and the directories of the scripts the command names (a
// captured case lives apart from the script whose directory training ran
// in). The first of them that holds `name`.
std::optional<fs::path> whereTheUserHas(const std::string& name, const CaseConfig& config) {
  std::vector<fs::path> places{config.base_dir};
  std::error_code ec;
  if (const fs::path cwd = fs::current_path(ec); !ec) places.push_back(cwd);
  if (config.command)
    for (const std::string& arg : config.command->argv)
      if (arg.find('{') == std::string::npos && fs::is_regular_file(arg, ec) && arg.ends_with(".py"))
        places.push_back(fs::path(arg).parent_path());
  for (const fs::path& place : places)
    if (!place.empty() && fs::exists(place / name, ec)) return place;
  return std::nullopt;
}

// What to do about a file not found: a relative name resolves from the
// directory the step runs in, and each trial runs in a directory of its own
// (the user's shell ran it from the project, where the file is).
std::string relativeNameAdvice(const std::string& name, const CaseConfig& config) {
  const auto place = whereTheUserHas(name, config);
  return "The step opened '" + name + "' by a relative path, which resolves from the directory it runs in, and " +
         "each trial runs in a directory of its own" +
         (place ? " ('" + name + "' is in " + place->string() + ", where your shell ran it)" : "") +
         ": open it relative to the script, os.path.join(os.path.dirname(os.path.abspath(__file__)), '" + name +
         "'), or by an absolute path; when the command names it, write {case_dir}/" + name;
}

// The same, read from an error line ending in the quoted name; a general
// word when the name is absolute or not quoted.
std::string relativePathAdvice(const std::string& line, const CaseConfig& config) {
  static const std::regex kQuoted(R"(: '([^'/][^']*)'$)");
  std::smatch m;
  if (!std::regex_search(line, m, kQuoted))
    return "A relative path in trial.command is relative to the trial's own directory: name your files as "
           "{case_dir}/NAME";
  return relativeNameAdvice(m[1].str(), config);
}

}  // namespace

std::string batchIndependentAdvice(const TrialOutcome& outcome, const CaseConfig& config) {
  const std::string program = config.command ? config.command->argv.front() : std::string("minrepro-trial");
  const std::string general =
      "it fails the same way when its batch holds no tensor at all, so the failure is not in the data and reducing "
      "would only keep an arbitrary sample";
  if (isUsageError(outcome))
    return "the trial's command line is wrong (its program printed a usage error); " + general +
           ". Fix trial.command (a placeholder such as {batch} where the program expects its argument) and run again";
  const auto error = firstPythonError(outcome.stderr_text);
  if (!error) return "the failure does not depend on the batch: " + general + ". Fix the trial and run again";
  const std::string& t = error->type;
  if (t == "ModuleNotFoundError" || t == "ImportError")
    return "an environment error, not the bug (" + error->line + "): " + general +
           ". Install what is missing into the "
           "Python the trial runs (" +
           program + "), or make trial.command name the Python that has it";
  if (t == "SyntaxError" || t == "IndentationError" || t == "TabError" || t == "NameError")
    return "an error in the trial's script (" + error->line + "): " + general + ". Fix the script and run again";
  if (t == "FileNotFoundError" || t == "PermissionError" || t == "IsADirectoryError" || t == "NotADirectoryError")
    return "a file the trial needs cannot be opened (" + error->line + "): " + general + ". " +
           relativePathAdvice(error->line, config);
  if (t == "TypeError" && error->line.find("argument") != std::string::npos)
    return "the trial's code calls a function with the wrong arguments (" + error->line + "): " + general +
           ". Fix the call and run again";
  return "the failure does not depend on the batch (" + error->line + "): " + general + ". Fix the trial and run again";
}

std::optional<std::string> relativeFileMissing(const std::string& message, const CaseConfig& config,
                                               FileWhereUserIs where) {
  static const std::regex kMissing(R"(No such file or directory: '([^'/][^']*)')");
  std::smatch m;
  if (!std::regex_search(message, m, kMissing)) return std::nullopt;
  if (where == FileWhereUserIs::Required && !whereTheUserHas(m[1].str(), config)) return std::nullopt;
  return relativeNameAdvice(m[1].str(), config);
}

std::optional<std::string> checkBatchDependence(const CaseConfig& config, TrialSpec spec,
                                                const FailureSignature& reference, Executor& executor) {
  const fs::path batch = spec.work_dir / "batch.pt";
  fs::create_directories(spec.work_dir);
  writeEmptyBatch(batch);
  spec.batch_selection.clear();
  spec.write_batch = nullptr;
  const TrialOutcome outcome = executor.run(spec);
  std::error_code ec;
  fs::remove_all(spec.work_dir, ec);
  if (outcome.end == TrialEnd::Cancelled || outcome.end == TrialEnd::FailedToStart) return std::nullopt;
  const FailureSignature on_empty = classify(outcome);
  if (!on_empty.failed() || !matchSignature(reference, on_empty, config.expected).matches) return std::nullopt;
  return batchIndependentAdvice(outcome, config);
}

}  // namespace minrepro
