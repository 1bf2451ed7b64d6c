// Running code from an archive someone else made (see the header for why).
#include "core/process/sandbox.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "core/errors.h"
#include "core/paths.h"

namespace fs = std::filesystem;

namespace minrepro {

SandboxMode parseSandboxMode(const std::string& text) {
  if (text == "auto") return SandboxMode::Auto;
  if (text == "on") return SandboxMode::On;
  if (text == "off") return SandboxMode::Off;
  throw BadInputError("--sandbox must be auto, on or off, found '" + text + "'");
}

std::optional<std::string> findBubblewrap() {
  const std::string bwrap = resolveProgram("bwrap");
  if (bwrap.find('/') == std::string::npos || ::access(bwrap.c_str(), X_OK) != 0) return std::nullopt;
  return bwrap;
}

namespace {

constexpr const char* kWhat =
    "bubblewrap: no network, read-only file system, no capability, only the extracted case and each run's directory "
    "writable";
constexpr const char* kInstall = "install bubblewrap (apt-get install bubblewrap)";

// Strictly under /tmp, which the sandbox replaces with an empty tmpfs:
// "/tmp/", "/tmp/." and "/tmp/x/.." are /tmp itself, never bound (probe 25:
// PYTHONPATH=/tmp/ bound the whole of the host's /tmp, its sockets too).
bool underTmp(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (n.has_filename() == false) n = n.parent_path();
  const std::string s = n.string();
  return s.rfind("/tmp/", 0) == 0 && s.size() > 5;
}

// Whether a prefix is a Python environment (a venv, conda, an install tree
// with its lib/pythonX.Y): its whole tree is what its interpreter needs. A
// program elsewhere is bound alone, not the directory it lies in.
bool pythonEnvironment(const fs::path& prefix) {
  std::error_code ec;
  if (fs::exists(prefix / "pyvenv.cfg", ec) || fs::exists(prefix / "conda-meta", ec)) return true;
  for (fs::directory_iterator lib(prefix / "lib", ec), end; !ec && lib != end; lib.increment(ec))
    if (lib->path().filename().string().rfind("python", 0) == 0) return true;
  return false;
}

// A program's prefix: the directory above bin/ (a venv, conda, an install
// tree: its libraries and site-packages lie there), else its own directory.
fs::path prefixOf(const fs::path& program) {
  const fs::path dir = program.parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

// A venv's base interpreter home (pyvenv.cfg's `home = DIR`), if any.
std::optional<fs::path> venvHome(const fs::path& prefix) {
  std::ifstream cfg(prefix / "pyvenv.cfg");
  for (std::string line; std::getline(cfg, line);) {
    if (line.rfind("home", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const auto begin = line.find_first_not_of(' ', eq + 1);
    if (begin != std::string::npos) return fs::path(line.substr(begin));
  }
  return std::nullopt;
}

// The directories the .pth files of a prefix's site-packages add to
// Python's path (a venv whose torch lies in another environment: a line
// that is a directory; "import ..." lines run code and name none).
std::vector<fs::path> pthDirectories(const fs::path& prefix) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (fs::directory_iterator lib(prefix / "lib", ec), end; !ec && lib != end; lib.increment(ec)) {
    if (lib->path().filename().string().rfind("python", 0) != 0) continue;
    std::error_code inner;
    for (fs::directory_iterator it(lib->path() / "site-packages", inner), done; !inner && it != done;
         it.increment(inner)) {
      if (it->path().extension() != ".pth") continue;
      std::ifstream pth(it->path());
      for (std::string line; std::getline(pth, line);)
        if (!line.empty() && line.front() == '/') dirs.emplace_back(line);
    }
  }
  return dirs;
}

// The directories a Python puts on its path as it starts, asked of it once
// per interpreter (outside the sandbox: it is the user's own Python, whose
// .pth files run at every start anyway). A .pth file's "import" line (an
// editable install's finder, a sys.path.append) names its directory only
// when it runs.
std::vector<fs::path> startupPathOf(const fs::path& program) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<fs::path>> asked;
  std::lock_guard lock(mutex);
  if (const auto known = asked.find(program.string()); known != asked.end()) return known->second;
  std::vector<fs::path>& dirs = asked[program.string()];
  if (program.filename().string().rfind("python", 0) != 0) return dirs;
  char scratch[] = "/tmp/minrepro-sys-path-XXXXXX";
  if (::mkdtemp(scratch) == nullptr) return dirs;
  TrialSpec spec;
  spec.argv = {program.string(), "-c", "import sys; print(chr(10).join(p for p in sys.path if p))"};
  spec.work_dir = fs::path(scratch) / "run";
  spec.timeout = std::chrono::seconds(30);
  const TrialOutcome out = LocalExecutor().run(spec);
  std::istringstream lines(out.stdout_text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '/') dirs.emplace_back(line);
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return dirs;
}

// The directories of the shared libraries this process has loaded
// (LibTorch's among them, which minrepro-trial loads too), read once from
// /proc/self/maps: a build or a venv under /tmp keeps them there.
const std::vector<fs::path>& ownLibraryDirs() {
  static const std::vector<fs::path> dirs = [] {
    std::vector<fs::path> found;
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      const std::size_t slash = line.find(" /");
      if (slash == std::string::npos) continue;
      const fs::path dir = fs::path(line.substr(slash + 1)).parent_path();
      if (std::find(found.begin(), found.end(), dir) == found.end()) found.push_back(dir);
    }
    return found;
  }();
  return dirs;
}

// The entries of a path list (PYTHONPATH's ':', LD_PRELOAD's ':' or ' ').
std::vector<std::string> pathEntries(const std::string& value) {
  std::vector<std::string> entries;
  std::string part;
  for (const char c : value + ":") {
    if (c != ':' && c != ' ') {
      part += c;
      continue;
    }
    if (!part.empty()) entries.push_back(part);
    part.clear();
  }
  return entries;
}

// The places a machine keeps credentials in, which a run that can read the
// whole file system could print back in its message (probe 22 read the
// user's .npmrc and /etc/shadow): the password databases and, in this
// user's home, the keys and tokens of ssh, the clouds, the registries and
// the hubs. Hidden when they exist: an empty file or directory instead.
std::vector<fs::path> credentialPaths() {
  std::vector<fs::path> paths{"/etc/shadow",   "/etc/gshadow",          "/etc/shadow-",
                              "/etc/gshadow-", "/etc/security/opasswd", "/var/cache/debconf/passwords.dat"};
  for (const fs::path& home : userHomes())
    for (const char* place :
         {".ssh", ".aws", ".azure", ".gnupg", ".docker", ".kube", ".netrc", ".git-credentials", ".pypirc", ".npmrc",
          ".config/gcloud", ".config/gh", ".huggingface", ".cache/huggingface/token", ".config/rclone", ".s3cfg",
          ".pgpass", ".my.cnf",
          // package indexes' credentials (pip's index URLs, Maven, Gradle, Cargo), API keys, a vault's token
          ".pip", ".config/pip", ".m2", ".cargo/credentials", ".cargo/credentials.toml", ".cargo/config.toml",
          ".cargo/config", ".kaggle", ".vault-token", ".config/wandb", ".netrc-wandb", ".databrickscfg", ".terraform.d",
          ".config/hub", ".config/git/credentials", ".gradle/gradle.properties", ".boto", ".dockercfg", ".oci",
          ".minikube", ".config/doctl", ".yarnrc", ".env", ".password-store", ".local/share/keyrings", ".gitconfig",
          ".config/git/config",  // url.insteadOf rules carry tokens
          // the ML services' and tools' logins a training machine holds (probe 27), and the shells'
          // start-up files, where `export WANDB_API_KEY=...` lives
          ".cache/huggingface/stored_tokens", ".config/kaggle", ".ngc", ".config/openai", ".claude.json", ".claude",
          ".codex", ".modal.toml", ".replicate", ".neptune", ".comet.config", ".clearml.conf", ".sky", ".runpod",
          ".ollama", ".mc", ".config/containers", ".condarc", ".yarnrc.yml", ".gem/credentials", ".config/dvc",
          ".local/share/jupyter/runtime", ".ipython", ".local/share/fish", ".terraformrc", ".pulumi", ".snowsql",
          ".config/snowflake", ".dbt", ".cloudflared", ".config/sops", ".subversion", ".config/ngrok", ".vercel",
          ".fly", ".config/heroku", ".streamlit", ".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile",
          ".zshenv", ".pam_environment", ".config/fish", ".bash_login", ".bash_aliases", ".zlogin", ".kshrc",
          // probe 31: ClearML's default file, MLflow's tracking login, the coding assistants' tokens, direnv's
          "clearml.conf", ".mlflow", ".config/github-copilot", ".gemini", ".envrc", ".config/clearml",
          // browsers' profiles (cookies, saved passwords) and shells' histories (a token typed once)
          ".mozilla", ".config/chromium", ".config/google-chrome", ".config/BraveSoftware", ".config/microsoft-edge",
          ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history", ".node_repl_history",
          ".sqlite_history", ".rediscli_history", ".lesshst"})
      paths.push_back(home / place);
  // Where a variable puts them instead (probe 27: none of these was hidden).
  for (const char* variable : {"GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                               "TF_CLI_CONFIG_FILE", "HF_TOKEN_PATH", "KUBECONFIG", "DOCKER_CONFIG", "CLOUDSDK_CONFIG",
                               "NETRC", "PIP_CONFIG_FILE", "KAGGLE_CONFIG_DIR", "AZURE_CONFIG_DIR", "PGPASSFILE",
                               "BOTO_CONFIG", "OCI_CLI_CONFIG_FILE", "DATABRICKS_CONFIG_FILE",
                               // and the tools' own (probe 30): gh, cargo, gpg, pass, npm, rclone, zsh
                               "GH_CONFIG_DIR", "GNUPGHOME", "PASSWORD_STORE_DIR", "NPM_CONFIG_USERCONFIG",
                               "RCLONE_CONFIG", "CARGO_HOME", "WANDB_CONFIG_DIR", "GIT_CONFIG_GLOBAL"})
    if (const char* value = std::getenv(variable); value != nullptr && *value == '/')
      for (const std::string& entry : pathEntries(value)) paths.emplace_back(entry);
  // A directory a variable names, with the places above below it: the XDG
  // base directories (huggingface_hub keeps its token under
  // $XDG_CACHE_HOME, clusters often set it), zsh's start-up directory.
  const auto under = [&](const char* variable, std::initializer_list<const char*> places) {
    if (const char* value = std::getenv(variable); value != nullptr && *value == '/')
      for (const char* place : places) paths.push_back(fs::path(value) / place);
  };
  under("HF_HOME", {"token", "stored_tokens"});
  under("XDG_CACHE_HOME", {"huggingface/token", "huggingface/stored_tokens"});
  under("XDG_CONFIG_HOME",
        {"gcloud", "gh",   "hub",        "rclone",          "pip",           "wandb",         "kaggle", "openai",
         "doctl",  "dvc",  "containers", "git/credentials", "git/config",    "snowflake",     "sops",   "ngrok",
         "heroku", "fish", "chromium",   "google-chrome",   "BraveSoftware", "microsoft-edge"});
  under("XDG_DATA_HOME", {"keyrings", "fish", "jupyter/runtime"});
  under("ZDOTDIR", {".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zsh_history"});
  return paths;
}

// The entries of PYTHONPATH, LD_PRELOAD, LD_LIBRARY_PATH and PYTHONHOME
// that this user's own environment gives the run: an entry the run's
// environment adds (an archive's trial.env, which compare sets) binds
// nothing, whatever it names (probe 25: an archive's "PYTHONPATH: /tmp/probe"
// showed that host directory to the payload). The extracted case, where an
// archive's own entries point, is bound anyway.
std::vector<std::string> ownPathEntries(const TrialSpec& spec) {
  std::vector<std::string> own;
  for (const char* name : {"PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONHOME"}) {
    const char* inherited = std::getenv(name);
    if (inherited == nullptr || std::find(spec.env_unset.begin(), spec.env_unset.end(), name) != spec.env_unset.end())
      continue;
    const std::vector<std::string> mine = pathEntries(inherited);
    const auto set = spec.env_set.find(name);
    for (const std::string& entry : set == spec.env_set.end() ? mine : pathEntries(set->second))
      if (std::find(mine.begin(), mine.end(), entry) != mine.end()) own.push_back(entry);
  }
  return own;
}

// What a trial needs from under /tmp, bound read-only over the sandbox's
// empty /tmp: the program (a Python environment's whole prefix, its real
// path, a venv's base and the directories its .pth files add, asked of the
// Python too), minrepro's own directory and those of the libraries it
// loaded (LibTorch: the harness's trials run minrepro-trial), and this
// user's own entries of PYTHONPATH, LD_PRELOAD and LD_LIBRARY_PATH.
// Everything else under /tmp stays hidden.
std::vector<fs::path> tmpPathsToBind(const TrialSpec& spec, const fs::path& writable) {
  std::vector<fs::path> paths;
  // A file or directory as it is (a library named by LD_PRELOAD alone, not
  // its directory), when it exists and lies strictly under /tmp. A path
  // through a link ("/tmp/p/rootlnk/tmp", rootlnk -> /) is bound at its real
  // place only: bound where it was named, the mount's destination followed
  // the link and the host's /tmp appeared in the sandbox (probe 26). A link
  // itself is made again as the link it is, and its target bound by the
  // same rule ("sub/up/", up -> ../.., binds nothing: its target is /tmp).
  const std::function<void(const fs::path&)> add = [&](const fs::path& given) {
    std::error_code ec;
    fs::path p = given.lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    if (!p.is_absolute() || !underTmp(p) || !fs::exists(fs::symlink_status(p, ec))) return;
    if (fs::canonical(p.parent_path(), ec) != p.parent_path()) {
      if (const fs::path real = fs::canonical(p, ec); !ec) add(real);
      return;
    }
    if (std::find(paths.begin(), paths.end(), p) != paths.end()) return;
    paths.push_back(p);
    if (fs::is_symlink(p, ec)) add(fs::canonical(p, ec));
  };
  const auto addProgram = [&](const fs::path& program) {
    std::error_code ec;
    for (const fs::path& p : {program.lexically_normal(), fs::canonical(program, ec)}) {
      if (p.empty()) continue;
      add(p);
      if (!pythonEnvironment(prefixOf(p))) continue;
      add(prefixOf(p));
      if (const auto home = venvHome(prefixOf(p))) add(home->filename() == "bin" ? home->parent_path() : *home);
      for (const fs::path& dir : pthDirectories(prefixOf(p))) add(dir);
    }
    // Asked of the program outside the sandbox: never one the case brought.
    if (!isWithin(fs::absolute(program, ec).lexically_normal(), writable))
      for (const fs::path& dir : startupPathOf(program)) add(dir);
  };
  if (!spec.argv.empty()) addProgram(resolveProgram(spec.argv.front()));
  std::error_code ec;
  add(fs::read_symlink("/proc/self/exe", ec).parent_path());  // minrepro-trial, the op recorder, the hooks
  for (const fs::path& dir : ownLibraryDirs()) add(dir);
  for (const std::string& entry : ownPathEntries(spec)) add(entry);
  return paths;
}

}  // namespace

std::vector<fs::path> pythonEnvironmentDirs(const fs::path& named) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  const fs::path program = resolveProgram(named.string());
  for (const fs::path& p : {fs::absolute(program, ec), fs::canonical(program, ec)})
    if (!p.empty()) dirs.push_back(prefixOf(p).lexically_normal());
  for (const fs::path& dir : startupPathOf(program)) dirs.push_back(dir.lexically_normal());
  return dirs;
}

std::vector<fs::path> userHomes() {
  std::vector<fs::path> homes;
  if (const char* home = std::getenv("HOME"); home && *home == '/') homes.emplace_back(home);
  if (const passwd* user = ::getpwuid(::getuid()); user && user->pw_dir && *user->pw_dir == '/')
    if (std::find(homes.begin(), homes.end(), fs::path(user->pw_dir)) == homes.end()) homes.emplace_back(user->pw_dir);
  return homes;
}

SandboxChoice chooseSandbox(SandboxMode mode, bool made_here) {
  const auto bwrap = findBubblewrap();
  const std::string runs = "runs code from the archive (repro.py, op/repro_op.py, its bundled scripts) ";
  switch (mode) {
    case SandboxMode::Off:
      return {false, runs + "NOT in a sandbox (--sandbox off): it can do anything this user can"};
    case SandboxMode::On:
      if (!bwrap)
        throw BadInputError("--sandbox on: bwrap is not on PATH; " + std::string(kInstall) +
                            ", or use "
                            "--sandbox off for an archive you trust");
      return {true, runs + "in a sandbox (" + kWhat + ")"};
    case SandboxMode::Auto:
      break;
  }
  if (made_here)
    return {false, runs +
                       "without a sandbox: your minrepro made the archive and it is unchanged (its seal checks out; "
                       "--sandbox on to use one)"};
  if (!bwrap)
    return {false, runs +
                       "NOT in a sandbox: the archive was made elsewhere or changed since, and bwrap is not "
                       "installed (" +
                       kInstall + "); it can do anything this user can"};
  return {true, runs + "in a sandbox, as it was made elsewhere or changed since (" + kWhat + ")"};
}

TrialOutcome SandboxedExecutor::run(const TrialSpec& spec) {
  TrialSpec sandboxed = spec;
  sandboxed.own_session_keyring = true;
  // Each file the run writes into its writable directories, which lie on the
  // user's disk, stays under 256 MiB (a run wrote 300 MB files there).
  sandboxed.file_size_limit_bytes = std::uint64_t{256} << 20;
  const std::string writable = writable_.string();
  sandboxed.argv = {bwrap_,
                    "--die-with-parent",
                    "--new-session",
                    "--unshare-all",
                    "--cap-drop",
                    "ALL",
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc"};
  // Every tmpfs is the machine's memory: each has a size (unsized, /tmp and
  // /dev/shm took half the RAM each, and a run filled them). A step's
  // temporary files and a DataLoader's shared tensors fit in 1 GiB.
  const auto tmpfs = [&](const std::string& place, const char* size) {
    sandboxed.argv.insert(sandboxed.argv.end(), {"--size", size, "--tmpfs", place});
  };
  constexpr const char* kScratchSize = "1073741824";
  constexpr const char* kEmptySize = "1048576";
  tmpfs("/dev/shm", kScratchSize);
  tmpfs("/tmp", kScratchSize);
  std::error_code ec;
  // The host's daemons listen on sockets under /run (docker, D-Bus, the
  // user's agents): a network namespace does not stop connect() on a file.
  if (fs::is_directory("/run", ec)) tmpfs("/run", kEmptySize);
  for (const fs::path& p : tmpPathsToBind(spec, writable_.lexically_normal())) {
    // A link is made again as the link it is: bound, its target's relative
    // links (a dist-packages' "../../x86_64-linux-gnu/...") would climb
    // from the link's place instead of the target's.
    if (fs::is_symlink(p, ec))
      sandboxed.argv.insert(sandboxed.argv.end(), {"--symlink", fs::read_symlink(p, ec).string(), p.string()});
    else
      sandboxed.argv.insert(sandboxed.argv.end(), {"--ro-bind", p.string(), p.string()});
  }
  for (const fs::path& dir : hidden_)
    if (fs::is_directory(dir, ec)) tmpfs(dir.string(), kEmptySize);
  for (const fs::path& named : credentialPaths()) {
    const fs::path place = fs::canonical(named, ec);  // a link's target is what a run would read
    if (ec) continue;
    if (fs::is_directory(place, ec))
      tmpfs(place.string(), kEmptySize);
    else if (fs::is_regular_file(place, ec))
      sandboxed.argv.insert(sandboxed.argv.end(), {"--ro-bind", "/dev/null", place.string()});
  }
  // The trial's environment is set inside the sandbox, by bwrap, never on
  // bwrap itself: an archive's trial.env naming LD_PRELOAD would otherwise
  // load the archive's library into bwrap before the sandbox exists. And
  // bwrap starts without what the run must not see: it is the sandbox's
  // PID 1, whose /proc/1/environ a run reads (probe 26: the shell's
  // HF_TOKEN, removed from the run by --unsetenv, was read there).
  sandboxed.env_set.clear();
  sandboxed.env_unset = spec.env_unset;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string name = std::string(*entry).substr(0, std::string(*entry).find('='));
    if ((inherited_ && !inherited_(name)) || spec.env_set.contains(name)) sandboxed.env_unset.push_back(name);
  }
  for (const auto& [name, value] : spec.env_set) sandboxed.argv.insert(sandboxed.argv.end(), {"--setenv", name, value});
  const std::string run_dir = spec.work_dir.string();
  sandboxed.argv.insert(sandboxed.argv.end(),
                        {"--bind", writable, writable, "--bind", run_dir, run_dir, "--chdir", run_dir, "--"});
  sandboxed.argv.insert(sandboxed.argv.end(), spec.argv.begin(), spec.argv.end());
  // A run that cannot start is the program's failure to start, not bwrap's.
  TrialOutcome outcome = inner_.run(sandboxed);
  // bwrap says why the sandbox could not be made ("bwrap: Can't bind mount
  // ..."): the run did not start, which is not "did not reproduce" (probe 26).
  if (outcome.end == TrialEnd::Exited && outcome.exit_code == 1 && outcome.stderr_text.rfind("bwrap: ", 0) == 0) {
    outcome.end = TrialEnd::FailedToStart;
    outcome.start_error = outcome.stderr_text;
  }
  return outcome;
}

}  // namespace minrepro
