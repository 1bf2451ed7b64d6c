// Running code from an archive someone else made, without trusting it.
//
// verify, regress and compare run the archive's repro.py, op/repro_op.py
// and bundled step: a stranger's code with this user's rights (a booby-
// trapped repro.py wrote a marker file anywhere it liked and the run still
// said "reproduced"). A SandboxedExecutor runs each trial inside bubblewrap
// (bwrap, a well-kept tool Debian ships): no network, the whole file system
// read-only, a private /tmp, /run and /dev (no host socket of a daemon to
// connect to), new PID, IPC and UTS namespaces, its own session (no
// terminal input injection), no capability even when minrepro runs as root
// (root's bwrap kept them: the run remounted / writable), only the
// variables any machine has (no token of the user's shell), and two
// directories writable: the extracted archive and the run's own directory,
// never the scratch directory around them, where minrepro makes the next
// runs' directories (a run planted a link there that minrepro then wrote
// through).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/process/process.h"

namespace minrepro {

enum class SandboxMode { Auto, On, Off };

// "auto", "on" or "off"; throws BadInputError naming --sandbox otherwise.
SandboxMode parseSandboxMode(const std::string& text);

// The bwrap program on PATH; nothing when it is not installed.
std::optional<std::string> findBubblewrap();

// Whether to sandbox, and the words that say so (for the first line of output):
// On needs bwrap (BadInputError saying how to install it); Auto sandboxes
// every archive but those this user's minrepro wrote and nobody changed
// (`made_here`: engine/archive/seal.h, a seal the archive cannot forge)
// when bwrap is there, and says when it cannot.
struct SandboxChoice {
  bool used = false;
  std::string describe;  // "in a sandbox (bubblewrap: ...)" / "NOT in a sandbox: ..."
};
SandboxChoice chooseSandbox(SandboxMode mode, bool made_here);

// A Python's own directories: its prefix as named and as resolved (a venv's
// python is a link to its base) and what it puts on sys.path as it starts
// (site-packages, the directories its .pth files add), asked of it once.
// The sandbox binds those under /tmp; the self-check does not count what a
// run reads there as the case's.
std::vector<std::filesystem::path> pythonEnvironmentDirs(const std::filesystem::path& program);

// This user's home directories: $HOME, and the one the password database
// names when HOME names another (sudo, a changed HOME). What a sandboxed run
// must not read may lie in either.
std::vector<std::filesystem::path> userHomes();

// Runs each trial of `inner` inside bwrap, with `writable` (the extracted
// archive) and the trial's work directory the only directories it may
// write. /tmp is an empty tmpfs but
// for what the trial's own programs need from it, bound read-only: a
// Python in a venv under /tmp, minrepro itself installed there, the
// PYTHONPATH it is given.
class SandboxedExecutor : public Executor {
 public:
  // `hidden`: directories replaced by an empty one inside the sandbox (the
  // archive key's: an archive that read it could seal forgeries).
  // `inherited`: which of this process's variables the trial gets (the
  // trial's own env_set aside); empty: all.
  SandboxedExecutor(Executor& inner, std::filesystem::path writable, std::string bwrap,
                    std::vector<std::filesystem::path> hidden = {},
                    std::function<bool(const std::string&)> inherited = {})
      : inner_(inner),
        writable_(std::move(writable)),
        bwrap_(std::move(bwrap)),
        hidden_(std::move(hidden)),
        inherited_(std::move(inherited)) {}
  TrialOutcome run(const TrialSpec& spec) override;

 private:
  Executor& inner_;
  std::filesystem::path writable_;
  std::string bwrap_;
  std::vector<std::filesystem::path> hidden_;
  std::function<bool(const std::string&)> inherited_;
};

}  // namespace minrepro
