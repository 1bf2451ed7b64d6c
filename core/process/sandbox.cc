// Running code from an archive someone else made (see the header for why).
#include "core/process/sandbox.h"

#include <unistd.h>

#include "core/errors.h"

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

constexpr const char* kWhat = "bubblewrap: no network, read-only file system, only the scratch directory writable";
constexpr const char* kInstall = "install bubblewrap (apt-get install bubblewrap)";

}  // namespace

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
    return {false, runs + "NOT in a sandbox: the archive was made elsewhere or changed since, and bwrap is not "
                          "installed (" + kInstall + "); it can do anything this user can"};
  return {true, runs + "in a sandbox, as it was made elsewhere or changed since (" + kWhat + ")"};
}

TrialOutcome SandboxedExecutor::run(const TrialSpec& spec) {
  TrialSpec sandboxed = spec;
  const std::string writable = writable_.string();
  sandboxed.argv = {bwrap_,
                    "--die-with-parent",
                    "--new-session",
                    "--unshare-all",
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                    "--bind",
                    writable,
                    writable,
                    "--chdir",
                    spec.work_dir.string(),
                    "--"};
  sandboxed.argv.insert(sandboxed.argv.end(), spec.argv.begin(), spec.argv.end());
  // A run that cannot start is the program's failure to start, not bwrap's.
  TrialOutcome outcome = inner_.run(sandboxed);
  if (outcome.end == TrialEnd::Exited && outcome.exit_code == 1 &&
      outcome.stderr_text.rfind("bwrap: execvp " + spec.argv.front(), 0) == 0) {
    outcome.end = TrialEnd::FailedToStart;
    outcome.start_error = outcome.stderr_text;
  }
  return outcome;
}

}  // namespace minrepro
