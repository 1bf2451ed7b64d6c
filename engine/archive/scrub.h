// Scrubbing what identifies the machine and its user from text that leaves
// it (REPORT.md; docs/method.md, "Scrubbing personal data": "remove personal identifiers and needless
// paths"): the home directory, user and host names, absolute paths.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/case_config.h"

namespace minrepro {

struct ScrubContext {
  std::vector<std::string> homes;  // home directories ($HOME, the passwd entry)
  std::vector<std::string> users;  // login names ($USER, $LOGNAME, the passwd entry)
  std::vector<std::string> hosts;  // host names (full and short)
  // Values known to be secrets wherever they appear (trial.env's withheld
  // values, a step that prints its environment), with their placeholders.
  std::vector<std::pair<std::string, std::string>> secrets;
};

// This process's user and machine.
ScrubContext machineScrubContext();

// This machine's names and those a case's captured context records (the
// training machine's `user`, `host`, `hostname`, `home`), which may differ.
ScrubContext scrubContextFor(const std::map<std::string, std::string>& case_context);
// The case's: its context's names, and the values of trial.env that stay
// out of the archive (withheldEnv below) as secrets wherever they appear.
ScrubContext scrubContextFor(const CaseConfig& config);

// Whether a name (a context key, an environment variable) says its value is
// a secret: it holds password, passwd, secret, token, api_key, apikey,
// access_key, credential or private_key, in any case.
bool namesASecret(const std::string& name);
// Whether it says so outright (PASSWORD, API_TOKEN, CLIENT_SECRET, MYSQL_PWD):
// its value is a secret whatever it looks like.
bool namesASecretOutright(const std::string& name);

// The placeholder a value that stays out of the archive is written as, and
// whether a value is one: "<secret:env-NAME>" for trial.env's NAME.
std::string withheldEnvPlaceholder(const std::string& name);
bool isWithheldEnvPlaceholder(const std::string& value);

// trial.env's variables whose values stay out of the archive (#43): a name
// that names a secret, or a value in which a token rule finds one (a token
// in an environment variable has no other way into the archive's case.yaml
// and repro.py, which set them). repro.py then takes such a variable from
// the environment it runs in; shrink's self-check gives it the value.
std::map<std::string, std::string> withheldEnv(const std::map<std::string, std::string>& env);

// The command as the archive carries it: an argument that holds a withheld
// variable's value names the variable instead ("{env:NAME}",
// core/case_config.h), and a secret a rule finds in an argument or after
// the flag before it (--api-key VALUE) moves into a variable of its own,
// MINREPRO_SECRET_ARG<i>, which the archive withholds in turn (repro.py
// and a run of the case take it from where they run; the self-check gives
// it). Returns the names of the variables it made.
std::vector<std::string> moveArgumentSecretsToEnv(CommandTrial& command);

// The argument whose secret a variable of moveArgumentSecretsToEnv holds
// ("4" for MINREPRO_SECRET_ARG4); "" for any other variable.
std::string argumentOfSecretVariable(const std::string& name);

// The values of `command`'s variables that the archive leaves out, as this
// run knows them: an archive's own case, run again, holds placeholders,
// whose values come from where it runs (core/case_config.h).
std::map<std::string, std::string> withheldValues(const CommandTrial& command);

// A context value as the archive carries it (case.yaml, REPORT.md): a value
// that is a user or host name in full becomes "<user>" / "<host>", even a
// common one (root, localhost); anything else goes through scrubText; control
// characters are written as \xNN, so a value cannot forge lines. A value
// whose key names a secret (password, secret, token, api_key, credential,
// private_key, in any case) is "<secret:context-KEY>" whole: a bare key
// or password has no shape a rule could find. A hash in hex under a key
// that names one (git_commit, sha256, checksum, revision) stays as it is.
std::string scrubContextValue(const std::string& key, const std::string& value, const ScrubContext& context);

// Tokens of known shapes and e-mail addresses become "<secret:RULE>" and
// "<email>" (engine/archive/secrets.h). Absolute paths become "<path>/NAME"
// (under a home directory "<home>/NAME", "<home>/.../NAME" when deeper): the
// file name helps a reader and rarely identifies anyone. Then user and host
// names, as whole words, become "<user>" and "<host>". URLs and relative
// paths are left alone. Last, a run of characters that reads like a
// generated credential of no known shape becomes "<secret:random-token>"
// (scrubRandomTokens, engine/archive/secrets.h).
std::string scrubText(const std::string& text, const ScrubContext& context);

// Only the secrets of scrubText: the context's known secret values, tokens
// of known shapes, keyed values and generated-looking tokens; paths, user
// and host names stay. For what the user's own terminal shows.
std::string scrubSecretsOnly(const std::string& text, const ScrubContext& context);
// scrubSecretsOnly with the case's context, for Log::setScreenFilter.
std::function<std::string(const std::string&)> terminalScrubber(const CaseConfig& config);

// An interpreter's path (signature.txt's `python:`), which verify looks for
// again: a home directory becomes "<home>" and the rest of the path stays
// (the same user finds it under their home); user and host names, as whole
// words, become "<user>" and "<host>". A system path (/usr/bin/python3,
// /opt/conda/bin/python) is kept as it is.
std::string scrubInterpreterPath(const std::string& path, const ScrubContext& context);

}  // namespace minrepro
