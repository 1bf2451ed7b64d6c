// Secrets in what leaves the machine (see the header for why).
#include "engine/archive/secrets.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string_view>

#include "core/text_lines.h"

namespace minrepro {
namespace {

// One token shape. `secret` is the group replaced (0: the whole match):
// rules that need the words around a secret to find it keep those words.
struct Rule {
  const char* id;
  std::regex pattern;
  int secret = 0;
  // For rules keyed by a word: whether the value found is one (null: always).
  bool (*is_secret)(const std::string& value) = nullptr;
  // A rule whose match takes in the words that lead to its secret (a tool's
  // name): applied again while it finds more (keytool's -srcstorepass V1
  // -deststorepass V2), as one pass finds only the first.
  bool again = false;
};

// A keyed value that reads like a credential rather than a count, a word of
// an error or a name in code ("token: 123456", "password: required",
// "secret = get_secret()"): six characters or more, a letter among them, and
// a digit or a symbol other than _ . - /, or twelve characters or more.
// A value as the rules capture it, without the quotes around it.
std::string unquoted(const std::string& value) {
  const bool quoted = value.size() >= 2 && (value.front() == '"' || value.front() == '\'');
  return quoted ? value.substr(1, value.size() - 2) : value;
}

bool credentialLike(const std::string& quoted) {
  const std::string value = unquoted(quoted);
  bool letter = false, other = false, upper = false, lower = false;
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    letter = letter || std::isalpha(byte) || byte >= 0x80;  // a letter of another script too
    upper = upper || std::isupper(byte);
    lower = lower || std::islower(byte) || byte >= 0x80;
    // A special token's brackets ('[MASK]', '<unk>') are no symbol of a credential.
    other = other || std::isdigit(byte) ||
            (std::ispunct(byte) && std::string_view("_.-/[]<>|").find(c) == std::string_view::npos);
  }
  // Letters alone: mixed case from twelve characters (not a name in code,
  // hf_hub_cache), any from twenty (a passphrase).
  return value.size() >= 6 && letter && (other || (value.size() >= 12 && upper && lower) || value.size() >= 20);
}

// Bits per character of `value`'s own distribution of characters: a random
// token of 16 letters and digits has about 4, a word or a name under 3.
double entropyBits(const std::string& value) {
  std::array<int, 256> counts{};
  for (const char c : value) ++counts[static_cast<unsigned char>(c)];
  double bits = 0;
  for (const int n : counts)
    if (n > 0) bits -= n / static_cast<double>(value.size()) * std::log2(n / static_cast<double>(value.size()));
  return bits;
}

// A value after a looser key (a word and a space, "token Tk8Hh3Jj5Kk7",
// or a short word, "key: ..."), where an error's words and a module's
// names meet too: eight characters or more, letters and digits both, no
// dot (a module path, "fc.weight"), and random enough (gitleaks' generic
// rule's test, 3 bits per character).
bool tokenLike(const std::string& value) {
  const std::string bare = unquoted(value);
  bool letter = false, digit = false;
  for (const char c : bare) {
    letter = letter || std::isalpha(static_cast<unsigned char>(c));
    digit = digit || std::isdigit(static_cast<unsigned char>(c));
  }
  return bare.size() >= 8 && letter && digit && bare.find('.') == std::string::npos && entropyBits(bare) >= 3;
}

// Tokens known by their vendor's prefix (gitleaks' rules, their ids), with
// the shortest body a real one has; the body's alphabet is loose on purpose.
void addVendorRules(std::vector<Rule>& r, const std::function<std::regex(const char*)>& re) {
  static const std::vector<std::pair<const char*, const char*>> kPrefixed{
      {"gcp-oauth-access-token", R"(\bya29\.[0-9A-Za-z_-]{20,})"},
      {"docker-pat", R"(\bdckr_pat_[A-Za-z0-9_-]{20,})"},
      {"npm-access-token", R"(\bnpm_[A-Za-z0-9]{36}\b)"},
      {"pypi-upload-token", R"(\bpypi-AgE[A-Za-z0-9_-]{50,})"},
      {"replicate-api-token", R"(\br8_[A-Za-z0-9]{30,}\b)"},
      {"groq-api-key", R"(\bgsk_[A-Za-z0-9]{40,}\b)"},
      {"vault-service-token", R"(\bhv[sb]\.[A-Za-z0-9_-]{24,})"},
      {"sendgrid-api-token", R"(\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})"},
      {"shopify-access-token", R"(\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b)"},
      {"digitalocean-pat", R"(\bdo[opr]_v1_[a-f0-9]{64}\b)"},
      {"telegram-bot-api-token", R"(\b[0-9]{5,16}:A[A-Za-z0-9_-]{34}\b)"},
      {"atlassian-api-token", R"(\bATATT3[A-Za-z0-9_=-]{40,})"},
      {"twilio-api-key", R"(\bSK[0-9a-fA-F]{32}\b)"},
      {"pinecone-api-key", R"(\bpcsk_[A-Za-z0-9_]{30,})"},
      {"grafana-service-account-token", R"(\bgl(?:sa|c)_[A-Za-z0-9_+/=-]{32,})"},
      {"linear-api-key", R"(\blin_api_[A-Za-z0-9]{40}\b)"},
      {"nvidia-api-key", R"(\bnvapi-[A-Za-z0-9_-]{40,})"},
      {"volcengine-access-key", R"(\bAKLT[A-Za-z0-9_-]{20,})"},
      {"alibaba-access-key-id", R"(\bLTAI[A-Za-z0-9]{12,20}\b)"},
      {"xai-api-key", R"(\bxai-[A-Za-z0-9]{40,})"},
      {"facebook-access-token", R"(\bEAA[A-Za-z0-9]{80,})"},
      {"square-access-token", R"(\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,})"},
      {"age-secret-key", R"(\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})"},
      {"langsmith-api-key", R"(\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10})"},
      {"perplexity-api-key", R"(\bpplx-[A-Za-z0-9]{40,})"},
      {"tavily-api-key", R"(\btvly-[A-Za-z0-9_-]{20,})"},
      {"notion-api-token", R"(\bntn_[A-Za-z0-9]{40,})"},
      {"webhook-signing-secret", R"(\bwhsec_[A-Za-z0-9+/=]{24,})"},
      {"sentry-org-token", R"(\bsntry[su]_[A-Za-z0-9+/=_-]{32,})"},
      {"gcp-oauth-client-secret", R"(\bGOCSPX-[A-Za-z0-9_-]{24,})"},
      {"gcp-refresh-token", R"((?:^|[^A-Za-z0-9])(1//0[A-Za-z0-9_-]{30,}))"},
      {"newrelic-user-api-key", R"(\bNRAK-[A-Z0-9]{27}\b)"},
      {"dynatrace-api-token", R"(\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}\b)"},
      {"gitlab-runner-token", R"(\bglrt-[A-Za-z0-9_-]{20,})"},
      {"rubygems-api-token", R"(\brubygems_[a-f0-9]{48}\b)"},
      {"prefect-api-token", R"(\bpnu_[A-Za-z0-9]{36}\b)"},
      {"supabase-access-token", R"(\bsbp_[a-f0-9]{40}\b)"},
      {"flyio-access-token", R"(\bfo1_[A-Za-z0-9_-]{39,})"},
      {"doppler-api-token", R"(\bdp\.pt\.[A-Za-z0-9]{43}\b)"},
      {"gcs-hmac-access-id", R"(\bGOOG1[A-Z0-9]{50,})"},
      {"postman-api-token", R"(\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}\b)"},
      {"databricks-api-token", R"(\bdapi[a-f0-9]{32}(?:-\d)?\b)"},
      {"mattermost-webhook-url", R"(https?://[^\s/]+/hooks/[A-Za-z0-9]{20,})"},
      {"discord-webhook-url",
       R"((?:https?://)?(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{20,})"},
      {"zapier-webhook-url", R"((?:https?://)?hooks\.zapier\.com/hooks/catch/[0-9]+/[A-Za-z0-9]+/?)"},
      {"tencent-secret-id", R"(\bAKID[A-Za-z0-9]{32}\b)"},
      {"terraform-api-token", R"(\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,})"},
      {"twitter-bearer-token", R"(\bA{22}[A-Za-z0-9%]{40,})"},
      {"fcm-server-key", R"(\bAAAA[A-Za-z0-9_-]{7}:[A-Za-z0-9_-]{100,})"},
      {"yandex-iam-token", R"(\bt1\.[A-Za-z0-9_-]+={0,2}\.[A-Za-z0-9_-]{40,}={0,2})"},
      {"django-secret-key", R"(\bdjango-insecure-[^\s"']{20,})"},
      {"teams-webhook-url", R"((?:https?://)?[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{20,})"},
  };
  for (const auto& [id, pattern] : kPrefixed) r.push_back({id, re(pattern)});
}

// Tools whose password flag is their own (sqlcmd's -P, keytool's
// -storepass, mysql's -pV), on a shell line and as Python prints a command's
// list of arguments (CalledProcessError: Command '['sqlcmd', ..., '-P',
// 'V']'; probe 45): the tool's name, its line up to a shell separator, then
// the flag and its value, apart (-P V, '-P', 'V', --password=V) or attached
// (-pV, -p'V', rar's -hpV).
void addToolFlagRules(std::vector<Rule>& r, const std::function<std::regex(const char*)>& re) {
  struct ToolFlag {
    const char* tools;
    const char* flags;
    bool attached;
  };
  static const ToolFlag kToolFlags[]{
      {"sqlcmd|bcp|osql|isql|ipmitool|zip|unzip|zipcloak|ssh-keygen", "-P", false},
      {"ssh-keygen", "-N", false},
      {"mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|mongofiles", "-p|--password", false},
      {"keytool|jarsigner", "-(?:src|dest|new)?(?:store|key)pass", false},
      {"plink|pscp|psftp", "-pw", false},
      {"ldap[a-z]+", "-w", false},
      {"redis-cli", "-a", false},
      {"sshpass", "-p", false},
      {"sshpass", "-p", true},
      {"lftp", "-u", false},
      {"openssl", "-passin|-passout|-pass|-k", false},
      {R"(az\s+login)", "-p|--password", false},
      {R"((?:docker|podman|buildah|nerdctl|skopeo|helm\s+registry)\s+login)", "-p|--password", false},
      {"mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlpump|mariadb|mariadb-dump", "-p", true},
      {"rar|unrar|winrar", "-hp|-p", true},
      {"7z|7za|7zr", "-p", true},
  };
  for (const ToolFlag& t : kToolFlags) {
    const std::string pattern = std::string(R"(((?:^|[^A-Za-z0-9_.-])(?:)") + t.tools +
                                R"()(?:\.exe)?\b[^\n;|&]*?(?:\s["']?|["']\s*,\s*["'])(?:)" + t.flags + ")" +
                                (t.attached ? R"(["']?)" : R"((?:\s+["']?|["']?\s*,\s*["']|=["']?))") +
                                R"()([^\s"'<]{3,}))";
    r.push_back({"command-line-secret", re(pattern.c_str()), 2, nullptr, true});
  }
}

// gitleaks' rules for the token shapes a training job meets (model hubs,
// LLM APIs, clouds, code hosts, chat webhooks), in ECMAScript syntax; the
// AWS secret key and the password in a URL as detect-secrets finds them
// (gitleaks needs entropy checks for those).
const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = [] {
    const auto re = [](const char* pattern) {
      return std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    };
    const auto icase = [](const std::string& pattern) {
      return std::regex(pattern, std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
    };
    std::vector<Rule> r;
    // The password may hold any sub-delimiter ($, !, &, ...) and ':' unencoded (RFC 3986's userinfo),
    // and an '@' that should have been encoded: the host begins after the last '@' before the path.
    // First: a user part that is a token of its own (s3://AKIA...:password@bucket) would otherwise be
    // replaced first, and its placeholder's '<' and '>' end the password's match.
    // '<', '>', '{', '}', '|' and '^' are no URL's characters either, and passwords hold them (probe 24).
    r.push_back({"basic-auth-url", re(R"((://[^:/?#\[\]@\s]*:)([^/?#\[\]\s]+)(@))"), 2});
    // A password with '/', '?' or '#' unencoded (which RFC 3986 forbids and people write: "Hx#4kz/Qw9?Lm2")
    // up to the first '@': the rule above ends at them, and kept the whole password (probe 23).
    r.push_back({"basic-auth-url", re(R"((://[^:/?#\[\]@\s]*:)([^@\s\[\]]*[/?#][^@\s\[\]]*)(@))"), 2});
    r.push_back({"huggingface-access-token", re(R"(\bhf_[a-zA-Z]{34}\b)")});
    r.push_back({"huggingface-organization-api-token", re(R"(\bapi_org_[a-zA-Z]{34}\b)")});
    r.push_back(
        {"openai-api-key",
         re(R"(\bsk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|\bsk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20}\b)")});
    r.push_back({"anthropic-api-key", re(R"(\bsk-ant-api03-[a-zA-Z0-9_\-]{93}AA\b)")});
    r.push_back({"aws-access-token", re(R"(\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b)")});
    r.push_back(
        {"aws-secret-access-key",
         re(R"(([Aa][Ww][Ss].{0,20}?(?:[Kk][Ee][Yy]|[Pp][Ww][Dd]?|[Pp][Aa][Ss][Ss](?:[Ww][Oo][Rr][Dd])?|[Tt][Oo][Kk][Ee][Nn]).{0,20}?['"=:\s])([0-9a-zA-Z/+]{40})(?![0-9a-zA-Z/+]))"),
         2});
    r.push_back({"github-pat", re(R"(\bghp_[0-9a-zA-Z]{36}\b)")});
    // 82 characters after the prefix today; longer ones are no less secret.
    r.push_back({"github-fine-grained-pat", re(R"(\bgithub_pat_\w{82,}\b)")});
    r.push_back({"github-oauth", re(R"(\bgho_[0-9a-zA-Z]{36}\b)")});
    r.push_back({"github-app-token", re(R"(\b(?:ghu|ghs)_[0-9a-zA-Z]{36}\b)")});
    r.push_back({"github-refresh-token", re(R"(\bghr_[0-9a-zA-Z]{36}\b)")});
    r.push_back({"gitlab-pat", re(R"(\bglpat-[\w-]{20}\b)")});
    r.push_back({"gcp-api-key", re(R"(\bAIza[\w-]{35}\b)")});
    r.push_back({"slack-token", re(R"(\bxox[baprs]-[0-9a-zA-Z-]{10,}\b)")});
    r.push_back({"slack-app-token", re(R"(\bxapp-\d-[A-Z0-9]+-\d+-[0-9a-f]{32,}\b)")});
    // The Slack web client's session cookie (d=xoxd-...), URL-encoded.
    r.push_back({"slack-session-cookie", re(R"(\bxoxd-[A-Za-z0-9%+/=_-]{20,})")});
    // An Entra ID (Azure AD) application's client secret: three characters, a
    // digit, "Q~", then 31 to 34 more.
    r.push_back({"azure-ad-client-secret",
                 re(R"((?:^|[^A-Za-z0-9_~.-])([A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?![A-Za-z0-9_~.-]))"), 1});
    r.push_back({"stripe-access-token", re(R"(\b(?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99}\b)")});
    r.push_back({"jwt", re(R"(\bey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)")});
    r.push_back({"slack-webhook-url",
                 re(R"((?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56})")});
    // An HTTP header as a client library prints it in an error ("Authorization: Bearer ..."):
    // the credential has no shape a token rule could find.
    r.push_back(
        {"authorization-header",
         re(R"(((?:[Aa]uthorization|AUTHORIZATION|[Pp]roxy-[Aa]uthorization)["']?\s*[:=]\s*["']?(?:Bearer|bearer|BEARER|Basic|basic|Token|token|Bot|ApiKey)\s+)([A-Za-z0-9._~+/=:-]{6,}))"),
         2});
    // A credential in a URL's query (?password=, &access_token=, Azure's &sig=).
    r.push_back(
        {"url-query-credential",
         icase(
             R"(([?&;](?:password|passwd|pwd|pass|secret|token|access_token|auth_token|refresh_token|api_key|apikey|key|sig|signature|client_secret|X-Amz-Signature|X-Amz-Credential|AWSAccessKeyId|X-Goog-Signature|X-Goog-Credential)=)([^&#\s"'<>]+))"),
         2});
    // A value after a word that names a secret: password=, "api_key": "...", X-Api-Key:, --password=,
    // a DSN's password=, a cookie's sessionid=, Azure's AccountKey=, and what follows Cookie: or Set-Cookie:.
    // A quoted value may hold spaces (password="correct horse battery staple").
    const char* keys =
        "(?:password|passwd|passphrase|pwd|pass|secret|secret[_-]?key|token|api[_-]?key|apikey|access[_-]?key|"
        "account[_-]?key|auth|auth[_-]?token|client[_-]?secret|session[_-]?id|sessionid|csrf[_-]?token|csrftoken|"
        "cookie|private[_-]?key|credentials?|creds|[_-]key|key[_-]data|authorization|pw|pepper|salt|"
        "(?:store|key)pass|"
        // The word in other languages, as a message or a config in them writes it.
        "passwort|kennwort|contrase\xc3\xb1"
        "a|contrasena|senha|wachtwoord|has\xc5\x82o|haslo|parola|"
        "l\xc3\xb6senord|salasana|mot[_ -]de[_ -]passe|"
        "\xd0\xbf\xd0\xb0\xd1\x80\xd0\xbe\xd0\xbb\xd1\x8c|\xd0\x9f\xd0\xb0\xd1\x80\xd0\xbe\xd0\xbb\xd1\x8c|"
        "\xe5\xaf\x86\xe7\xa0\x81|\xe5\xaf\x86\xe7\xa2\xbc|\xe5\x8f\xa3\xe4\xbb\xa4|"
        "\xe3\x83\x91\xe3\x82\xb9\xe3\x83\xaf\xe3\x83\xbc\xe3\x83\x89|"
        "\xeb\xb9\x84\xeb\xb0\x80\xeb\xb2\x88\xed\x98\xb8)";
    r.push_back(
        {"keyed-secret",
         icase(
             std::string(R"(((?:^|[^A-Za-z0-9<])[A-Za-z0-9_-]*)") + keys +
             R"(["']?\s*(?:=>|:=|[:=])\s*(?:bytearray\(|bytes\()?[bBrRuUfF]{0,2})("(?:[^"\\\n<]|\\.){6,}"|'(?:[^'\\\n<]|\\.){6,}'))"),
         2, &credentialLike});
    r.push_back(
        {"keyed-secret",
         icase(std::string(R"(((?:^|[^A-Za-z0-9<])[A-Za-z0-9_-]*)") + keys +
               R"(["']?\s*(?:=>|:=|[:=]|\xef\xbc\x9a)\s*(?:bytearray\(|bytes\()?(?:[bBrRuUfF]{1,2}(?=["']))?["']?)()"
               // A value with a character no name in code has ("django-insecure-q7%1(+hg...") runs
               // on past brackets; a name does not, and one called (auth=HTTPDigestAuth(...), a
               // getter) is no value: the rules for what it is called with find those.
               R"([^\s"',;&}<>\[\]()]*[^\s"',;&}<>\[\]()A-Za-z0-9_.][^\s"',;}<>\[\]]*|)"
               R"([^\s"',;&}<>\[\]()]+(?=[\s"',;&}<>\[\])]|$)))"),
         2, &credentialLike});
    // A command line's flag and its value: --password VALUE, --api-key VALUE,
    // mysql's -pVALUE, sshpass -p VALUE; a bare "Bearer VALUE".
    r.push_back(
        {"command-line-secret",
         icase(
             R"(((?:^|\s)--?(?:[a-z0-9]+[-_])*(?:password|passwd|passphrase|pass|(?:store|key)pass|secret|token|api[-_]?key|key|auth)\s+["']?)([^\s"'<]+))"),
         2, &credentialLike});
    r.push_back({"bearer-token", re(R"((\b[Bb]earer\s+)([A-Za-z0-9._~+/=-]{8,}))"), 2, &credentialLike});
    // Looser keys, the value tested harder (tokenLike): a short word ("key: ...",
    // wandb.login(key='...'), pw=, pat=), or a word and a space (a netrc's
    // "password VALUE", "token VALUE", "AUTH VALUE").
    r.push_back({"keyed-secret",
                 icase(R"(((?:^|[^A-Za-z0-9_<-])key["']?\s*(?:=>|[:=])\s*["']?)([^\s"',;&}<>\[\]()]+))"), 2,
                 &tokenLike});
    r.push_back({"keyed-secret",
                 icase(R"(((?:^|[^A-Za-z0-9_<-])(?:pw|pat|pin)["']?\s*(?:=>|[:=])\s*["']?)([^\s"',;&}<>\[\]()]+))"), 2,
                 &credentialLike});
    r.push_back(
        {"keyed-secret",
         icase(
             R"(((?:^|[^A-Za-z0-9_<-])(?:password|passwd|passphrase|pwd)\s*(?:\s|\bis\s+|\bwas\s+|->\s*|=>\s*|\|\s*)["']?)([^\s"',;&}<>\[\]()|]+))"),
         2, &credentialLike});
    // A key and its value as a pair: [('user', 'bob'), ('password', 'V')], ('X-Auth-Token', 'V').
    r.push_back({"keyed-secret",
                 icase(std::string(R"((["'][A-Za-z0-9_-]*)") + keys + R"(["']\s*,\s*["'])([^"'\n]{6,}))"), 2,
                 &credentialLike});
    // An HTML form's field: <input name="password" value="V">.
    r.push_back(
        {"keyed-secret",
         icase(std::string(R"((\bname\s*=\s*["'][A-Za-z0-9_-]*)") + keys + R"(["'][^>]*?\bvalue\s*=\s*["'])([^"']+))"),
         2});
    // Authorization schemes whose credential is more than one token: Azure's
    // SharedKey account:signature, Digest's fields, AWS's signature.
    r.push_back(
        {"authorization-header",
         icase(
             R"(((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:SharedKey|SharedKeyLite|Digest|AWS4-HMAC-SHA256|HMAC-SHA256|Negotiate|NTLM|OAuth|SSWS|GenieKey|Splunk)\s+)([^"'\n]{6,}))"),
         2});
    r.push_back({"digest-response", icase(R"((\b(?:response|cnonce)\s*=\s*["']?)([0-9a-f]{16,}))"), 2});
    // A function's or an OAuth flow's code in a URL's query (Azure Functions' ?code=).
    r.push_back({"url-query-credential", re(R"(([?&;]code=)([^&#\s"'<>]+))"), 2, &credentialLike});
    r.push_back({"basic-credentials", re(R"((\bBasic\s+)([A-Za-z0-9+/]{12,}={0,2}))"), 2, &credentialLike});
    // A database's connection string: sqlplus scott/V@orcl, jdbc:oracle:thin:scott/V@host, a .pgpass line.
    r.push_back(
        {"connection-string-password",
         icase(
             R"(((?:\bsqlplus\s+|jdbc:oracle:[a-z]+:|\bexp\s+|\bimp\s+|\boracle\s+|\bconn(?:ect)?\s+)[A-Za-z0-9_$#]+/)([^@\s/]+)(@))"),
         2});
    // The same as an item of a command's argument list ('sqlplus', '-s', 'system/V@//db:1521/X'),
    // and Data Pump's and the loader's (expdp system/V@ORCL).
    r.push_back(
        {"connection-string-password",
         re(R"((\b(?:sqlplus|expdp|impdp|sqlldr|rman|dgmgrl)\b[^\n;|&]*?(?:\s["']?|["']\s*,\s*["'])[A-Za-z0-9_$#]+/)([^@\s/"']+)(@))"),
         2});
    // A cookie header carries nothing but credentials: every pair after it goes.
    r.push_back({"cookie-header", icase(R"((\b(?:set-)?cookie\s*:\s*)([^\n]+))"), 2});
    r.push_back({"pgpass-line", re(R"((^[A-Za-z0-9_.*-]+:(?:\d+|\*):[A-Za-z0-9_.*-]+:[A-Za-z0-9_.*-]+:)(\S+)$)"), 2});
    addToolFlagRules(r, re);
    r.push_back(
        {"command-line-secret",
         re(R"((\b(?:smbclient|rpcclient|smbmap)\b[^\n;|&]*?(?:\s["']?|["']\s*,\s*["'])-U(?:\s*["']?|["']\s*,\s*["'])[^\s%"']+%)([^\s"'<]+))"),
         2});
    // Windows' net use: the password before /user: or after it.
    r.push_back(
        {"command-line-secret", icase(R"((\bnet\s+use\b(?:\s+[A-Za-z]:)?\s+\\\\\S+\s+)([^\s/"'*]+)(?=\s+/user:))"), 2});
    r.push_back({"command-line-secret", icase(R"((\bnet\s+use\b[^\n]*?\s/user:\S+\s+)([^\s/"'*]+))"), 2});
    // SQL's CREATE USER ... IDENTIFIED BY 'V' (MySQL quotes it in a 1064 error).
    r.push_back(
        {"sql-password", icase(R"((\bidentified\s+(?:with\s+\S+\s+)?by\s+(?:password\s+)?["']?)([^"'\s;]+))"), 2});
    // A user and a password flag side by side, whatever the tool (sqlcmd's
    // -U sa -P V in an environment variable's value, mongo's -u admin -p V).
    r.push_back(
        {"command-line-secret",
         re(R"(((?:^|[\s"'])-[Uu](?:\s+|["']\s*,\s*["'])[^\s"']+(?:\s+|["']\s*,\s*["'])-[Pp](?:\s+["']?|["']\s*,\s*["']))([^\s"'<]{3,}))"),
         2, &credentialLike});
    r.push_back(
        {"command-line-secret", re(R"((\bhtpasswd\s+-[a-zA-Z]*b[a-zA-Z]*\s+\S+\s+\S+\s+["']?)([^\s"'<]+))"), 2});

    r.push_back(
        {"keyed-secret",
         icase(
             R"(((?:^|[^A-Za-z0-9_<-])(?:token|auth|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|login)\s+)([^\s"',;&}<>\[\]()]+))"),
         2, &tokenLike});
    // The value inside an element named for a secret: <password>...</password>.
    r.push_back({"keyed-secret", icase(std::string(R"((<[A-Za-z0-9_:-]*)") + keys + R"(>\s*)([^<\s][^<]*)(?=</))"), 2});
    // A password as Python's HTTP clients take it: auth=('user', 'pw'), HTTPBasicAuth('user', 'pw').
    r.push_back(
        {"python-auth-tuple",
         re(R"(((?:\b[a-z_]*auth\s*=\s*[\(\[]|\b[A-Z][A-Za-z]*Auth\()\s*(?:username\s*=\s*)?["'][^"']*["']\s*,\s*(?:password\s*=\s*)?["'])([^"']+))"),
         2});
    // pydantic's SecretStr holding the value, as a repr written by hand shows it.
    r.push_back({"python-secret-value", re(R"((\bSecret(?:Str|Bytes)\(\s*[bB]?["'])([^"']+))"), 2});
    r.push_back(
        {"command-line-secret", re(R"((\bdocker\s+login\b[^\n]*?\s(?:-p|--password)[= ]\s*["']?)([^\s"'<]+))"), 2});
    addVendorRules(r, re);
    // The same command lines as Python prints a command's arguments, a list
    // (subprocess.CalledProcessError: Command '['curl', '-u', 'alice:pw', ...]'):
    // a flag's value is the next quoted item (probe 44).
    r.push_back(
        {"command-line-secret", re(R"(((?:^|[\[(,]\s*)["'](?:-u|--user)["']\s*,\s*["'][^"':]+:)([^"']{4,}))"), 2});
    r.push_back(
        {"command-line-secret",
         re(R"(((?:^|[\[(,]\s*)["'](?:-p|-pw|-w|-a|--?(?:[a-z0-9]+[-_])*(?:password|passwd|passphrase|pass|(?:store|key)pass|secret|token|api[-_]?key|auth))["']\s*,\s*["'])([^"']{4,}))"),
         2, &credentialLike});
    r.push_back({"command-line-secret", re(R"(((?:^|[\[(,]\s*)["']-p)([^\s"'<]{4,})(?=["']))"), 2, &credentialLike});
    // curl -u user:password, --user=user:password.
    r.push_back({"cli-user-password", re(R"(((?:^|\s)(?:-u|--user)[= ]\s*["']?[^\s:"'<]+:)([^\s"']{4,}))"), 2});
    return r;
  }();
  return kRules;
}

const std::regex& emailPattern() {
  static const std::regex kEmail(R"(\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b)");
  return kEmail;
}

const std::regex& privateKeyBegin() {
  static const std::regex kBegin(R"(-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)");
  return kBegin;
}

// std::regex recurses per character: a long line is read in pieces cut at
// whitespace (a token holds none), at most kPiece bytes each.
constexpr std::size_t kPiece = 4096;

std::vector<std::string_view> pieces(std::string_view line) {
  std::vector<std::string_view> out;
  while (line.size() > kPiece) {
    std::size_t cut = line.find_last_of(" \t", kPiece);
    if (cut == std::string_view::npos || cut == 0) cut = kPiece;
    out.push_back(line.substr(0, cut));
    line.remove_prefix(cut);
  }
  out.push_back(line);
  return out;
}

// A value the scrubber already put in a secret's place: a URL's password
// scrubbed to "<secret:basic-auth-url>" still has a URL password's shape
// (probe 37: the archive's scrubbed case.yaml was warned of as verbatim).
bool scrubbedAlready(const std::string& value) {
  return value.starts_with("<secret:") && value.ends_with(">") && value.find('>') == value.size() - 1;
}

std::string replaceRule(const std::string& text, const Rule& rule) {
  const std::string placeholder = std::string("<secret:") + rule.id + ">";
  if (rule.secret == 0) return std::regex_replace(text, rule.pattern, placeholder);
  std::string out;
  auto from = text.cbegin();
  for (std::sregex_iterator it(text.begin(), text.end(), rule.pattern), end; it != end; ++it) {
    const auto& m = *it;
    if (rule.is_secret && !rule.is_secret(m[rule.secret].str())) continue;
    out.append(from, m[rule.secret].first).append(placeholder);
    from = m[rule.secret].second;
  }
  return out.append(from, text.cend());
}

// Whether any rule could match: a word a keyed rule or a tool's flag needs, an '@' (an
// e-mail, a URL's password), "://", four colons (a .pgpass line), or a run
// of 16 characters of a token's alphabet (every token rule's shape). Most
// lines of code and prose have none, and ~90 regular expressions need not
// run on them (a 2 MiB bundled text file took 18 s without this).
bool mayHoldSecret(std::string_view piece) {
  // Other languages' words by their first letters: пар(оль), Пар(оль), 密, 口令, パス, 비밀.
  static constexpr std::string_view kWords[]{"pass",
                                             "pwd",
                                             "secret",
                                             "token",
                                             "key",
                                             "auth",
                                             "cookie",
                                             "session",
                                             "csrf",
                                             "cred",
                                             "private",
                                             "login",
                                             "code",
                                             "bearer",
                                             "basic",
                                             "sig",
                                             "hooks",
                                             "pw=",
                                             "pw:",
                                             "pw\"",
                                             "pw'",
                                             "pat=",
                                             "pat:",
                                             "pat\"",
                                             "pat'",
                                             "pin=",
                                             "pin:",
                                             "pin\"",
                                             "pin'",
                                             "jdbc",
                                             "sqlplus",
                                             "-----",
                                             "mysql",
                                             "ldap",
                                             "redis",
                                             "plink",
                                             "smbclient",
                                             "htpasswd",
                                             "sqlcmd",
                                             "bcp",
                                             "isql",
                                             "osql",
                                             "ipmitool",
                                             "zip",
                                             "mongo",
                                             "ssh-keygen",
                                             "keytool",
                                             "jarsigner",
                                             "pscp",
                                             "psftp",
                                             "lftp",
                                             "openssl",
                                             "rar",
                                             "7z",
                                             "mariadb",
                                             "net use",
                                             "rpcclient",
                                             "identified",
                                             "expdp",
                                             "impdp",
                                             "sqlldr",
                                             "rman",
                                             "-p",
                                             "pepper",
                                             "salt",
                                             "akid",
                                             "atlasv1",
                                             "docker",
                                             "az ",
                                             "-u",
                                             "--user",
                                             "oracle",
                                             "conn ",
                                             "connect ",
                                             "wort",
                                             "contrase",
                                             "senha",
                                             "wachtwoord",
                                             "has\xc5\x82",
                                             "haslo",
                                             "parola",
                                             "senord",
                                             "salasana",
                                             "\xd0\xbf\xd0\xb0\xd1\x80",
                                             "\xd0\x9f\xd0\xb0\xd1\x80",
                                             "\xe5\xaf\x86",
                                             "\xe5\x8f\xa3\xe4\xbb\xa4",
                                             "\xe3\x83\x91\xe3\x82\xb9",
                                             "\xeb\xb9\x84\xeb\xb0\x80"};  // 비밀
  std::string lower(piece);
  std::size_t run = 0, colons = 0;
  for (char& c : lower) {
    const auto byte = static_cast<unsigned char>(c);
    run = std::isalnum(byte) || std::string_view("_-+/").find(c) != std::string_view::npos ? run + 1 : 0;
    if (run >= 16 || c == '@') return true;
    colons += c == ':';
    c = static_cast<char>(std::tolower(byte));
  }
  if (colons >= 4 || lower.find("://") != std::string::npos) return true;
  return std::any_of(std::begin(kWords), std::end(kWords),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::string scrubByRules(std::string piece) {
  if (!mayHoldSecret(piece)) return piece;
  for (const Rule& rule : rules())
    for (int pass = 0; pass < 8; ++pass) {
      std::string replaced = replaceRule(piece, rule);
      const bool more = rule.again && replaced != piece;
      piece = std::move(replaced);
      if (!more) break;
    }
  return std::regex_replace(piece, emailPattern(), "<email>");
}

// The piece as a reader sees it: %XX decoded (a form body, a query
// string, a JSON body quoted into a URL: password%3D...), zero-width
// characters gone (one inside a token splits it for a rule, not for a
// reader).
// An escape's character when it is printable ASCII (what a secret's own
// characters are), else nullopt: the escape is kept as written.
std::optional<char> asciiOf(std::string_view digits, int base) {
  if (digits.empty()) return std::nullopt;
  for (const char c : digits)
    if (!(base == 16 ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c))))
      return std::nullopt;
  const long code = std::stol(std::string(digits), nullptr, base);
  if (code < 0x20 || code > 0x7e) return std::nullopt;
  return static_cast<char>(code);
}

// The escape at the start of `rest` (%3D, \u0070, \x3d, &#61;, &#x3d;,
// &quot;): its character and its length; nullopt when none is there.
std::optional<std::pair<char, std::size_t>> escapeAt(std::string_view rest) {
  static const std::array<std::pair<std::string_view, char>, 10> kEntities{{{"&quot;", '"'},
                                                                            {"&apos;", '\''},
                                                                            {"&amp;", '&'},
                                                                            {"&lt;", '<'},
                                                                            {"&gt;", '>'},
                                                                            {"&equals;", '='},
                                                                            {"&colon;", ':'},
                                                                            {"&commat;", '@'},
                                                                            {"&lowbar;", '_'},
                                                                            {"&sol;", '/'}}};
  if (rest.starts_with('%') && rest.size() >= 3)
    if (auto c = asciiOf(rest.substr(1, 2), 16)) return std::pair{*c, std::size_t{3}};
  if ((rest.starts_with("\\u") || rest.starts_with("\\U")) && rest.size() >= 6)
    if (auto c = asciiOf(rest.substr(2, 4), 16)) return std::pair{*c, std::size_t{6}};
  if (rest.starts_with("\\x") && rest.size() >= 4)
    if (auto c = asciiOf(rest.substr(2, 2), 16)) return std::pair{*c, std::size_t{4}};
  if (rest.starts_with("&#")) {
    const std::size_t end = rest.find(';');
    const bool hex = rest.size() > 2 && (rest[2] == 'x' || rest[2] == 'X');
    if (end != std::string_view::npos && end < 10)
      if (auto c = asciiOf(rest.substr(hex ? 3 : 2, end - (hex ? 3 : 2)), hex ? 16 : 10)) return std::pair{*c, end + 1};
  }
  for (const auto& [entity, c] : kEntities)
    if (rest.starts_with(entity)) return std::pair{c, entity.size()};
  // A quote escaped inside a JSON or Python string ("{\"password\": \"...\"}").
  if (rest.starts_with("\\\"") || rest.starts_with("\\'")) return std::pair{rest[1], std::size_t{2}};
  // A slash as JSON may escape it ("https:\/\/user:pass@host\/").
  if (rest.starts_with("\\/")) return std::pair{'/', std::size_t{2}};
  return std::nullopt;
}

// The length of a CSI sequence's parameters and final byte from `from`
// (ESC [ 31 m: from the 3), 0 when they do not end it.
std::size_t csiLength(std::string_view rest, std::size_t from) {
  const auto at = [&](std::size_t k) { return k < rest.size() ? static_cast<unsigned char>(rest[k]) : 0; };
  std::size_t i = from;
  while (at(i) >= 0x20 && at(i) < 0x40) ++i;
  return at(i) >= 0x40 && at(i) < 0x7f ? i + 1 : 0;
}

// The length of a terminal escape sequence at the start of `rest`, 0 when
// none: a CSI colour (ESC [ or its one-character C1 form), an OSC
// hyperlink or title and the DCS, SOS, PM and APC strings (ended by BEL or
// ESC \), a character set's selection (ESC ( B, which tput sgr0 prints),
// ESC 7. A terminal shows none of it, so one inside a token splits it for
// a rule, not for a reader (probes 38 and 39: an OSC 8 hyperlink and
// ESC ( B kept whole tokens).
std::size_t terminalEscapeLength(std::string_view rest) {
  // A string (OSC, DCS, SOS, PM, APC) runs to BEL or ST, ESC \ or C1's own.
  const auto stringLength = [&](std::size_t from) {
    const std::size_t bel = rest.find('\x07', from), st = rest.find("\x1b\\", from), c1 = rest.find("\xc2\x9c", from);
    const std::size_t end = std::min({bel, st, c1});
    return end == std::string_view::npos ? rest.size() : end + (end == bel ? 1 : 2);
  };
  if (rest.starts_with("\xc2\x9b")) return csiLength(rest, 2);  // C1 CSI, as UTF-8
  if (rest.size() >= 2 && rest[0] == '\xc2') {
    const auto kind = static_cast<unsigned char>(rest[1]);
    if (kind == 0x90 || kind == 0x98 || kind == 0x9d || kind == 0x9e || kind == 0x9f) return stringLength(2);
  }
  if (rest.size() < 2 || rest[0] != '\x1b') return 0;
  const char kind = rest[1];
  if (kind == '[') return csiLength(rest, 2);
  if (kind == ']' || kind == 'P' || kind == 'X' || kind == '^' || kind == '_') return stringLength(2);
  std::size_t i = 1;
  while (i < rest.size() && rest[i] >= 0x20 && rest[i] < 0x30) ++i;  // a character set's selection: ESC ( B
  return i < rest.size() && rest[i] >= 0x30 && rest[i] < 0x7f ? i + 1 : 0;
}

// The bytes minrepro's own escaping wrote as "\xNN" (a control byte, a
// byte of a non-ASCII character such as U+200B) put back, and what a
// terminal erases gone: a character a backspace overstrikes (probe 40: a
// zero-width space written "\xe2\x80\x8b" kept an AWS key whole).
std::string unescapedBytes(std::string_view piece) {
  std::string out;
  const auto put = [&](char c) {
    if (c != '\b')
      out += c;
    else if (!out.empty())
      out.pop_back();
  };
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if (piece.substr(i, 2) == "\\x" && i + 3 < piece.size() &&
        std::isxdigit(static_cast<unsigned char>(piece[i + 2])) &&
        std::isxdigit(static_cast<unsigned char>(piece[i + 3]))) {
      const int value = std::stoi(std::string(piece.substr(i + 2, 2)), nullptr, 16);
      if (value < 0x20 || value >= 0x7f) {  // printable ones are escapeAt's, as any escape of a character
        put(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    put(piece[i]);
  }
  return out;
}

// The code point at piece[i] (`length` its UTF-8 bytes), or -1 where the
// bytes are no UTF-8.
long codePointAt(std::string_view piece, std::size_t i, std::size_t& length) {
  length = text::utf8SequenceAt(piece, i);
  if (length == 0) return length = 1, -1;
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(piece[i + k]); };
  if (length == 1) return byte(0);
  long cp = byte(0) & (0xff >> (length + 1));
  for (std::size_t k = 1; k < length; ++k) cp = (cp << 6) | (byte(k) & 0x3f);
  return cp;
}

// What renders as nothing, or as a mark on the character before it: inside a
// token it splits the token for a rule, not for a reader. Unicode's
// Default_Ignorable_Code_Point (zero-width characters, the soft hyphen,
// variation selectors, invisible operators, Hangul fillers, bidi and tag
// characters; probe 35: a soft hyphen, probe 41: U+2062, U+FE0F, U+E0100,
// U+17B4), the interlinear annotation characters, the combining diacritical
// marks (U+0332 under each character of a token: every one stays
// legible), and the control characters a terminal shows as nothing (NUL,
// BEL, DEL, C1; a tab or a line break is a visible break and stays).
bool invisibleCodePoint(long cp) {
  static constexpr std::array<std::pair<long, long>, 24> kRanges{
      {{0x00, 0x08},     {0x0e, 0x1f},       {0x7f, 0x9f},       {0xad, 0xad},      {0x300, 0x36f},
       {0x61c, 0x61c},   {0x115f, 0x1160},   {0x17b4, 0x17b5},   {0x180b, 0x180f},  {0x1ab0, 0x1aff},
       {0x1dc0, 0x1dff}, {0x200b, 0x200f},   {0x202a, 0x202e},   {0x2060, 0x206f},  {0x20d0, 0x20ff},
       {0x3164, 0x3164}, {0xfe00, 0xfe0f},   {0xfe20, 0xfe2f},   {0xfeff, 0xfeff},  {0xffa0, 0xffa0},
       {0xfff0, 0xfffb}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff}}};
  return std::any_of(kRanges.begin(), kRanges.end(), [&](const auto& r) { return cp >= r.first && cp <= r.second; });
}

// What a code point reads as in ASCII, "" when it is itself or nothing
// alike: the fullwidth forms (ｇｈｐ＿…, ＰＡＳＳＷＯＲＤ＝, ＠), the
// mathematical alphanumerics and the letterlike symbols that fill their
// holes (𝑔ℎ𝑝, ℯ, ℊ), circled letters and digits, super- and subscript
// digits, the ligatures (ﬀ), the small forms (﹫, ﹦), the underscores and
// hyphens that look like ASCII's, and the Cyrillic and Greek letters drawn
// as Latin ones (АКІА, һf_, хохb-): what Unicode's compatibility folding
// and its confusables map to the letters a reader reads (probes 41, 42).
std::string_view asciiLookalike(long cp) {
  static const std::string_view kLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  static const std::string_view kDigits = "0123456789";
  const auto in = [&](long from, long to) { return cp >= from && cp <= to; };
  if (in(0xff01, 0xff5e)) {
    static const std::array<char, 94> kFullwidth = [] {
      std::array<char, 94> a{};
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>('!' + i);
      return a;
    }();
    return {&kFullwidth[static_cast<std::size_t>(cp - 0xff01)], 1};
  }
  if (in(0x1d400, 0x1d6a3)) return kLetters.substr(static_cast<std::size_t>((cp - 0x1d400) % 52), 1);
  if (in(0x1d7ce, 0x1d7ff)) return kDigits.substr(static_cast<std::size_t>((cp - 0x1d7ce) % 10), 1);
  if (in(0x24b6, 0x24e9)) return kLetters.substr(static_cast<std::size_t>(cp - 0x24b6), 1);
  if (in(0x249c, 0x24b5)) return kLetters.substr(static_cast<std::size_t>(cp - 0x249c + 26), 1);
  if (in(0x2460, 0x2468)) return kDigits.substr(static_cast<std::size_t>(cp - 0x2460 + 1), 1);
  if (in(0x2074, 0x2079)) return kDigits.substr(static_cast<std::size_t>(cp - 0x2070), 1);
  if (in(0x2080, 0x2089)) return kDigits.substr(static_cast<std::size_t>(cp - 0x2080), 1);
  static const std::map<long, std::string_view> kSingles = {
      {0xb2, "2"},
      {0xb3, "3"},
      {0xb9, "1"},
      {0x2070, "0"},
      {0x2071, "i"},
      {0x207f, "n"},
      {0x24ea, "0"},
      {0x2102, "C"},
      {0x210a, "g"},
      {0x210b, "H"},
      {0x210c, "H"},
      {0x210d, "H"},
      {0x210e, "h"},
      {0x2110, "I"},
      {0x2111, "I"},
      {0x2112, "L"},
      {0x2113, "l"},
      {0x2115, "N"},
      {0x2119, "P"},
      {0x211a, "Q"},
      {0x211b, "R"},
      {0x211c, "R"},
      {0x211d, "R"},
      {0x2124, "Z"},
      {0x2128, "Z"},
      {0x212a, "K"},
      {0x212b, "A"},
      {0x212c, "B"},
      {0x212d, "C"},
      {0x212f, "e"},
      {0x2130, "E"},
      {0x2131, "F"},
      {0x2133, "M"},
      {0x2134, "o"},
      {0x2139, "i"},
      {0xfb00, "ff"},
      {0xfb01, "fi"},
      {0xfb02, "fl"},
      {0xfb03, "ffi"},
      {0xfb04, "ffl"},
      {0xfb05, "st"},
      {0xfb06, "st"},
      {0x2017, "_"},
      {0xfe33, "_"},
      {0xfe34, "_"},
      {0xfe4d, "_"},
      {0xfe4e, "_"},
      {0xfe4f, "_"},
      {0x2010, "-"},
      {0x2011, "-"},
      {0x2012, "-"},
      {0x2013, "-"},
      {0x2212, "-"},
      {0xfe58, "-"},
      {0xfe63, "-"},
      {0xfe50, ","},
      {0xfe52, "."},
      {0xfe54, ";"},
      {0xfe55, ":"},
      {0xfe56, "?"},
      {0xfe57, "!"},
      {0xfe59, "("},
      {0xfe5a, ")"},
      {0xfe5b, "{"},
      {0xfe5c, "}"},
      {0xfe5f, "#"},
      {0xfe60, "&"},
      {0xfe61, "*"},
      {0xfe62, "+"},
      {0xfe64, "<"},
      {0xfe65, ">"},
      {0xfe66, "="},
      {0xfe68, "\\"},
      {0xfe69, "$"},
      {0xfe6a, "%"},
      {0xfe6b, "@"},
      {0x0391, "A"},
      {0x0392, "B"},
      {0x0395, "E"},
      {0x0396, "Z"},
      {0x0397, "H"},
      {0x0399, "I"},
      {0x039a, "K"},
      {0x039c, "M"},
      {0x039d, "N"},
      {0x039f, "O"},
      {0x03a1, "P"},
      {0x03a4, "T"},
      {0x03a5, "Y"},
      {0x03a7, "X"},
      {0x03bf, "o"},
      {0x0405, "S"},
      {0x0406, "I"},
      {0x0408, "J"},
      {0x0410, "A"},
      {0x0412, "B"},
      {0x0415, "E"},
      {0x041a, "K"},
      {0x041c, "M"},
      {0x041d, "H"},
      {0x041e, "O"},
      {0x0420, "P"},
      {0x0421, "C"},
      {0x0422, "T"},
      {0x0425, "X"},
      {0x0430, "a"},
      {0x0435, "e"},
      {0x043e, "o"},
      {0x0440, "p"},
      {0x0441, "c"},
      {0x0443, "y"},
      {0x0445, "x"},
      {0x0455, "s"},
      {0x0456, "i"},
      {0x0458, "j"},
      {0x04bb, "h"},
      {0x0501, "d"},
      {0x051b, "q"},
      {0x051d, "w"},
      // Other scripts' letters drawn as Latin ones (Armenian, IPA, Lisu, Cherokee, Coptic), and signs.
      {0x0570, "h"},
      {0x0581, "g"},
      {0x0585, "o"},
      {0x057d, "u"},
      {0x0578, "n"},
      {0x0192, "f"},
      {0x0261, "g"},
      {0x0251, "a"},
      {0x0131, "i"},
      {0x00d7, "x"},
      {0x02cd, "_"},
      {0x2581, "_"},
      {0x203f, "_"},
      {0x2374, "p"},
      {0xa78a, "="},
      {0x2e40, "="},
      {0xa4ee, "A"},
      {0xa4d0, "B"},
      {0xa4da, "C"},
      {0xa4d3, "D"},
      {0xa4f0, "E"},
      {0xa4dd, "F"},
      {0xa4d6, "G"},
      {0xa4e7, "H"},
      {0xa4f2, "I"},
      {0xa4d9, "J"},
      {0xa4d7, "K"},
      {0xa4e1, "L"},
      {0xa4df, "M"},
      {0xa4e0, "N"},
      {0xa4f3, "O"},
      {0xa4d1, "P"},
      {0xa4e3, "R"},
      {0xa4e2, "S"},
      {0xa4d4, "T"},
      {0xa4f4, "U"},
      {0xa4e6, "V"},
      {0xa4ea, "W"},
      {0xa4eb, "X"},
      {0xa4ec, "Y"},
      {0xa4dc, "Z"},
      {0x13aa, "A"},
      {0x13f4, "B"},
      {0x13df, "C"},
      {0x13a0, "D"},
      {0x13ac, "E"},
      {0x13c0, "G"},
      {0x13bb, "H"},
      {0x13c6, "I"},
      {0x13ab, "J"},
      {0x13e6, "K"},
      {0x13de, "L"},
      {0x13b7, "M"},
      {0x13e2, "P"},
      {0x13a1, "R"},
      {0x13da, "S"},
      {0x13a2, "T"},
      {0x13d9, "V"},
      {0x13b3, "W"},
      {0x13c3, "Z"},
      {0x2c80, "A"},
      {0x2c82, "B"},
      {0x2c9c, "C"},
      {0x2c88, "E"},
      {0x2c8e, "H"},
      {0x2c92, "I"},
      {0x2c94, "K"},
      {0x2c98, "M"},
      {0x2c9a, "N"},
      {0x2c9e, "O"},
      {0x2ca2, "P"},
      {0x2ca4, "C"},
      {0x2ca6, "T"},
      {0x2ca8, "Y"},
      {0x2cac, "X"},
      {0x2c81, "a"},
      {0x2c9f, "o"},
      {0x2ca3, "p"},
      {0x2ca5, "c"}};
  if (in(0x2160, 0x217f)) {  // Roman numerals, as NFKC folds them
    static const std::array<std::string_view, 32> kRoman{
        "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "L", "C", "D", "M",
        "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix", "x", "xi", "xii", "l", "c", "d", "m"};
    return kRoman[static_cast<std::size_t>(cp - 0x2160)];
  }
  if (in(0x1fbf0, 0x1fbf9)) return kDigits.substr(static_cast<std::size_t>(cp - 0x1fbf0), 1);
  const auto single = kSingles.find(cp);
  return single == kSingles.end() ? std::string_view() : single->second;
}

// How a C1 control (U+0080..U+009F) is read. minrepro prints one as text
// ("\xc2\x9b"), which a reader skips over, reading the characters after it
// ("\xc2\x9bd": a "d"); a terminal that honours C1 controls takes the
// characters after CSI or OSC as the sequence's (the "d" ends the CSI and
// is not shown). Both readings are tried (probe 41).
enum class C1Reading { AsSequences, AsCharacters };

// The piece as a reader sees it: minrepro's own byte escapes put back
// (unescapedBytes), escapes decoded (a form body, a query string, a JSON
// body quoted into a URL: password%3D...; HTML's &quot;, JSON's \u0070),
// terminal escape sequences and what renders as nothing gone
// (invisibleCodePoint).
std::string asRead(std::string_view written, C1Reading c1) {
  const std::string bytes = unescapedBytes(written);
  const std::string_view piece = bytes;
  std::string out;
  for (std::size_t i = 0; i < piece.size(); ++i) {
    if (const auto escape = escapeAt(piece.substr(i))) {
      out += escape->first;
      i += escape->second - 1;
      continue;
    }
    const bool c1_here = piece.substr(i, 1) == "\xc2" && i + 1 < piece.size() &&
                         static_cast<unsigned char>(piece[i + 1]) >= 0x80 &&
                         static_cast<unsigned char>(piece[i + 1]) <= 0x9f;
    if (const std::size_t escape = c1_here && c1 == C1Reading::AsCharacters ? 0 : terminalEscapeLength(piece.substr(i));
        escape > 0) {
      i += escape - 1;
      continue;
    }
    std::size_t length = 1;
    const long cp = codePointAt(piece, i, length);
    if (const std::string_view ascii = asciiLookalike(cp); !ascii.empty())
      out += ascii;
    else if (!invisibleCodePoint(cp))
      out.append(piece.substr(i, length));
    i += length - 1;
  }
  return out;
}

std::size_t placeholders(const std::string& text) {
  std::size_t n = 0;
  for (std::size_t at = text.find("<secret:"); at != std::string::npos; at = text.find("<secret:", at + 1)) ++n;
  return n;
}

// The characters of `text` outside its <secret:…> placeholders.
std::size_t keptCharacters(const std::string& text) {
  std::size_t kept = text.size();
  for (std::size_t at = text.find("<secret:"); at != std::string::npos; at = text.find("<secret:", at + 1)) {
    const std::size_t end = text.find('>', at);
    kept -= (end == std::string::npos ? text.size() : end + 1) - at;
  }
  return kept;
}

// The piece scrubbed as written; as read instead when that finds more, or
// hides more of it than decoding alone removed (a token split by a terminal
// escape: as written, only its tail matched a rule) (the piece is then
// written decoded: a secret must not leave in any spelling).
std::string scrubPiece(std::string_view piece) {
  std::string best = scrubByRules(std::string(piece));
  std::size_t best_placeholders = placeholders(best), best_kept = keptCharacters(best);
  for (const C1Reading c1 : {C1Reading::AsSequences, C1Reading::AsCharacters}) {
    const std::string read = asRead(piece, c1);
    if (read == piece) continue;
    std::string decoded = scrubByRules(read);
    const std::size_t found = placeholders(decoded), kept = keptCharacters(decoded) + (piece.size() - read.size());
    if (found > best_placeholders || kept < best_kept)
      best = std::move(decoded), best_placeholders = found, best_kept = kept;
  }
  return best;
}

}  // namespace

std::string scrubSecrets(const std::string& text) {
  std::string out;
  bool in_key = false;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    const bool newline = end != std::string::npos;
    if (!newline) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    std::match_results<std::string_view::const_iterator> begin;
    if (in_key || std::regex_search(line.begin(), line.end(), begin, privateKeyBegin())) {
      // The words before the block stay (the error that quoted it).
      if (!in_key) out += scrubPiece(line.substr(0, begin.position(0))) + "<secret:private-key>";
      in_key = line.find("-----END") == std::string_view::npos;
      if (!in_key && newline) out += '\n';
      continue;
    }
    for (std::string_view piece : pieces(line)) out += scrubPiece(piece);
    if (newline) out += '\n';
  }
  return out;
}

bool randomToken(const std::string& value) {
  int turns = 0;  // letter to digit or back: a name's number comes once ("resnet50"), a token's anywhere
  for (std::size_t i = 0; i < value.size(); ++i) {
    const auto byte = static_cast<unsigned char>(value[i]);
    if (!std::isalnum(byte) && std::string_view("+/=_-").find(value[i]) == std::string_view::npos) return false;
    if (i > 0 && std::isalnum(static_cast<unsigned char>(value[i - 1])) && std::isalnum(byte))
      turns += (std::isdigit(byte) != 0) != (std::isdigit(static_cast<unsigned char>(value[i - 1])) != 0);
  }
  return value.size() >= 20 && turns >= 6 && entropyBits(value) >= 3.5;
}

namespace {

// Turns between the classes digit, capital and small letter.
std::size_t classTurns(std::string_view piece) {
  const auto kind = [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return std::isdigit(byte) ? 0 : std::isupper(byte) ? 1 : 2;
  };
  std::size_t turns = 0;
  for (std::size_t i = 1; i < piece.size(); ++i) turns += kind(piece[i]) != kind(piece[i - 1]);
  return turns;
}

// Turns between a letter and a digit.
std::size_t digitTurns(std::string_view piece) {
  std::size_t turns = 0;
  for (std::size_t i = 1; i < piece.size(); ++i)
    turns += (std::isdigit(static_cast<unsigned char>(piece[i])) != 0) !=
             (std::isdigit(static_cast<unsigned char>(piece[i - 1])) != 0);
  return turns;
}

bool generatedLooking(std::string_view run) {
  std::string joined;
  std::size_t turns = 0;
  for (std::size_t start = 0; start <= run.size();) {
    const std::size_t end = std::min(run.find_first_of("+/=_-", start), run.size());
    const std::string_view piece = run.substr(start, end - start);
    if (piece.size() >= 16 && classTurns(piece) >= std::max<std::size_t>(5, piece.size() / 4) &&
        digitTurns(piece) >= 3 && entropyBits(std::string(piece)) >= 3.3)
      return true;
    joined += piece;
    turns += classTurns(piece);
    start = end + 1;
  }
  return joined.size() >= 20 && entropyBits(std::string(run)) >= 3.5 && turns >= 0.4 * joined.size() &&
         digitTurns(joined) >= 3;
}

// A version 4 UUID's shape (8-4-4-4-12 hex): a run's, a request's, a
// device's id, not a credential of its own.
bool uuidShaped(std::string_view run) {
  if (run.size() != 36) return false;
  for (std::size_t i = 0; i < run.size(); ++i)
    if ((i == 8 || i == 13 || i == 18 || i == 23) ? run[i] != '-' : !std::isxdigit(static_cast<unsigned char>(run[i])))
      return false;
  return true;
}

bool hexOnly(std::string_view run) {
  return std::all_of(run.begin(), run.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

bool namesADigest(std::string_view words) {
  static constexpr std::array<std::string_view, 9> kWords{"sha",    "md5",      "commit", "hash", "checksum",
                                                          "digest", "revision", "crc",    "etag"};
  std::string lower(words);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::any_of(kWords.begin(), kWords.end(),
                     [&](std::string_view w) { return lower.find(w) != std::string::npos; }) ||
         lower == "rev";
}

std::string scrubRandomTokens(const std::string& text) {
  const auto inAlphabet = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("+/=_-").find(c) != std::string_view::npos;
  };
  std::string out;
  std::size_t line = 0;  // where the line being read starts
  for (std::size_t i = 0; i < text.size();) {
    if (!inAlphabet(text[i])) {
      if (text[i] == '\n') line = i + 1;
      out += text[i++];
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && inAlphabet(text[end])) ++end;
    const std::string_view run(text.data() + i, end - i);
    // A hash in hex that the words just before name ("sha 3f2c...", "invalid hash value (expected \"...").
    const std::size_t from = std::max(line, i >= 40 ? i - 40 : 0);
    const bool digest = hexOnly(run) && namesADigest(std::string_view(text).substr(from, i - from));
    const bool secret = run.size() >= 16 && !digest && !uuidShaped(run) && generatedLooking(run);
    out += secret ? std::string_view("<secret:random-token>") : run;
    i = end;
  }
  return out;
}

std::string SecretFinding::describe() const {
  if (rule == kSecretInFileName) return file + ": its name";
  return file +
         (packed      ? " (in what it holds, decompressed)"
          : line == 0 ? " (a string in its pickle)"
                      : ":" + std::to_string(line)) +
         ": " + rule;
}

namespace {

// The strings a pickle's SHORT_BINUNICODE (0x8c, 1-byte length) and
// BINUNICODE ('X', 4-byte length) opcodes hold, where all their bytes are
// printable (a tensor's bytes that look like an opcode rarely are).
std::vector<std::string> pickledStrings(const std::string& bytes) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 2 < bytes.size(); ++i) {
    const auto op = static_cast<unsigned char>(bytes[i]);
    std::size_t length = 0, start = 0;
    if (op == 0x8c) {
      length = static_cast<unsigned char>(bytes[i + 1]);
      start = i + 2;
    } else if (op == 'X' && i + 5 < bytes.size()) {
      for (int k = 3; k >= 0; --k) length = (length << 8) | static_cast<unsigned char>(bytes[i + 1 + k]);
      start = i + 5;
    } else {
      continue;
    }
    // From two characters: a command's flags ("-P") stand beside its values in a saved argument list.
    if (length < 2 || length > 4096 || start + length > bytes.size()) continue;
    const std::string_view text(bytes.data() + start, length);
    if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) continue;
    out.emplace_back(text);
    i = start + length - 1;
  }
  return out;
}

// Runs of 16 printable ASCII characters or more (as `strings` finds them),
// each cut to 4096: the text a tensor's storage holds, as bytes (uint8) or
// as one character per element of a wider integer (int16, int32, int64
// codes, UTF-16 and UTF-32 text: each element a printable byte, then
// zeros; probe 36 shipped an AWS key id held as int64 codes unwarned). A
// run in a float tensor's bytes is rare, and one a secret's rule matches
// rarer still.
std::vector<std::string> printableRuns(const std::string& bytes) {
  constexpr std::size_t kMinRun = 16, kMaxRun = 4096;
  std::vector<std::string> out;
  for (const std::size_t width : {1, 2, 4, 8})
    for (std::size_t phase = 0; phase < width; ++phase) {
      std::string run;
      const auto end = [&] {
        if (run.size() >= kMinRun) out.push_back(run);
        run.clear();
      };
      for (std::size_t i = phase; i + width <= bytes.size(); i += width) {
        bool printable = bytes[i] >= 0x20 && bytes[i] < 0x7f;
        for (std::size_t k = 1; printable && k < width; ++k) printable = bytes[i + k] == 0;
        if (!printable)
          end();
        else if (run.size() < kMaxRun)
          run += bytes[i];
      }
      end();
    }
  return out;
}

}  // namespace

std::vector<SecretFinding> findSecretsInPickles(const std::string& bytes, const std::string& file) {
  std::vector<std::string> strings = pickledStrings(bytes);
  const std::size_t pickled = strings.size();
  for (std::string& run : printableRuns(bytes)) strings.push_back(std::move(run));
  std::string text;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    text += strings[i] + "\n";
    if (i + 1 < strings.size()) text += strings[i] + ": " + strings[i + 1] + "\n";
  }
  // A command's arguments saved as a list (["sqlcmd", ..., "-P", PW]): each
  // eight strings in a row as Python prints a list, where a tool's flag and
  // its value meet the tool's name (probe 45). Short strings of the first
  // 100 000, which bounds the text to read (a vocabulary holds millions).
  constexpr std::size_t kListItems = 8, kListed = 100000, kItemChars = 256;
  for (std::size_t i = 0; i < std::min(pickled, kListed); ++i) {
    text += "[";
    for (std::size_t k = i; k < pickled && k < i + kListItems && strings[k].size() <= kItemChars; ++k)
      text += (k > i ? ", '" : "'") + strings[k] + "'";
    text += "]\n";
  }
  std::vector<SecretFinding> found;
  std::set<std::string> rules;
  for (SecretFinding& f : findSecrets(text, file))
    if (rules.insert(f.rule).second) found.push_back({file, 0, f.rule});
  return found;
}

std::vector<SecretFinding> findSecrets(const std::string& text, const std::string& file) {
  std::vector<SecretFinding> found;
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++number;
    std::string rule = std::regex_search(line.begin(), line.end(), privateKeyBegin()) ? "private-key" : "";
    for (std::string_view piece : pieces(line)) {
      if (!mayHoldSecret(piece)) continue;
      for (const Rule& r : rules())
        for (std::cregex_iterator it(piece.begin(), piece.end(), r.pattern), end; rule.empty() && it != end; ++it)
          if (!scrubbedAlready((*it)[r.secret].str()) && (!r.is_secret || r.is_secret((*it)[r.secret].str())))
            rule = r.id;
    }
    if (!rule.empty()) found.push_back({file, number, rule});
  }
  return found;
}

}  // namespace minrepro
