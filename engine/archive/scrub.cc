#include "engine/archive/scrub.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>

#include "engine/archive/secrets.h"

extern char** environ;

namespace minrepro {
namespace {

void addName(std::vector<std::string>& names, const char* name) {
  if (name != nullptr && *name != '\0' && std::find(names.begin(), names.end(), name) == names.end())
    names.emplace_back(name);
}

// Where a path may begin: after a separator a message or a YAML value puts
// before it. ':' counts (PATH lists, "file: /x"), but "https://" does not
// start a path, since its '/' is followed by another '/'.
// A path the failure classifier already cut at a temp directory
// ("<tmp>/alice-run/data.bin"): the rest of it may still name someone.
bool afterTmp(const std::string& s, std::size_t at) { return at >= 5 && s.compare(at - 5, 5, "<tmp>") == 0; }

bool pathCanStartAt(const std::string& s, std::size_t at) {
  if (s[at] != '/' || at + 1 >= s.size()) return false;
  if (afterTmp(s, at)) return true;
  const char next = s[at + 1];
  if (!(std::isalnum(static_cast<unsigned char>(next)) || next == '.' || next == '_' || next == '~' || next == '-'))
    return false;
  return at == 0 || std::string_view(" \t\n'\"(=[,`:;").find(s[at - 1]) != std::string_view::npos;
}

std::size_t pathEnd(const std::string& s, std::size_t at) {
  const std::size_t end = s.find_first_of(" \t\r\n'\"),]`:;<>", at);
  return end == std::string::npos ? s.size() : end;
}

std::string placeholderFor(std::string path, const ScrubContext& c) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::string name = path.substr(path.rfind('/') + 1);
  for (const auto& home : c.homes) {
    if (home.size() < 2 || path.compare(0, home.size(), home) != 0) continue;
    if (path.size() == home.size()) return "<home>";
    if (path[home.size()] != '/') continue;
    const bool deeper = path.find('/', home.size() + 1) != std::string::npos;
    return std::string("<home>/") + (deeper ? ".../" : "") + name;
  }
  return "<path>/" + name;
}

std::string scrubPaths(const std::string& s, const ScrubContext& c) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t at = s.find('/'); at != std::string::npos; at = s.find('/', at + 1)) {
    if (at < pos || !pathCanStartAt(s, at)) continue;
    const std::size_t end = pathEnd(s, at);
    const std::string path = s.substr(at, end - at);
    const std::size_t last = path.rfind('/');
    // "<tmp>/a/b/c.bin" -> "<tmp>/.../c.bin"; a path of its own -> "<path>/c.bin" or "<home>/...".
    const std::string scrubbed = !afterTmp(s, at) ? placeholderFor(path, c)
                                 : last == 0      ? path
                                                  : "/.../" + path.substr(last + 1);
    out.append(s, pos, at - pos).append(scrubbed);
    pos = end;
  }
  return out.append(s, pos);
}

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Every occurrence not glued to letters or digits: "jdoe" in "jdoe-ml" and
// "/home/jdoe" goes, "jdoe" in "jdoes" stays.
std::string replaceWord(const std::string& s, const std::string& word, const std::string& placeholder) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t at = s.find(word); at != std::string::npos; at = s.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if (at < pos || (at > 0 && isWordChar(s[at - 1])) || (end < s.size() && isWordChar(s[end]))) continue;
    out.append(s, pos, at - pos).append(placeholder);
    pos = end;
  }
  return out.append(s, pos);
}

// Names too short or too common to replace without mangling the text; none
// of them identifies a person.
bool worthReplacing(const std::string& name) {
  static const std::vector<std::string> kCommon = {"root", "nobody", "user", "localhost", "home", "path", "host"};
  return name.size() >= 2 && std::find(kCommon.begin(), kCommon.end(), name) == kCommon.end();
}

}  // namespace

namespace {
std::string lowered(const std::string& text) {
  std::string lower;
  for (const char ch : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower;
}
}  // namespace

ScrubContext machineScrubContext() {
  ScrubContext c;
  addName(c.homes, std::getenv("HOME"));
  addName(c.users, std::getenv("USER"));
  addName(c.users, std::getenv("LOGNAME"));
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) {
    addName(c.homes, pw->pw_dir);
    addName(c.users, pw->pw_name);
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) {
    addName(c.hosts, host);
    addName(c.hosts, std::string(host).substr(0, std::string(host).find('.')).c_str());
  }
  // The trials inherit this environment: a variable that names a secret
  // (PGPASSWORD, AWS_SECRET_ACCESS_KEY) may be quoted by the step's error.
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string pair(*entry);
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = pair.substr(0, eq), value = pair.substr(eq + 1);
    // The desktop's and the agent's sessions (XDG_SESSION_CLASS=user, SSH_AUTH_SOCK=/tmp/...) are none.
    const bool desktop = name.starts_with("XDG_") || name.starts_with("DBUS_") || name == "SSH_AUTH_SOCK";
    const auto has = [&](int (*is)(int)) {
      return std::any_of(value.begin(), value.end(), [&](char ch) { return is(static_cast<unsigned char>(ch)) != 0; });
    };
    const bool letters_and_digits = has(::isalpha) && has(::isdigit);
    // A name that says password, token or secret outright withholds its
    // value whatever it looks like (words, "valueAAone", a passphrase with
    // spaces); a weaker word (KEY, AUTH, SESSION) only a credential-looking
    // one, so that MY_KEY=enabled does not take every "enabled" out.
    static const std::set<std::string> kSwitchWords{"true", "false", "enabled", "disabled", "none", "null", "unset"};
    const bool outright = namesASecretOutright(name) && value.size() >= 6 && !kSwitchWords.count(lowered(value));
    if (namesASecret(name) && !desktop && !value.empty() && value.front() != '/' &&
        (outright || (value.size() >= 8 && letters_and_digits)))
      c.secrets.emplace_back(value, "<secret:env-" + name + ">");
  }
  return c;
}

namespace {
std::string withoutKnownSecrets(const std::string& text, const ScrubContext& c) {
  std::string known = text;
  for (const auto& [value, placeholder] : c.secrets)
    for (std::size_t at = 0; (at = known.find(value, at)) != std::string::npos; at += placeholder.size())
      known.replace(at, value.size(), placeholder);
  return known;
}
}  // namespace

std::string scrubSecretsOnly(const std::string& text, const ScrubContext& c) {
  return scrubRandomTokens(scrubSecrets(withoutKnownSecrets(text, c)));
}

std::function<std::string(const std::string&)> terminalScrubber(const CaseConfig& config) {
  return [scrub = scrubContextFor(config)](const std::string& line) { return scrubSecretsOnly(line, scrub); };
}

std::string scrubText(const std::string& text, const ScrubContext& c) {
  std::string s = scrubPaths(scrubSecrets(withoutKnownSecrets(text, c)), c);
  for (const auto& user : c.users)
    if (worthReplacing(user)) s = replaceWord(s, user, "<user>");
  for (const auto& host : c.hosts)
    if (worthReplacing(host)) s = replaceWord(s, host, "<host>");
  return scrubRandomTokens(s);
}

std::string scrubInterpreterPath(const std::string& path, const ScrubContext& c) {
  std::string s = path;
  for (const auto& home : c.homes)
    if (!home.empty() && home != "/" && s.rfind(home + "/", 0) == 0) {
      s = "<home>" + s.substr(home.size());
      break;
    }
  for (const auto& user : c.users)
    if (worthReplacing(user)) s = replaceWord(s, user, "<user>");
  for (const auto& host : c.hosts)
    if (worthReplacing(host)) s = replaceWord(s, host, "<host>");
  return s;
}

ScrubContext scrubContextFor(const std::map<std::string, std::string>& case_context) {
  ScrubContext c = machineScrubContext();
  const auto add = [&](std::vector<std::string>& names, const char* key) {
    if (const auto it = case_context.find(key); it != case_context.end()) addName(names, it->second.c_str());
  };
  add(c.users, "user");
  add(c.hosts, "host");
  add(c.hosts, "hostname");
  add(c.homes, "home");
  return c;
}

ScrubContext scrubContextFor(const CaseConfig& config) {
  ScrubContext c = scrubContextFor(config.context);
  if (!config.command) return c;
  for (const auto& [name, value] : withheldValues(*config.command))
    if (value.size() >= 4) c.secrets.emplace_back(value, withheldEnvPlaceholder(name));
  return c;
}

bool namesASecretOutright(const std::string& name) {
  const std::string lower = lowered(name);
  for (const char* word : {"password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "access_key",
                           "credential", "private_key", "privatekey", "webhook", "oauth"})
    if (lower.find(word) != std::string::npos) return true;
  return lower.ends_with("_pwd") || lower == "pgpass";
}

bool namesASecret(const std::string& name) {
  const std::string lower = lowered(name);
  if (namesASecretOutright(name)) return true;
  // Words of the name (DB_PASS, MY_SERVICE_KEY, SESSION_COOKIE), whole:
  // "pass" in NUM_PASSES or "key" in MONKEY is none.
  std::string word;
  for (const char c : lower + "_") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += c;
      continue;
    }
    for (const char* secret : {"pass", "pwd",       "pw",      "passcode", "key",     "keys",  "cookie", "auth",
                               "dsn",  "sessionid", "session", "pat",      "bearer",  "creds", "cred",   "sas",
                               "sig",  "hmac",      "login",   "license",  "licence", "pin",   "otp",    "totp"})
      if (word == secret) return true;
    // A key glued to what it opens (CLIENTKEY, WANDBKEY); MONKEY is six letters.
    if (word.size() >= 7 && word.ends_with("key")) return true;
    // A password or a login glued to its service (SSHPASS, DBPASS, BASICAUTH); not BYPASS, COMPASS, MULTIPASS.
    static const std::set<std::string> kNotSecret{"bypass",   "compass",   "surpass", "overpass", "underpass",
                                                  "trespass", "multipass", "onepass", "twopass",  "singlepass"};
    if (word.size() >= 6 && (word.ends_with("pass") || word.ends_with("auth")) && !kNotSecret.count(word)) return true;
    if (word == "conn" || word == "connstr" || word == "connection") return true;  // a DSN by another name
    word.clear();
  }
  return false;
}

std::string withheldEnvPlaceholder(const std::string& name) { return "<secret:env-" + name + ">"; }
bool isWithheldEnvPlaceholder(const std::string& value) { return withheldVariableName(value).has_value(); }

namespace {

constexpr std::string_view kArgumentSecretPrefix = "MINREPRO_SECRET_ARG";

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Where `scrubbed` differs from `original`: the span of `original` between
// their common prefix and their common suffix (what the placeholders took).
std::pair<std::size_t, std::size_t> replacedSpan(const std::string& original, const std::string& scrubbed) {
  std::size_t prefix = 0;
  while (prefix < original.size() && prefix < scrubbed.size() && original[prefix] == scrubbed[prefix]) ++prefix;
  std::size_t suffix = 0;
  while (suffix < original.size() - prefix && suffix < scrubbed.size() - prefix &&
         original[original.size() - 1 - suffix] == scrubbed[scrubbed.size() - 1 - suffix])
    ++suffix;
  return {prefix, original.size() - suffix};
}

}  // namespace

std::string argumentOfSecretVariable(const std::string& name) {
  return name.starts_with(kArgumentSecretPrefix) ? name.substr(kArgumentSecretPrefix.size()) : "";
}

std::map<std::string, std::string> withheldValues(const CommandTrial& command) {
  return withWithheldFromHere(withheldEnv(command.env));
}

std::vector<std::string> moveArgumentSecretsToEnv(CommandTrial& command) {
  std::vector<std::string> made;
  for (const auto& [name, value] : withheldEnv(command.env))
    for (std::string& arg : command.argv)
      if (value.size() >= 4) arg = replaceAll(arg, value, "{env:" + name + "}");
  for (std::size_t i = 1; i < command.argv.size(); ++i) {  // argv[0] is the program
    const std::string flag = command.argv[i - 1] + " ", original = flag + command.argv[i];
    const auto [from, to] = replacedSpan(original, scrubSecrets(original));
    if (from >= to || to <= flag.size()) continue;  // nothing, or only the flag (a secret of its own, found next)
    const std::size_t start = std::max(from, flag.size()) - flag.size(), end = to - flag.size();
    const std::string name = std::string(kArgumentSecretPrefix) + std::to_string(i);
    std::string& arg = command.argv[i];
    if (arg.substr(start, end - start).find("{env:") != std::string::npos) continue;  // named above already
    command.env[name] = arg.substr(start, end - start);
    arg = arg.substr(0, start) + "{env:" + name + "}" + arg.substr(end);
    made.push_back(name);
  }
  return made;
}

std::map<std::string, std::string> withheldEnv(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> withheld;
  for (const auto& [name, value] : env)
    if (!value.empty() && (namesASecret(name) || scrubSecrets(value) != value || randomToken(value)))
      withheld[name] = value;
  return withheld;
}

namespace {
// A commit's or a file's hash under a key that says so (git_commit, sha256,
// checksum, revision): the random-token rule would take it for a credential.
bool namedDigest(const std::string& key, const std::string& value) {
  const bool hex = value.size() >= 7 && value.size() <= 128 && std::all_of(value.begin(), value.end(), [](char ch) {
                     return std::isxdigit(static_cast<unsigned char>(ch));
                   });
  return hex && namesADigest(key);
}
}  // namespace

std::string scrubContextValue(const std::string& key, const std::string& value, const ScrubContext& c) {
  if (namesASecret(key) && !value.empty()) return "<secret:context-" + lowered(key) + ">";
  std::string scrubbed;
  if (namedDigest(key, value))
    scrubbed = value;
  else if (std::find(c.users.begin(), c.users.end(), value) != c.users.end())
    scrubbed = "<user>";
  else if (std::find(c.hosts.begin(), c.hosts.end(), value) != c.hosts.end())
    scrubbed = "<host>";
  else
    scrubbed = scrubText(value, c);
  std::string out;
  for (const char ch : scrubbed) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7f) {
      out += ch;
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
    out += escaped;
  }
  return out;
}

}  // namespace minrepro
