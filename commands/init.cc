#include "commands/init.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <ostream>

#include "core/disk_space.h"
#include "core/errors.h"
#include "core/text_lines.h"
#include "engine/archive/output_guard.h"
#include "engine/archive/scrub.h"
#include "engine/work_dir.h"
#include "harness/case_inference.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

bool sameFile(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

// `file` relative to the case directory when it lies inside it, else nothing.
std::optional<std::string> insideCase(const fs::path& file, const fs::path& case_dir) {
  std::error_code ec;
  const fs::path rel = fs::weakly_canonical(file, ec).lexically_relative(fs::weakly_canonical(case_dir, ec));
  if (rel.empty() || *rel.begin() == "..") return std::nullopt;
  return rel.generic_string();
}

// A path the command names (relative to the directory it was typed in), as
// the trial must see it: {case_dir}/NAME inside the case directory (a
// trial's own directory is its cwd), else absolute.
std::string caseArgument(const std::string& arg, const InitOptions& o) {
  if (arg.empty() || arg.find('{') != std::string::npos || arg.front() == '-') return arg;
  const fs::path& case_dir = o.case_dir;
  const fs::path p = fs::path(arg).is_absolute() ? fs::path(arg) : o.commandDir() / arg;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return arg;
  const auto rel = insideCase(p, case_dir);
  return rel ? "{case_dir}/" + *rel : fs::absolute(p).lexically_normal().string();
}

// A line for the terminal, whose text ends up in CI logs: without secrets
// (a token in a tensor's or the batch file's name), as the run's log lines.
// Secrets scrubbed, and a name from the batch holding a control (ESC, a
// right-to-left override) escaped: it is printed to a terminal.
std::string onScreen(const std::string& line) { return text::printable(scrubSecretsOnly(line, machineScrubContext())); }

// Written to a temp file beside it, then renamed: never half a case file.
void writeWhole(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".partial";
  std::error_code gone;
  fs::remove(tmp, gone);  // a link left at the name is removed, not written through
  errno = 0;
  std::ofstream out(tmp);
  out << text;
  out.close();
  const int write_error = errno;
  std::error_code ec;
  if (!out || (fs::rename(tmp, file, ec), ec)) {
    fs::remove(tmp, ec);
    // A full file system is no lack of rights (probe 23: the --resume line
    // after a full disk said "give a path where this user may write").
    if (write_error == ENOSPC || write_error == EDQUOT)
      throw DiskFullError(file.parent_path(), "writing " + file.filename().string(),
                          "free some space there, or give another directory");
    throw BadInputError(file.string() + ": cannot be written; give a path where this user may write");
  }
}

std::vector<std::string> caseCommand(const InitOptions& o) {
  if (o.argv.empty())
    throw BadInputError("no trial command: give it after --, e.g. minrepro init --batch " + o.batch.string() +
                        " -- python step.py {batch}");
  bool has_batch = false;
  for (const auto& a : o.argv) has_batch = has_batch || a.find("{batch}") != std::string::npos;
  std::vector<std::string> argv;
  for (std::size_t i = 0; i < o.argv.size(); ++i) {
    const std::string& a = o.argv[i];
    if (!has_batch && i > 0 && sameFile(fs::path(a).is_absolute() ? fs::path(a) : o.commandDir() / a, o.batch)) {
      argv.push_back("{batch}");
      has_batch = true;
      continue;
    }
    // The program keeps its name (looked up on PATH at each trial, as the shell did) unless it is a path.
    argv.push_back(i == 0 && a.find('/') == std::string::npos ? a : caseArgument(a, o));
  }
  if (!has_batch)
    throw BadInputError(
        "the trial command must take the batch as {batch} (e.g. -- python step.py {batch}): minrepro "
        "puts each candidate's file there; found no {batch} and no argument naming " +
        o.batch.string());
  return argv;
}

void emitSamples(YAML::Emitter& y, const InferredCase& c) {
  y << YAML::Key << "samples" << YAML::Value << YAML::BeginMap;
  if (!c.sample_axes.empty()) {
    y << YAML::Key << "tensors" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& a : c.sample_axes) y << YAML::Key << a.tensor << YAML::Value << a.axis;
    y << YAML::EndMap;
  }
  if (!c.sample_lists.empty()) y << YAML::Key << "lists" << YAML::Value << YAML::Flow << c.sample_lists;
  if (!c.ids.empty()) y << YAML::Key << "ids" << YAML::Value << c.ids;
  y << YAML::EndMap;
}

void emitSequence(YAML::Emitter& y, const InferredCase& c) {
  if (c.sequence.empty()) return;
  y << YAML::Key << "sequence" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "tensors" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& s : c.sequence) y << YAML::Key << s.tensor << YAML::Value << s.axis;
  y << YAML::EndMap;
  y << YAML::Key << "padding" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& s : c.sequence) y << YAML::Key << s.tensor << YAML::Value << s.pad;
  y << YAML::EndMap;
  if (!c.lengths.empty()) y << YAML::Key << "lengths" << YAML::Value << c.lengths;
  if (!c.mask.empty()) y << YAML::Key << "mask" << YAML::Value << c.mask;
  y << YAML::EndMap;
}

std::string initCaseBody(const InitOptions& o, const InferredCase& c, const std::vector<std::string>& argv,
                         bool escape_non_ascii) {
  YAML::Emitter y;
  if (escape_non_ascii) y.SetOutputCharset(YAML::EscapeNonAscii);
  y << YAML::BeginMap;
  y << YAML::Key << "batch" << YAML::Value
    << insideCase(o.batch, o.case_dir).value_or(fs::absolute(o.batch).lexically_normal().string());
  emitSamples(y, c);
  emitSequence(y, c);
  if (!c.values_kept.empty()) {  // other per-sample lengths: their values stay the samples' own
    y << YAML::Key << "values" << YAML::Value << YAML::BeginMap << YAML::Key << "exclude" << YAML::Value << YAML::Flow
      << c.values_kept << YAML::EndMap;
  }
  y << YAML::Key << "trial" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "command" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& a : argv) y << YAML::DoubleQuoted << a;
  y << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  if (!y.good()) throw BadInputError("cannot write the case: " + y.GetLastError());
  return y.c_str();
}

}  // namespace

std::string renderInitCase(const InitOptions& o, std::vector<std::string>& notes) {
  const std::vector<std::string> argv = caseCommand(o);
  const InferredCase c = inferCase(o.batch);
  notes = describeInference(c);
  for (std::string& n : notes) n = text::printable(n);  // comment lines of the file, and lines on the screen
  // A name from the batch holding a bidirectional or other hidden control
  // (U+202E) would be shown reordered by an editor: written with every
  // character past ASCII escaped ("\u202E"), it reads back as the same name.
  const std::string body = initCaseBody(o, c, argv, false);
  const std::string header = "# Inferred by minrepro from " + text::printableInLine(o.batch.filename().string()) +
                             "; edit what is wrong (every key: configs/README.md in minrepro's sources).\n";
  std::string comments;
  for (const auto& n : notes) comments += "#   " + n + "\n";
  return header + comments +
         "# failure: {family: ..., message: ...} pins the failure when the batch fails more than one way.\n" +
         (text::holdsHiddenControl(body) ? initCaseBody(o, c, argv, true) : body) + "\n";
}

namespace {

// What init reads, which its output must never replace (--force or not):
// the batch and every file the command names (relative to the case
// directory or absolute), the step script among them.
std::vector<std::pair<fs::path, std::string>> filesInitReads(const InitOptions& o) {
  std::vector<std::pair<fs::path, std::string>> files{{o.batch, "the failing batch"}};
  std::error_code ec;
  for (const std::string& given : o.argv) {
    const std::string arg = argumentPath(given);
    if (arg.empty() || arg.find('{') != std::string::npos || arg.front() == '-') continue;
    const fs::path p = fs::path(arg).is_absolute() ? fs::path(arg) : o.commandDir() / arg;
    if (fs::exists(p, ec)) files.push_back({p, "a file the trial command names"});
  }
  return files;
}

}  // namespace

int runInit(const InitOptions& o, const fs::path& output, bool force, std::ostream& out) {
  // The command and the batch first: what is wrong with them is said even
  // where a case.yaml from an earlier try is in the way.
  std::vector<std::string> notes;
  const std::string text = renderInitCase(o, notes);
  checkOutputPath(output, "the case (--output)", filesInitReads(o), force, false);
  writeWhole(output, text);
  out << onScreen("minrepro: wrote " + output.string() + ", inferred from " + o.batch.string() + ":") << "\n";
  for (const auto& n : notes) out << "  " << onScreen(n) << "\n";
  out << "Check it, then: minrepro shrink --config " << output.string() << "\n";
  return 0;
}

fs::path writeZeroConfigCase(const InitOptions& o, const fs::path& work_dir, bool quiet, std::ostream& out) {
  std::vector<std::string> notes;
  const std::string text = renderInitCase(o, notes);
  claimWorkDir(work_dir);  // a project directory given as --work-dir keeps its own case.yaml
  const fs::path file = work_dir / "case.yaml";
  writeWhole(file, "# The zero-config start's case: its paths are relative to " + o.case_dir.string() +
                       ".\n# Rerun the same minrepro shrink --batch command (with --resume to go on), or write an "
                       "editable case.yaml with minrepro init.\n" +
                       text);
  if (!quiet) {
    out << onScreen("minrepro: no case.yaml: inferred from " + o.batch.string() + " (" + file.string() + "):") << "\n";
    for (const auto& n : notes) out << "  " << onScreen(n) << "\n";
    out.flush();
  }
  return file;
}

}  // namespace minrepro
