#include "engine/archive/bundle.h"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <set>

#include "core/process/process.h"
#include "core/text_lines.h"
#include "engine/archive/scrub.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

// `path` relative to `dir` when strictly inside it (both canonical).
std::optional<fs::path> inside(const fs::path& path, const fs::path& dir) {
  const fs::path rel = path.lexically_relative(dir);
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel;
}

fs::path canonicalOr(const fs::path& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

// Installed Python packages and interpreters' standard libraries, compiler
// and kernel caches: never the user's case, wherever they are (a virtual
// environment inside the case directory too).
bool environmentFile(const fs::path& path) {
  static constexpr std::array kParts{"/site-packages/", "/dist-packages/", "/lib/python", "/.cache/",
                                     "/.config/",       "/__pycache__/",   "/.triton/",   "/torchinductor_"};
  const std::string text = path.string();
  for (const char* part : kParts)
    if (text.find(part) != std::string::npos) return true;
  return path.filename() == "pyvenv.cfg";
}

// What belongs to the machine, outside the case directory: system
// directories, and programs (an interpreter named by its absolute path).
bool systemFile(const fs::path& path) {
  static constexpr std::array kPrefixes{"/usr/",  "/lib/", "/lib32/", "/lib64/", "/bin/", "/sbin/", "/etc/",
                                        "/proc/", "/sys/", "/dev/",   "/run/",   "/var/", "/snap/", "/nix/"};
  const std::string text = path.string();
  for (const char* prefix : kPrefixes)
    if (text.rfind(prefix, 0) == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

bool matchesAny(const std::vector<std::string>& globs, const fs::path& rel) {
  for (const auto& glob : globs)
    if (::fnmatch(glob.c_str(), rel.c_str(), 0) == 0) return true;
  return false;
}

// Regular files under the case directory that trial.files names, outside
// the work directory.
std::vector<fs::path> globbed(const CaseConfig& config, const fs::path& base, const fs::path& work) {
  std::vector<fs::path> out;
  if (config.files.empty()) return out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(base, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && (canonicalOr(it->path()) == work || it->path().filename() == ".git")) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    const fs::path rel = it->path().lexically_relative(base);
    if (matchesAny(config.files, rel)) out.push_back(canonicalOr(it->path()));
  }
  std::sort(out.begin(), out.end());  // directory order is the filesystem's: the archive's is ours
  return out;
}

// The deepest directory that holds every file and every one of `dirs` ("/"
// when only the root does).
fs::path commonDirectory(const std::vector<fs::path>& files, const std::vector<fs::path>& dirs) {
  if (files.empty() && dirs.empty()) return "/";
  fs::path common = files.empty() ? dirs.front() : files.front().parent_path();
  const auto holds = [&](const fs::path& dir) { return dir == common || inside(dir, common) != std::nullopt; };
  for (const fs::path& f : files)
    while (common != common.root_path() && inside(f, common) == std::nullopt) common = common.parent_path();
  for (const fs::path& d : dirs)
    while (common != common.root_path() && !holds(d)) common = common.parent_path();
  return common;
}

// A path from outside the case directory (a file or a PYTHONPATH directory)
// as the archive names it: under external/, its path below the common
// directory, led by that directory's own name (code/step.py). When the
// common directory is the root or a home directory, its name is left out
// and a path part that is a login name becomes "user": the archive carries
// neither the home directory nor the user's name.
fs::path externalName(const fs::path& path, const fs::path& common, const ScrubContext& machine) {
  const fs::path below = path == common ? fs::path() : path.lexically_relative(common);
  const bool home = std::any_of(machine.homes.begin(), machine.homes.end(),
                                [&](const std::string& h) { return canonicalOr(h) == common; });
  if (common.has_filename() && !home)
    return below.empty() ? "external" / common.filename() : "external" / common.filename() / below;
  fs::path name = "external";
  for (const fs::path& part : below) {
    const bool user = std::find(machine.users.begin(), machine.users.end(), part.string()) != machine.users.end();
    name /= user ? fs::path("user") : part;
  }
  return name;
}

// The import roots of the packages among `outside`: the directory above a
// module's topmost package (the last one up with an __init__.py). Python found
// such a package through a root the case does not set (an editable install's
// finder or .pth, a script's sys.path.append): the archive puts the root's
// copy on its PYTHONPATH, which comes before both, so its copy is imported,
// on a maintainer's machine too.
std::vector<fs::path> packageRoots(const std::vector<fs::path>& outside) {
  std::vector<fs::path> roots;
  std::error_code ec;
  for (const fs::path& file : outside) {
    if (file.extension() != ".py") continue;
    fs::path package = file.parent_path();
    if (!fs::exists(package / "__init__.py", ec)) continue;
    while (package.has_relative_path() && fs::exists(package.parent_path() / "__init__.py", ec))
      package = package.parent_path();
    const fs::path root = package.parent_path();
    if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
  }
  return roots;
}

// The directories of `python_path` that hold a file the archive carries, as
// the archive names them ("." for the case directory itself).
std::vector<std::string> bundledPythonPath(const std::vector<fs::path>& python_path, const fs::path& base,
                                           const std::vector<fs::path>& outside, const fs::path& common,
                                           const std::vector<BundledFile>& files, const ScrubContext& machine) {
  std::vector<std::string> out;
  const auto holdsAny = [](const fs::path& dir, const auto& paths, auto path_of) {
    return std::any_of(paths.begin(), paths.end(), [&](const auto& p) { return inside(path_of(p), dir).has_value(); });
  };
  for (const fs::path& dir : python_path) {
    std::string name;
    if (dir == base || inside(dir, base)) {
      if (holdsAny(dir, files, [](const BundledFile& f) { return f.source; }))
        name = dir == base ? "." : inside(dir, base)->string();
    } else if (holdsAny(dir, outside, [](const fs::path& p) { return p; })) {
      name = externalName(dir, common, machine).lexically_normal().string();
    }
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

}  // namespace

std::string fileTraceLibrary() { return ownFile("libminrepro_filetrace.so", MINREPRO_FILE_TRACE_LIBRARY); }

std::vector<fs::path> readTrace(const fs::path& trace_file) {
  std::vector<fs::path> out;
  std::set<std::string> seen;
  std::ifstream in(trace_file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '/' && seen.insert(line).second) out.emplace_back(line);
  return out;
}

std::vector<fs::path> trialPythonPath(const CaseConfig& config) {
  std::string value;
  if (config.command && config.command->env.contains("PYTHONPATH"))
    value = config.command->env.at("PYTHONPATH");
  else if (const char* inherited = std::getenv("PYTHONPATH"))
    value = inherited;
  std::vector<fs::path> dirs;
  for (const std::string& entry : text::searchPathEntries(value))
    if (fs::path(entry).is_absolute()) dirs.push_back(canonicalOr(entry));
  return dirs;
}

BundlePlan planBundle(const CaseConfig& config, const std::vector<fs::path>& traced,
                      const std::vector<fs::path>& python_path) {
  const fs::path base = canonicalOr(config.base_dir), work = canonicalOr(config.work_dir);
  BundlePlan plan;
  const fs::path output = canonicalOr(config.output);
  plan.output_read =
      std::any_of(traced.begin(), traced.end(), [&](const fs::path& p) { return canonicalOr(p) == output; });
  std::set<fs::path> own{canonicalOr(config.batch), canonicalOr(config.case_file)};
  if (!plan.output_read) own.insert(output);
  std::set<fs::path> argv_paths;
  if (config.command)
    for (const auto& arg : config.command->argv)
      if (fs::path(arg).is_absolute()) argv_paths.insert(canonicalOr(arg));
  std::set<std::string> names;
  auto add = [&](const std::string& name, const fs::path& source) {
    if (names.insert(name).second) plan.files.push_back({name, source});
  };
  std::vector<fs::path> candidates = traced;
  for (auto& p : globbed(config, base, work)) candidates.push_back(p);
  // The command's own files (a script) are bundled even when nothing was traced.
  for (const auto& p : argv_paths) candidates.push_back(p);
  // A file the command names in the case directory that is a link to one
  // outside it is bundled under external/, and that argument rewritten.
  std::map<fs::path, std::string> case_args;  // its real path -> the argument as written
  for (const auto& rel : commandCaseFiles(config)) {
    candidates.push_back(base / rel);
    case_args[canonicalOr(base / rel)] = "{case_dir}/" + rel.generic_string();
  }
  std::set<fs::path> seen;
  std::vector<fs::path> outside;
  for (const fs::path& raw : candidates) {
    const fs::path path = canonicalOr(raw);
    if (!seen.insert(path).second) continue;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec) || own.count(path) || inside(path, work) || environmentFile(path)) continue;
    if (const auto rel = inside(path, base)) {
      if (matchesAny(config.exclude_files, *rel))
        plan.left_out.push_back(rel->string() + " (trial.exclude_files)");
      else
        add(rel->string(), path);
      continue;
    }
    if (!systemFile(path)) outside.push_back(path);
  }
  // Files from outside keep their layout relative to one another (a script's
  // siblings stay its siblings) under external/, named from their nearest
  // common directory, which holds the PYTHONPATH directories they came from
  // too (a package keeps its name below the directory Python found it in).
  std::vector<fs::path> roots = python_path;
  for (const fs::path& root : packageRoots(outside))
    if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
  std::vector<fs::path> path_dirs;
  for (const fs::path& dir : roots)
    if (std::any_of(outside.begin(), outside.end(), [&](const fs::path& p) { return inside(p, dir).has_value(); }))
      path_dirs.push_back(dir);
  const fs::path common = commonDirectory(outside, path_dirs);
  const ScrubContext machine = machineScrubContext();
  for (const fs::path& path : outside) {
    const std::string name = externalName(path, common, machine).string();
    add(name, path);
    if (argv_paths.count(path) || case_args.count(path)) {
      plan.argv_rewrites[case_args.count(path) ? case_args.at(path) : path.string()] = "{case_dir}/" + name;
      plan.from_outside.push_back(path.string() + " -> " + name +
                                  " (named by the command, which the archive runs from there)");
    } else if (std::any_of(path_dirs.begin(), path_dirs.end(),
                           [&](const fs::path& dir) { return inside(path, dir).has_value(); })) {
      plan.from_outside.push_back(path.string() + " -> " + name +
                                  " (found through PYTHONPATH or as an installed package's source, which the "
                                  "archive's PYTHONPATH finds as its copies)");
    } else {
      plan.from_outside.push_back(path.string() + " -> " + name +
                                  " (found by the reproducer only when read relative to a script the command names; "
                                  "code that opens it by this absolute path does not see the bundled copy)");
    }
  }
  plan.python_path = bundledPythonPath(roots, base, outside, common, plan.files, machine);
  return plan;
}

CaseConfig withBundledPaths(CaseConfig config, const BundlePlan& plan) {
  if (!config.command) return config;
  if (!plan.python_path.empty()) {
    std::string value;
    for (const std::string& dir : plan.python_path) value += (value.empty() ? "" : ":") + ("{case_dir}/" + dir);
    config.command->env["PYTHONPATH"] = value;
  }
  for (auto& arg : config.command->argv) {
    if (const auto named = plan.argv_rewrites.find(arg); named != plan.argv_rewrites.end()) {
      arg = named->second;  // "{case_dir}/link.py", a link out of the case directory
      continue;
    }
    if (!fs::path(arg).is_absolute()) continue;
    if (auto it = plan.argv_rewrites.find(canonicalOr(arg).string()); it != plan.argv_rewrites.end()) arg = it->second;
  }
  return config;
}

}  // namespace minrepro
