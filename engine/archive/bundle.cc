#include "engine/archive/bundle.h"

#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <set>

#include "core/process/process.h"

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

// The deepest directory that holds every file ("/" when only the root does).
fs::path commonDirectory(const std::vector<fs::path>& files) {
  if (files.empty()) return "/";
  fs::path common = files.front().parent_path();
  for (const fs::path& f : files)
    while (common != common.root_path() && inside(f, common) == std::nullopt) common = common.parent_path();
  return common;
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

BundlePlan planBundle(const CaseConfig& config, const std::vector<fs::path>& traced) {
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
  for (const auto& rel : commandCaseFiles(config)) candidates.push_back(base / rel);
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
  // common directory: the archive does not carry the home directory or the
  // user's name in its paths.
  const fs::path common = commonDirectory(outside);
  for (const fs::path& path : outside) {
    const fs::path rel =
        common.has_filename() ? common.filename() / path.lexically_relative(common) : path.relative_path();
    const std::string name = (fs::path("external") / rel).string();
    add(name, path);
    if (argv_paths.count(path)) {
      plan.argv_rewrites[path.string()] = "{case_dir}/" + name;
      plan.from_outside.push_back(path.string() + " -> " + name +
                                  " (named by the command, which the archive runs from there)");
    } else {
      plan.from_outside.push_back(path.string() + " -> " + name +
                                  " (found by the reproducer only when read relative to a script the command names; "
                                  "code that opens it by this absolute path does not see the bundled copy)");
    }
  }
  return plan;
}

CaseConfig withBundledPaths(CaseConfig config, const BundlePlan& plan) {
  if (!config.command) return config;
  for (auto& arg : config.command->argv) {
    if (!fs::path(arg).is_absolute()) continue;
    if (auto it = plan.argv_rewrites.find(canonicalOr(arg).string()); it != plan.argv_rewrites.end()) arg = it->second;
  }
  return config;
}

}  // namespace minrepro
