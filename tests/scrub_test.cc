// Scrubbing REPORT.md: units on text, then a real report made by minrepro
// shrink for a case under a home directory with a user-like name.
#include "engine/archive/scrub.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>
#include <algorithm>
#include <map>

#include <regex>

#include "core/text_lines.h"
#include "engine/archive/report.h"
#include "engine/archive/reproducer.h"
#include "engine/archive/secrets.h"
#include "engine/archive/tar_gz.h"
#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

ScrubContext context() {
  ScrubContext c;
  c.homes = {"/home/jdoe-ml"};
  c.users = {"jdoe-ml", "root"};
  c.hosts = {"gpu-node-17.lab.example.org", "gpu-node-17"};
  return c;
}

// REPORT.md carries the failure's own text (#43.7): HTML in it stays text
// outside code, code keeps it verbatim, a bidi override becomes visible.
TEST(Report, RawHtmlAndBidiControlsFromTheFailureAreInert) {
  const std::string md =
      "# Reproducer: runtime-error: <script>alert(1)</script>\n"
      "- First error: `<img src=x onerror=alert(1)>`\n"
      "- Context: a `` ` `` and <b>bold</b>\n"
      "    x = torch.tensor([1]) < 2  # code block\n"
      "- File: evil\xe2\x80\xaegpj.py\n"
      "- owner: <user> at <home>/x, token <secret:github-pat>, not <secret:x onerror=y>\n"
      "- Message: ![x](http://evil.example/p.png) and `[ok](kept)`\n";
  EXPECT_EQ(withoutRawHtml(md),
            "# Reproducer: runtime-error: &lt;script>alert(1)&lt;/script>\n"
            "- First error: `<img src=x onerror=alert(1)>`\n"
            "- Context: a `` ` `` and &lt;b>bold&lt;/b>\n"
            "    x = torch.tensor([1]) < 2  # code block\n"
            "- File: evil[U+202E]gpj.py\n"
            "- owner: <user> at <home>/x, token <secret:github-pat>, not &lt;secret:x onerror=y>\n"
            "- Message: ![x]\\(`http://evil.example/p.png)` and `[ok](kept)`\n");
  // A bare URL or www. name is linked by GitHub's viewer: a code span keeps
  // it text (probe 18 #9).
  EXPECT_EQ(withoutRawHtml("# Reproducer: see https://evil.example/x?a=1 or www.evil.example now\n"),
            "# Reproducer: see `https://evil.example/x?a=1` or `www.evil.example` now\n");
  EXPECT_EQ(text::printable("evil\xe2\x80\xaegpj.py"), "evil\\xe2\\x80\\xaegpj.py");
  // A C1 CSI (U+009B) from a run's message acts as ESC [ on terminals that
  // honour C1 (probe 21); an accented letter (U+00E9) is text.
  EXPECT_EQ(text::printable("x\xc2\x9b"
                            "2Jy \xc3\xa9"),
            "x\\xc2\\x9b2Jy \xc3\xa9");
  EXPECT_EQ(withoutRawHtml("x\xc2\x9b"
                           "2J \xd8\x9c\n"),
            "x[U+009B]2J [U+061C]\n");
  // The same control as a raw 8-bit byte, no UTF-8 at all (probe 23), and
  // a stray continuation byte: bytes, not characters; valid ones stay.
  EXPECT_EQ(text::printable("x\x9b"
                            "2J\x9d"
                            "0;t\x9c \x80 \xe2\x86\x92 \xe2\x86"),
            "x\\x9b2J\\x9d0;t\\x9c \\x80 \xe2\x86\x92 \\xe2\\x86");
  EXPECT_EQ(withoutRawHtml("x\x9b"
                           "2J \xe2\x86\x92\n"),
            "x[byte 0x9B]2J \xe2\x86\x92\n");
  // ESC and the other C0 controls but the tab (probe 24: a file name's
  // ESC [2J in a kept sample's entry cleared the screen).
  EXPECT_EQ(withoutRawHtml("- Kept sample 5 in `names`: `'f\x1b[2Jx\a\tz'`\n"),
            "- Kept sample 5 in `names`: `'f[byte 0x1B][2Jx[byte 0x07]\tz'`\n");
  // Invisible and line-breaking ones (probe 22): a zero-width space, the line
  // separator, a byte-order mark, a tag character.
  EXPECT_EQ(text::printable("a\xe2\x80\x8b"
                            "b\xe2\x80\xa8"
                            "c\xef\xbb\xbf"
                            "d\xf3\xa0\x81\x81"
                            "e"),
            "a\\xe2\\x80\\x8bb\\xe2\\x80\\xa8c\\xef\\xbb\\xbfd\\xf3\\xa0\\x81\\x81e");
  EXPECT_EQ(withoutRawHtml("a\xe2\x80\xa9"
                           "b\xf3\xa0\x81\x81\n"),
            "a[U+2029]b[U+E0041]\n");
  // A run of backticks no run of as many closes is text: what follows it is not code.
  EXPECT_EQ(withoutRawHtml("# size mismatch x`` <img src=x onerror=alert(1)> `y and z` <b>bold</b>\n"),
            "# size mismatch x`` &lt;img src=x onerror=alert(1)> `y and z` &lt;b>bold&lt;/b>\n");
  // "\`" outside a code span is a backtick (CommonMark), not a span's start:
  // what follows it stays outside code. Before, <b onmouseover> was kept raw.
  EXPECT_EQ(withoutRawHtml("- First error: `x ` <img src=x> y \\` <b onmouseover=alert(8)>z</b>`\n"),
            "- First error: `x ` &lt;img src=x> y \\` &lt;b onmouseover=alert(8)>z&lt;/b>`\n");
  // Inside a code span a backslash escapes nothing: "\`" closes it.
  EXPECT_EQ(withoutRawHtml("`a \\` <i>b</i>\n"), "`a \\` &lt;i>b&lt;/i>\n");
}

TEST(Scrub, AnInterpreterPathKeepsWhatFindsItAgain) {
  // verify looks for signature.txt's python: again: only the home and the names go.
  EXPECT_EQ(scrubInterpreterPath("/home/jdoe-ml/venvs/t2/bin/python", context()), "<home>/venvs/t2/bin/python");
  EXPECT_EQ(scrubInterpreterPath("/usr/bin/python3", context()), "/usr/bin/python3");
  EXPECT_EQ(scrubInterpreterPath("/scratch/jdoe-ml/env/bin/python", context()), "/scratch/<user>/env/bin/python");
  EXPECT_EQ(scrubInterpreterPath("/home/jdoe-ml2/bin/python", context()), "/home/jdoe-ml2/bin/python");
}

TEST(Scrub, HomeAndOtherAbsolutePathsKeepOnlyTheFileName) {
  EXPECT_EQ(scrubText("cannot read /home/jdoe-ml/data/run7/batch.pt: no such file", context()),
            "cannot read <home>/.../batch.pt: no such file");
  EXPECT_EQ(scrubText("script: /home/jdoe-ml/train.py", context()), "script: <home>/train.py");
  EXPECT_EQ(scrubText("cd /home/jdoe-ml", context()), "cd <home>");
  EXPECT_EQ(scrubText("File \"/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py\", line 3026", context()),
            "File \"<path>/functional.py\", line 3026");
  EXPECT_EQ(scrubText("/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: kernel", context()),
            "<path>/Loss.cu:242: kernel");
  EXPECT_EQ(scrubText("PATH=/usr/bin:/home/jdoe-ml/bin", context()), "PATH=<path>/bin:<home>/bin");
  // A sibling of the home directory is not inside it.
  EXPECT_EQ(scrubText("/home/jdoe-ml2/x", context()), "<path>/x");
}

TEST(Scrub, APathAfterTheTempMarkerKeepsOnlyItsName) {
  const ScrubContext c;
  EXPECT_EQ(scrubText("cannot open <tmp>/alice-run/data/shard-7.bin now", c), "cannot open <tmp>/.../shard-7.bin now");
  EXPECT_EQ(scrubText("wrote <tmp>/x.pt", c), "wrote <tmp>/x.pt");
}

TEST(Scrub, LeavesUrlsRelativePathsAndFractionsAlone) {
  const std::string text =
      "see https://pytorch.org/docs/stable/notes/cuda.html; run python3 repro.py in "
      "configs/examples, 1/2 of the batch, and/or <tmp>/batch.pt";
  EXPECT_EQ(scrubText(text, context()), text);
}

TEST(Scrub, UserAndHostNamesAsWords) {
  EXPECT_EQ(scrubText("owner: jdoe-ml on gpu-node-17.lab.example.org (gpu-node-17)", context()),
            "owner: <user> on <host> (<host>)");
  EXPECT_EQ(scrubText("jdoe-mlx and xjdoe-ml stay", context()), "jdoe-mlx and xjdoe-ml stay");
  // "root" is nobody in particular and a common word: left alone.
  EXPECT_EQ(scrubText("the root cause", context()), "the root cause");
}

TEST(Scrub, MachineContextNamesThisProcess) {
  const ScrubContext c = machineScrubContext();
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  EXPECT_NE(std::find(c.hosts.begin(), c.hosts.end(), std::string(host)), c.hosts.end());
  EXPECT_FALSE(c.users.empty());
  EXPECT_FALSE(c.homes.empty());
}

// The real thing: shrink a case that lives under a home directory named
// like a person, with context that names the user, the host and paths.
// Token shapes of gitleaks' rules and e-mail addresses (#30.7); what only
// resembles one (an error's own words, a hash, a KeyError's key) stays.
const std::string kHfToken = "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH";
const std::string kOpenAiKey = "sk-abcdefghij0123456789T3BlbkFJabcdefghij0123456789";
const std::string kAwsKeyId = "AKIAABCDEFGHIJKLMNOP";

TEST(Scrub, KnownTokenShapesAndEmailAddressesGo) {
  const ScrubContext c = context();
  EXPECT_EQ(scrubText("401 for https://huggingface.co/api/models?token=" + kHfToken, c),
            "401 for https://huggingface.co/api/models?token=<secret:huggingface-access-token>");
  EXPECT_EQ(scrubText("Incorrect API key provided: " + kOpenAiKey + ".", c),
            "Incorrect API key provided: <secret:openai-api-key>.");
  EXPECT_EQ(scrubText("InvalidAccessKeyId: " + kAwsKeyId + " does not exist", c),
            "InvalidAccessKeyId: <secret:aws-access-token> does not exist");
  EXPECT_EQ(scrubText("aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'", c),
            "aws_secret_access_key = '<secret:aws-secret-access-key>'");
  EXPECT_EQ(scrubText("push to https://bot:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x", c),
            "push to https://bot:<secret:basic-auth-url>@github.com/x");
  EXPECT_EQ(scrubText("could not connect to postgres://admin:hunter2secret@db:5432/runs", c),
            "could not connect to postgres://admin:<secret:basic-auth-url>@db:5432/runs");
  EXPECT_EQ(scrubText("could not connect to postgres://admin:p@ss@word@db:5432/runs", c),
            "could not connect to postgres://admin:<secret:basic-auth-url>@db:5432/runs");
  // '/', '?' and '#' written unencoded in the password (probe 23: all of it
  // was kept, the end taken for an e-mail address); a later '@' in the
  // query is not the password's (the host and path stay).
  EXPECT_EQ(scrubText("could not connect to postgres://admin:Hx#4kz/Qw9?Lm2@db.internal:5432/x", c),
            "could not connect to postgres://admin:<secret:basic-auth-url>@db.internal:5432/x");
  EXPECT_EQ(scrubText("GET https://u:pw9x@host/p?next=a@b.example", c),
            "GET https://u:<secret:basic-auth-url>@host/p?next=<email>");
  EXPECT_EQ(scrubText("401 Client Error; request headers {'Authorization': 'Bearer 7f3a9c0d1e2b4a6f8c9d'}", c),
            "401 Client Error; request headers {'Authorization': 'Bearer <secret:authorization-header>'}");
  EXPECT_EQ(scrubText("sent Authorization: Basic YWxpY2U6c2VjcmV0 to the proxy", c),
            "sent Authorization: Basic <secret:authorization-header> to the proxy");
  EXPECT_EQ(scrubText("GET https://data.example.com/shard?user=al&password=s3cret!x&page=2 failed", c),
            "GET https://data.example.com/shard?user=al&password=<secret:url-query-credential>&page=2 failed");
  EXPECT_EQ(scrubText("blob https://acct.blob.core.windows.net/c/x.pt?sv=2022&sig=AbC%2Fd3f4 gone", c),
            "blob https://acct.blob.core.windows.net/c/x.pt?sv=2022&sig=<secret:url-query-credential> gone");
  // Values after a word that names a secret, in the forms a probe found leaking.
  for (const auto& [text, kept] : std::vector<std::pair<std::string, std::string>>{
           {"Cookie: sessionid=SESSCOOKIE987654; csrftoken=CSRFTOK4321", "SESSCOOKIE987654"},
           {"Set-Cookie: auth=SETCOOKIEVAL777; HttpOnly", "SETCOOKIEVAL777"},
           {"ran curl -u admin:CurlPa55word! https://h", "CurlPa55word!"},
           {"bad flag --password=CliPassw0rdXYZ", "CliPassw0rdXYZ"},
           {"body {\"api_key\": \"JSONAPIKEY77777\", \"password\": \"JsonPw9999\"}", "JSONAPIKEY77777"},
           {"body {\"api_key\": \"JSONAPIKEY77777\", \"password\": \"JsonPw9999\"}", "JsonPw9999"},
           {"header X-Api-Key: XAPIKEYHDR5555 refused", "XAPIKEYHDR5555"},
           {"dsn host=db user=app password=DsnPw12345 dbname=x", "DsnPw12345"},
           {"conn DefaultEndpointsProtocol=https;AccountName=a;AccountKey=AZUREKEYabc123+/xyz==;", "AZUREKEYabc123"},
           {"run --password Sp4ceFlag99 now", "Sp4ceFlag99"},
           {"run --api-key Sp4ceSepKey999 now", "Sp4ceSepKey999"},
           {"mysql -u root -pMyPa55w0rdZ -h db", "MyPa55w0rdZ"},
           {"sshpass -p 'Ssh9Pass' ssh host", "Ssh9Pass"},
           {"env PGPASSWORD=PgPa55w0rdX psql", "PgPa55w0rdX"},
           {"DJANGO_SECRET_KEY=Dj4ngoK3yVal", "Dj4ngoK3yVal"},
           {"password=\"correct horse battery staple\" refused", "horse battery"},
           {"got Bearer LoneBear3rTok99 back", "LoneBear3rTok99"},
           {"password=\xd0\x9f\xd0\xb0\xd1\x80\xd0\xbe\xd0\xbb\xd1\x8c"
            "12345 bad",
            "12345"},
           {"redis://:R3disPass88@cache:6379 down", "R3disPass88"},
           // Probe 24: characters no URL may hold unencoded, which passwords do.
           {"postgres://admin:Pa<ss>w0rd{x}|^@db:5432/x failed", "w0rd"},
           {"postgres://admin:Hx#4<kz>/Qw9@db:5432/x failed", "Qw9"},
           {"post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX failed",
            "XXXXXXXXXXXXXXXXXXXXXXXX"},
           // Probe 21: Slack's session cookie, and an Entra ID client secret whose
           // first 13 characters stayed before the generic token rule's placeholder.
           {"cookie d=xoxd-AbCdEfGh%2BIjKlMnOp%2FQrStUv rejected", "AbCdEfGh"},
           {"client_id=x secret Kx98Q~vT3mZp.Rw7yUi9oP0aSdFgHjKl_zXcVbNm refused", "Kx98Q~vT3mZp"}}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(scrubText(text, c).find(kept), std::string::npos) << scrubText(text, c);
    EXPECT_NE(scrubText(text, c).find("<secret:"), std::string::npos) << scrubText(text, c);
  }
  EXPECT_EQ(scrubText("mail jane.doe+ml@corp.example.org now", c), "mail <email> now");
  EXPECT_EQ(scrubText("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\nb\n", c),
            "a\n<secret:private-key>\nb\n");
  for (const std::string kept :
       {"Target 4 is out of bounds.", "KeyError: 'input_ids_for_the_second_tower'",
        "see http://localhost:8080/metrics?page=2", "no authorization for rank 3",
        "IndexError: token: 123456 out of range", "token = tokens[i]", "secret = get_secret()", "password: required",
        "epoch pass=3", "sha 3f2c1e9a7b6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e", "sk-learn is not torch"})
    EXPECT_EQ(scrubText(kept, c), kept);
  const auto found = findSecrets("import torch\n# token = " + kHfToken + "\nx = 1\n# jane@corp.example\n", "step.py");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].describe(), "step.py:2: huggingface-access-token");
  // What the scrubber left in a secret's place is no secret (probe 37: the
  // archive's scrubbed case.yaml was warned of as "basic-auth-url verbatim").
  const std::string scrubbed = scrubText("run: postgres://admin:Tr0ub4dor@db.internal:5432/prod", c);
  EXPECT_NE(scrubbed.find("admin:<secret:basic-auth-url>@"), std::string::npos) << scrubbed;
  EXPECT_TRUE(findSecrets(scrubbed, "case.yaml").empty()) << scrubbed;
}

// A third probe's forms: vendors' prefixes, looser keys (a word and a
// space, a short word), URL-encoded and zero-width-split spellings, HTTP
// clients' auth tuples, XML, docker login; and what must stay as it is.
TEST(Scrub, VendorTokensLooserKeysAndOtherSpellings) {
  const ScrubContext c = context();
  const std::string zw = "\xe2\x80\x8b";  // U+200B ZERO WIDTH SPACE
  for (const auto& [text, kept] : std::vector<std::pair<std::string, std::string>>{
           {"wandb.login(key='0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c')", "0f1e2d3c4b5a6978"},
           {"kaggle.json {\"username\":\"bob\",\"key\":\"a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6\"}", "a1b2c3d4e5f6"},
           {"machine api.example.com login bob password Netrc9Pass", "Netrc9Pass"},
           {"header AUTH Xy7Kp9Qr2Lm4 refused", "Xy7Kp9Qr2Lm4"},
           {"sent token Tk8Hh3Jj5Kk7Ll", "Tk8Hh3Jj5Kk7Ll"},
           {"api_key Ak9Bq8Cx7Dz6 rejected", "Ak9Bq8Cx7Dz6"},
           {"PASSWORD Pw4Word8Q wrong", "Pw4Word8Q"},
           {"login pw=Hunter22x failed", "Hunter22x"},
           {"clone pat=Pat4Value99x", "Pat4Value99x"},
           {"key: Ke7yVa1ue99x", "Ke7yVa1ue99x"},
           {"export WANDB_KEY=Wk3yVal9ue77", "Wk3yVal9ue77"},
           {"POST body data=user%3Dbob%26password%3DEnc0dedPw9 failed", "Enc0dedPw9"},
           {"q=%7B%22password%22%3A%22Js0nEncPw%22%7D", "Js0nEncPw"},
           {"docker login -u bob -p D0ckerPw99 registry.example.com", "D0ckerPw99"},
           {"uri credentials=bob:Cr3dPass77", "Cr3dPass77"},
           {"requests.get(url, auth=('bob', 'Tupl3Pass9'))", "Tupl3Pass9"},
           {"HTTPBasicAuth('bob', 'B4sicAuthPw')", "B4sicAuthPw"},
           {"opts = {:password => 'Ruby9Pass'}", "Ruby9Pass"},
           {"<config><password>Xml9Passw0rd</password></config>", "Xml9Passw0rd"},
           {"GET /b/k?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1&Signature=S3v2Sig%2Babc9 403", "S3v2Sig"},
           {"token ya29.a0AfH6SMBx1y2z3w4v5u6t7s8r9q0p failed", "a0AfH6SMBx1y2z3w4v5u6t7s8r9q0p"},
           {"dckr_pat_A1b2C3d4E5f6G7h8I9j0K1l2M3n", "A1b2C3d4E5f6G7h8I9j0"},
           {"npm_a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8", "a1b2c3d4e5f6a7b8c9d0"},
           {"pypi-AgEIcHlwaS5vcmcCJGE0ZjI0YTYwLTRlNDMtNDY0Ny05YzQ2LWY0NjI4YjM4ZDY1YwACKlszLCJl", "CJGE0ZjI0YTYw"},
           {"r8_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r", "A1b2C3d4E5f6G7h8I9j0"},
           {"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", "A1b2C3d4E5f6G7h8I9j0"},
           {"VAULT_TOKEN hvs.CAESIJ1b2C3d4E5f6G7h8I9j0K1l2M3n4", "CAESIJ1b2C3d4E5f6G7h8"},
           {"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", "ngeVfQFYQlKU0ufo8x5d1A"},
           {"shpat_0123456789abcdef0123456789abcdef", "0123456789abcdef0123"},
           {"dop_v1_" + std::string(64, 'a') + " x", std::string(64, 'a')},
           {"bot 123456789:AAHk9zP3qR7sT1uV5wX9yZ2aB4cD6eF8gH0 down", "AAHk9zP3qR7sT1uV5wX9"},
           {"ATATT3xFfGF0A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0", "xFfGF0A1b2C3d4E5f6G7"},
           {"SK0123456789abcdef0123456789abcdef", "0123456789abcdef0123"},
           {"pcsk_4Fh2a_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6", "A1b2C3d4E5f6G7h8I9j0"},
           {"glsa_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6_0a1b2c3d", "A1b2C3d4E5f6G7h8I9j0"},
           {"lin_api_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0", "A1b2C3d4E5f6G7h8I9j0"},
           {"nvapi-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4", "A1b2C3d4E5f6G7h8I9j0"},
           {"AKLTZjA1b2C3d4E5f6G7h8I9j0K1l2M3", "A1b2C3d4E5f6G7h8I9j0"},
           {"https://discord.com/api/webhooks/123456789012345678/A1b2C3d4E5f6G7h8I9j0K1l2M3n4", "A1b2C3d4E5f6G7h8"},
           {"https://hooks.zapier.com/hooks/catch/123456/abcde12/", "abcde12"},
           {"https://acme.webhook.office.com/webhookb2/0a1b2c3d-0a1b-4c2d-8e3f-0a1b2c3d4e5f@x/IncomingWebhook/ab",
            "0a1b2c3d-0a1b-4c2d"},
           {"401 for https://huggingface.co/api?token=hf_abcdefghijklmnop" + zw + "qrstuvwxyzABCDEFGH", "qrstuvwxyz"},
           // A soft hyphen renders as nothing too (probe 35).
           {"api hf_\xc2\xad"
            "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi failed",
            "QwErTyUiOpAsDf"},
           // Terminal escapes render as nothing too: an OSC 8 hyperlink, a colour (probe 38).
           {"t2=ghp_aB3dE6gH\x1b]8;;\x07iJ9kL2mN5oP8qR1sT4uV7wX0yZ3a", "ghp_aB3dE6gH"},
           {"t3=ghp_aB3dE6gH\x1b[31miJ9kL2mN5oP8qR1sT4uV7wX0yZ3a", "ghp_aB3dE6gH"},
           // Probe 39: ESC ( B (tput sgr0), an OSC ended by ESC \, ESC 7, raw or as minrepro escapes them.
           {"token hf_\x1b(B\x1b[mabcdefghijABCDEFGHIJabcdefghijABCD failed", "abcdefghijABCDEFGHIJ"},
           {"token hf_\\x1b(BabcdefghijABCDEFGHIJabcdefghijABCD failed", "abcdefghijABCDEFGHIJ"},
           {"token AKIA\\x1b]8;;\\x1b\\ABCDEFGHIJKLMNOP failed", "ABCDEFGHIJKLMNOP"},
           {"token hf_\\x1b]8;;\\x07abcdefghijABCDEFGHIJabcdefghijABCD failed", "abcdefghijABCDEFGHIJ"},
           // Probe 40: a zero-width space as minrepro escapes it, a C1 CSI, an overstruck character.
           {"id AKIAZ7Q4RT\\xe2\\x80\\x8b2W5XK3LM5P", "2W5XK3LM5P"},
           {"id AKIAZ7Q4RT\xc2\x9b"
            "0m2W5XK3LM5P",
            "2W5XK3LM5P"},
           {"xoxb-1234567X\b89012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"},
           {"xoxb-1234567X\\x0889012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"},
           // JSON's escaped slashes, HTML's named entities.
           {"{\"url\": \"https:\\/\\/user:Passw0rd9@host\\/x\"}", "Passw0rd9"},
           {"https&colon;//bob&colon;Hunter2x9&commat;host/x", "Hunter2x9"},
           {"t ghp_aB3dE6gH\x1b(BiJ9kL2mN\x1b"
            "77oP8qR1sT4uV7wX0yZ3a",
            "iJ9kL2mN"},  // ESC 7, then the token goes on
           // Probe 41: the rest of what renders as nothing (invisible operators, variation
           // selectors, Khmer vowels, Hangul fillers, interlinear annotation), a combining mark
           // under each character, and controls as minrepro escapes them (LRM, NUL).
           {"t ghp_aB3dE6\u2062gHiJ9kL2mN5o\u2062P8qR1sT4uV7wX0yZ3a", "gHiJ9kL2mN5o"},
           {"t hf_abcdef\ufe0fghijABCDEFGHIJab\ufe0fcdefghijABCD", "ghijABCDEFGHIJab"},
           {"t xoxb-1234567\U000e010089012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOp"},
           {"t AKIAZ7Q4RT\u17b42W5XK3LM5P", "2W5XK3LM5P"},
           {"t AKIAZ7Q4RT\u31642W5XK3LM5P", "2W5XK3LM5P"},
           {"t AKIAZ7Q4RT\ufff92W5XK3LM5P", "2W5XK3LM5P"},
           {"t A\u0332K\u0332I\u0332A\u0332Z7Q4RT2W5XK3LM5P", "Z7Q4RT2W5XK3"},
           {"t AKIAZ7Q4RT\\xe2\\x80\\x8e2W5XK3LM5P", "2W5XK3LM5P"},
           {"t AKIAZ7Q4RT\\x002W5XK3LM5P", "2W5XK3LM5P"},
           // Look-alikes: fullwidth forms, mathematical bold letters and digits.
           {"t \uff47\uff48\uff50\uff3f\uff41B3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "B3dE5fG7hJ9kL1mN3"},
           {"url https://bob\uff1aHunt3rPw9\uff20host/x", "Hunt3rPw9"},
           {"t \U0001d420\U0001d421\U0001d429_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z\U0001d7d3Q", "aB3dE5fG7hJ9kL1mN3"},
           // Probe 42: the letterlike symbols in the mathematical letters' holes (italic h),
           // circled letters, superscript digits, a ligature, small forms, Unicode hyphens,
           // Cyrillic letters drawn as Latin ones.
           {"t \U0001d454\u210e\U0001d45d_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "aB3dE5fG7hJ9kL1mN3"},
           {"t \u24d6\u24d7\u24df_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "aB3dE5fG7hJ9kL1mN3"},
           {"t AKIAQ\u2077RZ\u2075TXW\u00b2MNB\u2074KLP", "TXW"},
           {"t hf_abcde\ufb00ghijABCDEFGHIJabcdefghijABC", "ghijABCDEFGHIJab"},
           {"t hf\ufe4fabcdefghijABCDEFGHIJabcdefghijABCD", "abcdefghijABCDEFGHIJ"},
           {"url https://alice:S3cr3tPassw0rd\ufe6bdb.example.com/x", "S3cr3tPassw0rd"},
           {"t password\ufe66S3cr3tPassw0rd9", "S3cr3tPassw0rd9"},
           {"t xoxb\u20111234567890\u2011123456789012\u2011AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOp"},
           {"t \u0410\u041a\u0406\u0410Q7RZ5TXW2MNB4\u041aLP", "Q7RZ5TXW2MNB4"},
           {"t \u04bbf_abcdefghijABCDEFGHIJabcdefghijABCD", "abcdefghijABCDEFGHIJ"},
           // Probe 43: Armenian, Lisu letters, a Roman numeral, segmented digits, Go's :=.
           {"t \u0570f_abcdefghijABCDEFGHIJabcdefghijABCD", "abcdefghijABCDEFGHIJ"},
           {"t \ua4ee\ua4d7\ua4f2\ua4eeQ7RZ5TXW2MNB4KLP", "Q7RZ5TXW2MNB4"},
           {"t AK\u2160AQ7RZ5TXW2MNB4KLP", "Q7RZ5TXW2MNB4"},
           {"t ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z\U0001fbf5Q", "aB3dE5fG7hJ9kL1mN3"},
           {"cfg password := \"Zq8vTn3wLp0xRt7\"", "Zq8vTn3wLp0xRt7"},
           {"cfg password := Zq8vTn3wLp0xRt7", "Zq8vTn3wLp0xRt7"},
           // Probe 44: command lines as Python prints a command (a list), bytes and prefixed
           // strings, a JSON-escaped quote inside the value.
           {"Command '['curl', '-u', 'alice:Hunter2xyzQ', 'https://x']' returned 22", "Hunter2xyzQ"},
           {"Command '['mysql', '-h', 'db', '-pMysqlPw9x']' returned 1", "MysqlPw9x"},
           {"Command '['mysql', '-pMysqlPw9x', '-pOther9PwQ']' returned 1", "Other9PwQ"},
           {"Command '['sshpass', '-p', 'Hunter2xyzQ', 'ssh', 'h']' returned 5", "Hunter2xyzQ"},
           {"Command '['docker', 'login', '-u', 'bob', '-p', 'Hunter2xyzQ']' returned 1", "Hunter2xyzQ"},
           {"cfg {'password': b'Hunter2xyzQ'}", "Hunter2xyzQ"},
           {"Namespace(lr=0.1, password=b'Hunter2xyzQ')", "Hunter2xyzQ"},
           {"cfg password=bytearray(b'Hunter2xyzQ')", "Hunter2xyzQ"},
           {"cfg password=rb'Hunter2xyzQ'", "Hunter2xyzQ"},
           {"{\"password\": \"Hunter2\\\"xyzQ\"}", "xyzQ"},
           // Probe 45: tools' own password flags, on a shell line and as a Python list; two flags
           // of one command; Oracle's and Samba's user/password items in a list; Python's auth
           // objects; a key that runs on past a bracket; vendor shapes; env names ending in PW.
           {"Command '['sqlcmd', '-S', 'db', '-U', 'sa', '-P', 'Squ8jzPde0IgxL!', '-Q', 'x']' returned 1",
            "Squ8jzPde0IgxL"},
           {"Command 'mysql -u root -p'My$ZP7Thnp5yf!' -h db' returned 1", "ZP7Thnp5yf"},
           {"zip -r -P Zpd6GncfBAepfJ data.zip data/", "Zpd6GncfBAepfJ"},
           {"unzip -P Unz8pw7Qx9 data.zip", "Unz8pw7Qx9"},
           {"lftp -u trainer,LfEudM7Oyf5TNS sftp://ftp.acme.io", "LfEudM7Oyf5TNS"},
           {"keytool -importkeystore -srcstorepass Ks5axtjRNmHk7 -deststorepass KdW5vQ7CF5pu7", "KdW5vQ7CF5pu7"},
           {"keytool -importkeystore -srcstorepass Ks5axtjRNmHk7 -deststorepass KdW5vQ7CF5pu7", "Ks5axtjRNmHk7"},
           {"mongo -u admin -p MgtIY7uq6T2b7 --host db", "MgtIY7uq6T2b7"},
           {"ssh-keygen -t ed25519 -N 'SkF6bnZ3eBZc7' -f id", "SkF6bnZ3eBZc7"},
           {"rar a -hpRarPw8x7Q9 out.rar data", "RarPw8x7Q9"},
           {"ipmitool -I lanplus -H 10.0.0.5 -U admin -P Ipm7Qx9Zw2 chassis status", "Ipm7Qx9Zw2"},
           {"net use Z: \\\\srv\\share /user:ACME\\bob NetPw7Qx9Zw", "NetPw7Qx9Zw"},
           {"net use Z: \\\\srv\\share NetPw7Qx9Zw /user:ACME\\bob", "NetPw7Qx9Zw"},
           {"ERROR 1064 (42000): near 'IDENTIFIED BY 'Sql7Qx9Zw2pw'' at line 1", "Sql7Qx9Zw2pw"},
           {"Command '['sqlplus', '-s', 'system/OtZ3wLqK9eA7@//db.acme.io:1521/ORCL', '@f.sql']' returned 1",
            "OtZ3wLqK9eA7"},
           {"Command '['expdp', 'system/ExZ3wLqK9eA7@ORCL', 'directory=d']' returned 1", "ExZ3wLqK9eA7"},
           {"Command '['smbclient', '//nas/share', '-U', 'trainer%SmKrGmAiTpiHQF']' returned 1", "SmKrGmAiTpiHQF"},
           {"session.get(url, auth=HTTPDigestAuth('trainer', 'DiM7l8GQlchb7'))", "DiM7l8GQlchb7"},
           {"Elasticsearch(hosts=['https://es:9200'], basic_auth=('elastic', 'EbQ7x9Zw2pLk'))", "EbQ7x9Zw2pLk"},
           {"Elasticsearch(http_auth=('elastic', 'Eh4TtILp6XrV7'))", "Eh4TtILp6XrV7"},
           {"proxy HTTPProxyAuth('trainer', 'HpvTPymBAKIU7')", "HpvTPymBAKIU7"},
           {"PasswordCredentials(username='svc', password=SecretStr('Psixgo8QpbyE7'))", "Psixgo8QpbyE7"},
           {"SECRET_KEY=django-insecure-q7%1(+hget7@myqo#aa8t3ru^p47p9pb0-^tdbm5*^0fqo&1xo", "hget7"},
           {"password=hunter2!x(abc9Q) done", "abc9Q"},
           {"tencent AKIDWI2eeLOcuGfKPjkMfivdgFSzMlJkesdb failed", "WI2eeLOcuGfKPjkM"},
           {"tf abcdefghijklmn.atlasv1.ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL",
            "abcdefghijklmn"},
           {"SQLCMD_ARGS: \"-S sql.acme.io -U sa -P SqArg7Qx9Zw\"", "SqArg7Qx9Zw"},
           {"args --storepass StoreP7Qx9Zw", "StoreP7Qx9Zw"},
           {"arg \"-u admin -p AdmP7Qx9Zw2\"", "AdmP7Qx9Zw2"},
           {"ROOTPW: RootPw7Qx9Zw2", "RootPw7Qx9Zw2"},
           {"PEPPER=Pep7Qx9Zw2Lk", "Pep7Qx9Zw2Lk"},
           // A C1 CSI before a letter a reader reads on (as minrepro prints it), C1 strings.
           {"t ghp_aB3\\xc2\\x9bdE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "E5fG7hJ9kL1mN3pQ5"},
           {"t ghp_aB3\\xc2\\x9fx\\xc2\\x9cdE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "E5fG7hJ9kL1mN3pQ5"},
           {"t ghp_aB3\\xc2\\x9d0;x\\x07dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5Q", "E5fG7hJ9kL1mN3pQ5"},
           // Probe 20: a Slack app-level token, a fine-grained PAT longer than today's 82.
           {"c_xapp: xapp-1-A0123456789-1234567890123-" + std::string(64, 'f'), "A0123456789-1234567890123"},
           {"pat github_pat_" + std::string(86, 'A') + " denied", std::string(40, 'A')}}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(scrubText(text, c).find(kept), std::string::npos) << scrubText(text, c);
    EXPECT_NE(scrubText(text, c).find("<secret:"), std::string::npos) << scrubText(text, c);
  }
  // A fourth probe's forms: pairs, separators, escapes, connection strings,
  // other schemes and tools, more vendors.
  for (const auto& [text, kept] : std::vector<std::pair<std::string, std::string>>{
           {"headers [('X-Auth-Token', 'Xat9Tok3nQ')]", "Xat9Tok3nQ"},
           {"params [('user', 'bob'), ('password', 'Pair9Pass')]", "Pair9Pass"},
           {"the password is Is9PassWd", "Is9PassWd"},
           {"password -> Arr0wPass7", "Arr0wPass7"},
           {"| password | Tab1ePass8 |", "Tab1ePass8"},
           {"body password&#61;Ent1tyPw9 sent", "Ent1tyPw9"},
           {"{&quot;password&quot;: &quot;Qu0tEnt9&quot;}", "Qu0tEnt9"},
           {"{\"\\u0070assword\": \"Un1Esc9pw\"}", "Un1Esc9pw"},
           {"url ?sv=2022\\u0026sig\\u003dG50nSig9x", "G50nSig9x"},
           {"sqlplus scott/T1ger9Pw@orcl failed", "T1ger9Pw"},
           {"jdbc:oracle:thin:scott/Jdbc9Pass@db:1521/x", "Jdbc9Pass"},
           {"db.example.com:5432:runs:bob:Pgp4ssLine9", "Pgp4ssLine9"},
           {"Authorization: SharedKey acct:Shk9SigAbc=", "Shk9SigAbc"},
           {"Authorization: Digest username=\"bob\", response=\"6629fae49393a05397450978507c4ef1\"", "6629fae4"},
           {"client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=", "LS0tLS1CRUdJ"},
           {"<input type=\"password\" name=\"password\" value=\"H7mlF0rm9\">", "H7mlF0rm9"},
           {"plink -ssh bob@h -pw Pl1nkPw9 ls", "Pl1nkPw9"},
           {"smbclient //h/s -U bob%Smb9Pass x", "Smb9Pass"},
           {"ldapsearch -x -D cn=admin -w Ld4pPw9x", "Ld4pPw9x"},
           {"redis-cli -h cache -a Red1sPw9 ping", "Red1sPw9"},
           {"htpasswd -b .htpasswd bob Ht9Passwd", "Ht9Passwd"},
           {"az login -u bob -p Az9LoginPw", "Az9LoginPw"},
           {"https://chat.example.com/hooks/a1b2c3d4e5f6g7h8i9j0k1l2m3", "a1b2c3d4e5f6g7h8"},
           {"https://fn.azurewebsites.net/api/x?code=Fnc0deKey9abc", "Fnc0deKey9abc"},
           {"xai-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4Y5z6", "A1b2C3d4E5f6G7h8I9j0"},
           {"sq0atp-A1b2C3d4E5f6G7h8I9j0K1", "A1b2C3d4E5f6G7h8I9j0"},
           {"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", "A1b2C3d4E5f6G7h8I9j0"},
           {"whsec_A1b2C3d4E5f6G7h8I9j0K1l2M3n4", "A1b2C3d4E5f6G7h8I9j0"},
           {"dapi0123456789abcdef0123456789abcdef", "0123456789abcdef0123"},
           {"PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01", "0123456789abcdef01234567"},
           {"refresh 1//0gA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6", "A1b2C3d4E5f6G7h8I9j0"}}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(scrubText(text, c).find(kept), std::string::npos) << scrubText(text, c);
    EXPECT_NE(scrubText(text, c).find("<secret:"), std::string::npos) << scrubText(text, c);
  }
  // A fifth probe's forms: every pair of a cookie header, an Oracle connect
  // string, the word in other languages, quotes escaped inside a string,
  // an Authorization field's bare value, a flag written with '_'.
  for (const auto& [text, kept] : std::vector<std::pair<std::string, std::string>>{
           {"Set-Cookie: session=abc; PHPSESSID=3k9vQ7xLm2; laravel_session=eyJpdiI6Ik1", "3k9vQ7xLm2"},
           {"oracle scott/Tiger9Pass77@dbhost:1521/ORCL", "Tiger9Pass77"},
           {"\xe5\xaf\x86\xe7\xa0\x81: Mi4Ma9xQ", "Mi4Ma9xQ"},
           {"\xd0\xbf\xd0\xb0\xd1\x80\xd0\xbe\xd0\xbb\xd1\x8c=Pa7Rol9x", "Pa7Rol9x"},
           {"contrase\xc3\xb1"
            "a: Con7Tra9x",
            "Con7Tra9x"},
           {"Passwort: Pass7Wort9", "Pass7Wort9"},
           {"\xe3\x83\x91\xe3\x82\xb9\xe3\x83\xaf\xe3\x83\xbc\xe3\x83\x89=Jp7Pass9x", "Jp7Pass9x"},
           {R"({"data": "{\"auth\": {\"password\": \"Xk9mP2qR7vT4\"}}"})", "Xk9mP2qR7vT4"},
           {R"({"authorization": "dXNlcjpTM2NyZXRQYXNzd29yZA=="})", "dXNlcjpTM2NyZXRQYXNzd29yZA"},
           {"run --access_token At5rT8yU1iO4pA7s --x 1", "At5rT8yU1iO4pA7s"},
           {"run --auth Au3dF6gH9jK2lZ5x", "Au3dF6gH9jK2lZ5x"},
           {"run --hf_token hf_QwErTyUiOpAsDfGh12", "QwErTyUiOpAsDfGh12"},
           {"mykey: Zq8fK2pLm9XvR4tBw7Yc", "Zq8fK2pLm9XvR4tBw7Yc"},
           {"my_token Tq8fK2pLm9XvR4tBw7Yd", "Tq8fK2pLm9XvR4tBw7Yd"}}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(scrubText(text, c).find(kept), std::string::npos) << scrubText(text, c);
    EXPECT_NE(scrubText(text, c).find("<secret:"), std::string::npos) << scrubText(text, c);
  }
  // A private key quoted inside an error keeps the error's words.
  EXPECT_EQ(scrubText("ssl error: -----BEGIN PRIVATE KEY----- MIIEv\n-----END PRIVATE KEY-----\n", c),
            "ssl error: <secret:private-key>\n");
  for (const std::string kept :
       {"IndexError: token 50257 is out of range", "Missing key(s) in state_dict: \"fc.weight\"",
        "Unexpected key: layer1.0.weight", "auth failed for user bob", "password required for rank 0",
        "the token embedding_dim is 512", "key: value", "loss 50% lower", "skip pass 2 of 3",
        "RuntimeError: expected scalar type Float but found Half", "login node gpu01 is down",
        "tokenizer(mask_token='[MASK]', pad_token='<pad>')", "load(token=hf_hub_cache)", "the password is required",
        "HTTP 200 for ?code=ok", "RuntimeError: Basic block size mismatch",
        // Probe 45's rules leave code, ports and paths alone.
        "call(token=get_token(user))", "session.get(url, auth=HTTPDigestAuth(user, pw))", "psql -U bob -p 5432 runs",
        "mkdir -p data/run-1", "scp -P 2222 model.pt host:", "zip -r out.zip data/"})
    EXPECT_EQ(scrubText(kept, c), kept);
  // trial.env: a value that reads like a generated credential, whatever its name; names of a login or a license.
  EXPECT_EQ(withheldEnv({{"MY_THING", "f8A9c0D1e2B3a4F5c6D7e8F9"}}).size(), 1u);
  for (const std::string name :
       {"NETRC_LOGIN", "LICENSE_ID", "APP_PIN", "SSHPASS", "DBPASS", "BASICAUTH", "ORACLE_CONN"})
    EXPECT_EQ(withheldEnv({{name, "v4lue-x"}}).size(), 1u) << name;
  for (const auto& [name, value] :
       std::map<std::string, std::string>{{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
                                          {"TORCH_LOGS", "+dynamo,recompiles"},
                                          {"HF_HOME", "/data/hf/cache/models"},
                                          {"RUN_NAME", "resnet50-imagenet-bs256"},
                                          {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}})
    EXPECT_TRUE(withheldEnv({{name, value}}).empty()) << name;
}

// trial.env's values that stay out of the archive: a name with a secret's
// word in it or as one of its words, or a value a token rule finds; names
// that merely contain such letters keep theirs.
TEST(Scrub, TrialEnvSecretsByNameOrValue) {
  const std::map<std::string, std::string> env{
      {"WANDB_API_KEY", "9f8e7d6c"}, {"DB_PASS", "BarePass42"},           {"MY_SERVICE_KEY", "abc"},
      {"SESSION_COOKIE", "xyz"},     {"DATA_URL", "https://u:pw1234@h/"}, {"NUM_PASSES", "3"},
      {"MONKEY_MODE", "on"},         {"CUDA_VISIBLE_DEVICES", "0"},       {"HF_HOME", "/data/hf"}};
  std::vector<std::string> withheld;
  for (const auto& [name, value] : withheldEnv(env)) withheld.push_back(name);
  EXPECT_EQ(withheld,
            (std::vector<std::string>{"DATA_URL", "DB_PASS", "MY_SERVICE_KEY", "SESSION_COOKIE", "WANDB_API_KEY"}));
  for (const std::string name :
       {"PX_GITHUB_PAT", "PX_PASSPHRASE", "PX_PRIVATEKEY", "PX_BEARER", "PX_CREDS", "PX_SESSION", "PX_OAUTH_CLIENT",
        "PX_WEBHOOK", "DB_PW", "ADMIN_PASSCODE", "SERVICE_KEYS", "CLIENTKEY", "ACCESSKEY", "ENCRYPTIONKEY", "WANDBKEY",
        "AZURE_SAS", "API_SIG", "HMAC_SEED"})
    EXPECT_EQ(withheldEnv({{name, "v4lue-x"}}).size(), 1u) << name;
  for (const std::string name :
       {"PATH", "NUM_PASSES", "PATIENCE", "MONKEY_MODE", "SIGMA", "KEYBOARD", "BYPASS_CACHE", "MULTIPASS"})
    EXPECT_TRUE(withheldEnv({{name, "v4lue-x"}}).empty()) << name;
}

// A variable of the shell whose name says password, token or secret
// outright: its value leaves no file whatever it looks like (probe 21:
// DB_PASSWORD=valueAAone, a passphrase of words, MYSQL_PWD reached
// signature.txt, REPORT.md and repro.py, as they had no digit). A weaker
// word (MY_KEY) keeps the old rule: "enabled" is not taken out everywhere.
TEST(Scrub, AShellVariableNamedOutrightAsASecretIsWithheldWhateverItsValue) {
  const std::map<std::string, std::string> shell{
      {"MR_DB_PASSWORD", "valueAAone"}, {"MR_PASSPHRASE", "correct horse battery staple"},
      {"MR_MYSQL_PWD", "hunterxyz"},    {"MR_API_TOKEN", "plainwords"},
      {"MR_FEATURE_KEY", "enabled"},    {"MR_USE_TOKEN", "true"}};
  for (const auto& [name, value] : shell) setenv(name.c_str(), value.c_str(), 1);
  const ScrubContext c = machineScrubContext();
  for (const auto& [name, value] : shell) unsetenv(name.c_str());
  EXPECT_EQ(scrubText("login valueAAone / correct horse battery staple / hunterxyz / plainwords; enabled true", c),
            "login <secret:env-MR_DB_PASSWORD> / <secret:env-MR_PASSPHRASE> / <secret:env-MR_MYSQL_PWD> / "
            "<secret:env-MR_API_TOKEN>; enabled true");
}

// A credential of no known shape after a word of the user's own still
// goes when it reads like a generated one; names of models, layers, runs,
// CUDA's errors and a commit under a key that names it stay.
TEST(Scrub, GeneratedLookingTokensOfNoKnownShape) {
  const ScrubContext c = context();
  for (const std::string secret :
       {"9fJ2kQ7xLm3Rt8Vb1Zc4", "klSsarWSU-fZ5mj1YzvnO_guFUpx12JK", "a3f9b2c1d4e5f6a7b8c9d0e1f2a3b4c5",
        "k3j9d8f7g6h5j4k3l2m1x0q9", "TWlzc2luZ0tleTk4NzY1NDMyMTBhYmNkZWY=", "S21JkFV-irMoF5cHw6M_h9T52Rb9ghX4"}) {
    const std::string text = "RuntimeError: mykey " + secret + " rejected by the store";
    EXPECT_EQ(scrubText(text, c), "RuntimeError: mykey <secret:random-token> rejected by the store") << secret;
  }
  for (const std::string kept :
       {"vit_base_patch16_224_augreg2_in21k_ft_in1k", "mobilenetv3_large_100_ra4_e3600_r224_in1k",
        "conv2d_3x3_bn1_relu2_block4_stage3", "stage2_unit3_conv2_bn3_relu4_x5y6", "Qwen2-VL-7B-Instruct-GPTQ-Int4",
        "run_2024_05_17_14_33_02_seed42_lr3e4", "cudaErrorIllegalAddress", "CUBLAS_STATUS_NOT_INITIALIZED",
        "cuda-12.4.1-cudnn9-devel-ubuntu22.04", "NVIDIA-H100-80GB-HBM3", "paraphrase-multilingual-MiniLM-L12-v2",
        "aten::_scaled_dot_product_flash_attention", "0f8c2a1e-7b3d-4c5e-9a6f-1d2e3f4a5b6c",
        "invalid hash value (expected \"2d711642b726b04401627ca9fbac32f5c8530fb1\")", "20240517143302123456789"}) {
    const std::string text = "RuntimeError: in " + kept + " at step 3";
    EXPECT_EQ(scrubText(text, c), text);
  }
  EXPECT_EQ(scrubContextValue("git_commit", "2d711642b726b04401627ca9fbac32f5c8530fb1", c),
            "2d711642b726b04401627ca9fbac32f5c8530fb1");
  EXPECT_EQ(scrubContextValue("note", "2d711642b726b04401627ca9fbac32f5c8530fb1", c), "<secret:random-token>");
}

// What findSecretsInPickles finds, sorted, in the file NAME that
// `python -c "import torch; SETUP torch.save(VALUE, path)"` writes.
std::vector<std::string> findingsInSaved(const std::string& name, const std::string& setup, const std::string& value) {
  testing::TempDir dir("minrepro-pickle-secrets");
  const fs::path file = dir.path() / name;
  std::string out;
  EXPECT_EQ(testing::runCommand(testing::python() + " -c \"import torch; " + setup + "torch.save(" + value + ", '" +
                                    file.string() + "')\"",
                                &out),
            0)
      << out;
  std::vector<std::string> rules;
  for (const SecretFinding& f : findSecretsInPickles(testing::readFile(file), name)) rules.push_back(f.describe());
  std::sort(rules.begin(), rules.end());
  return rules;
}

// A captured step's state is a pickle (torch.save's zip stores it
// uncompressed): the strings it holds are read for secrets too, a dict's
// key beside its value.
TEST(Scrub, SecretsInsideABundledPickleAreFound) {
  EXPECT_EQ(findingsInSaved("step_state.pt", "",
                            "{'cfg': {'password': '8As1Df5Gh9Jk3Mn7Pv2H', 'db': 'postgresql://u:PgPw77x@h/db', "
                            "'w': torch.randn(1000)}, 'name': 'layer1.0.weight'}"),
            (std::vector<std::string>{"step_state.pt (a string in its pickle): basic-auth-url",
                                      "step_state.pt (a string in its pickle): keyed-secret"}));
}

// What a compressed file or an archive of files the trial read holds, and
// a command's arguments a step saved as a list, are read for secrets too:
// creds.json.gz, a .env inside vocab.tar.gz and ["sqlcmd", ..., "-P", PW]
// went into the archive unwarned (probe 45); a plain text file as before.
TEST(Scrub, SecretsInCompressedFilesAndArgumentListsAreFound) {
  testing::TempDir dir("minrepro-packed-secrets");
  std::string out;
  ASSERT_EQ(
      testing::runCommand(
          "cd " + dir.path().string() + " && " + testing::python() +
              " -c \"import gzip, io, tarfile, torch\n"
              "open('creds.json.gz', 'wb').write(gzip.compress(b'{\\\"github\\\": {\\\"token\\\": "
              "\\\"ghp_9Zy8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa\\\"}}'))\n"
              "env = b'GITHUB_TOKEN=ghp_1Aa2Bb3Cc4Dd5Ee6Ff7Gg8Hh9Ii0JjKkLlMmNn\\n'\n"
              "t = tarfile.open('vocab.tar.gz', 'w:gz'); i = tarfile.TarInfo('.env'); i.size = len(env)\n"
              "t.addfile(i, io.BytesIO(env)); t.close()\n"
              "torch.save({'cmd': ['sqlcmd', '-S', 'db', '-U', 'sa', '-P', 'Squ8jzPde0IgxL!']}, 'step_state.pt')\n"
              "open('plain.txt', 'w').write('nothing here\\n')\"",
          &out),
      0)
      << out;
  std::vector<BundledFile> files;
  for (const char* name : {"creds.json.gz", "vocab.tar.gz", "step_state.pt", "plain.txt"})
    files.push_back({name, dir.path() / name});
  EXPECT_EQ(secretsIn(files, "batch: b.pt\n"),
            (std::vector<std::string>{"creds.json.gz (in what it holds, decompressed): github-pat",
                                      "vocab.tar.gz (in what it holds, decompressed): keyed-secret",
                                      "step_state.pt (a string in its pickle): command-line-secret"}));
}

// Text a tensor holds as bytes (a uint8 tensor of a log line) is read for
// secrets too: a batch carried it into the archive unwarned (probe 34).
// One finding a line, as for a text file: the first rule that matches.
TEST(Scrub, SecretsATensorHoldsAsBytesAreFound) {
  EXPECT_EQ(findingsInSaved("batch.pt", "line = b'AKIAIOSFODNN7EXAMPLE sent with password=Hunter2Hunter2'; ",
                            "{'raw': torch.frombuffer(bytearray(line.ljust(128)), dtype=torch.uint8).repeat(8, 1), "
                            "'x': torch.zeros(8, 4)}"),
            (std::vector<std::string>{"batch.pt (a string in its pickle): aws-access-token"}));
  // One character per element of a wider integer: int64 codes, UTF-32 text.
  EXPECT_EQ(findingsInSaved("codes.pt", "line = 'AKIAIOSFODNN7EXAMPLE'; ",
                            "{'ids': torch.tensor([[ord(c) for c in line] + [0, 0]] * 8), 'x': torch.zeros(8, 4)}"),
            (std::vector<std::string>{"codes.pt (a string in its pickle): aws-access-token"}));
  EXPECT_EQ(findingsInSaved("utf32.pt", "line = 'ghp_9Zy8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa'; ",
                            "{'t': torch.frombuffer(bytearray(line.encode('utf-32-le')), dtype=torch.int32), "
                            "'x': torch.zeros(8, 4)}"),
            (std::vector<std::string>{"utf32.pt (a string in its pickle): github-pat"}));
}

// A withheld value is a secret wherever it appears (a step that prints its
// environment), and the report's title is scrubbed before it is cut: a
// token the cut crossed would have kept its first characters.
TEST(Scrub, WithheldValuesAnywhereAndTheTitleBeforeItsCut) {
  CaseConfig config;
  config.command = CommandTrial{};
  config.command->argv = {"python", "step.py", "{batch}"};
  config.command->env = {{"PX_NPMTOKEN", "NpmTok3nVal55"}};
  ReductionSummary summary;
  summary.signature.family = FailureFamily::RuntimeError;
  summary.signature.message =
      "shape mismatch " + std::string(160, 'q') + " tok ghp_9Zy8Xw7Vu6Ts5Rq4Po3Nm2Lk1Ji0HgFeDcBa env NpmTok3nVal55";
  const std::string report = renderReport(config, summary);
  EXPECT_EQ(report.find("ghp_9Zy8"), std::string::npos) << report.substr(0, 600);
  EXPECT_EQ(report.find("NpmTok3nVal55"), std::string::npos) << report.substr(0, 600);
  EXPECT_NE(scrubText("env NpmTok3nVal55 x", scrubContextFor(config)).find("<secret:env-PX_NPMTOKEN>"),
            std::string::npos);
}

// A kept sample's text is scrubbed whole before REPORT.md cuts it to 240
// characters: cut first, a URL's password ending just before the cut, or
// a token the cut crossed, matched no rule (probe 33). The cut never
// splits a secret's marker.
TEST(Scrub, AKeptSamplesTextIsScrubbedBeforeItsCut) {
  CaseConfig config;
  config.command = CommandTrial{};
  config.command->argv = {"python", "step.py", "{batch}"};
  ReductionSummary summary;
  summary.signature.family = FailureFamily::IndexError;
  summary.signature.message = "Target 4 is out of bounds.";
  for (const std::size_t lead : {200, 206, 212, 218, 224, 230, 236}) {
    summary.kept_entries.push_back(
        {4, "u", std::string(lead, 'w') + " https://bob:Sup3rS3cretPa55@db.example.com/x tail"});
    summary.kept_entries.push_back({4, "n", std::string(lead, 'w') + " hf_abcdefghijklmnopqrstuvwxyzABCDEFGH tail"});
  }
  const std::string report = renderReport(config, summary);
  EXPECT_EQ(report.find("Sup3rS3cret"), std::string::npos) << report;
  EXPECT_EQ(report.find("hf_abcdefgh"), std::string::npos) << report;
  for (std::size_t at = report.find("<secret:"); at != std::string::npos; at = report.find("<secret:", at + 1))
    EXPECT_LT(report.find('>', at), report.find('`', at)) << "a marker cut short: " << report.substr(at, 60);
}

TEST(ScrubReport, ReportOfACaseUnderAUsersHomeNamesNoOne) {
  testing::TempDir dir("minrepro-scrub");
  const fs::path examples = dir.path() / "examples", home = dir.path() / "home" / "jdoe-ml";
  const fs::path case_dir = home / "projects" / "run7";
  fs::create_directories(case_dir);
  std::string out;
  ASSERT_EQ(testing::makeBundledExamples(examples), "");
  ASSERT_EQ(testing::saveSmallClass4Batch(examples, case_dir / "batch.pt"), "");
  fs::copy(examples / "class4" / "model.pt", case_dir / "model.pt");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  testing::writeFile(case_dir / "case.yaml", testing::readFile(examples / "class4" / "case.yaml") +
                                                 "context:\n  owner: jdoe-ml\n  host: " + host +
                                                 "\n  script: " + (case_dir / "train.py").string() +
                                                 "\n  data: /data/jdoe-ml/imagenet/train\n");
  const fs::path archive = case_dir / "repro.tar.gz";
  ASSERT_EQ(testing::runCommand("HOME=" + home.string() + " USER=jdoe-ml LOGNAME=jdoe-ml " + MINREPRO_BINARY +
                                    " shrink --no-op-repro -q --config " + (case_dir / "case.yaml").string() + " 2>&1",
                                &out),
            0)
      << out;
  std::string report;
  for (const auto& e : readTarGz(archive))
    if (e.name == "REPORT.md") report = e.contents;
  ASSERT_FALSE(report.empty());
  EXPECT_EQ(report.find("jdoe"), std::string::npos) << report;
  EXPECT_EQ(report.find(dir.path().string()), std::string::npos) << report;
  EXPECT_FALSE(std::regex_search(report, std::regex("(^|[^A-Za-z0-9])" + std::string(host) + "($|[^A-Za-z0-9])")))
      << report;
  EXPECT_NE(report.find("- owner: <user>"), std::string::npos) << report;
  EXPECT_NE(report.find("- host: <host>"), std::string::npos) << report;
  EXPECT_NE(report.find("- script: <home>/.../train.py"), std::string::npos) << report;
  EXPECT_NE(report.find("- data: <path>/train"), std::string::npos) << report;
  EXPECT_NE(report.find("Target 4 is out of bounds."), std::string::npos) << report;
}

// Everything the archive carries as text is scrubbed (#14, item 6), not
// only REPORT.md: the message where repro.py and signature.txt quote it, the
// captured context in case.yaml (a user name in full, even root; another
// machine's host name; control characters escaped); and the scrubbed
// archive still verifies.
const std::string kTokenTensor = "tok_ghp_Zq8rT2mK9vL4nB7xC1dF6gH3jW5pS0aE2uY8";

TEST(ScrubReport, EveryTextTheArchiveCarriesIsScrubbedAndItStillVerifies) {
  testing::TempDir dir("minrepro-scrub");
  const fs::path case_dir = dir.path() / "case";
  fs::create_directories(case_dir);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string user = ::getpwuid(::getuid())->pw_name, home = dir.path() / "home" / "alice";
  testing::writeFile(case_dir / "trial.py",
                     "import os, socket, sys, torch\n"
                     "x = torch.load(sys.argv[1])['x']\n"
                     "if (x == 4).any():\n"
                     "    raise RuntimeError('cannot open ' + os.path.expanduser('~') + '/data/shard-7.bin on ' + "
                     "socket.gethostname() + ' as jane.doe@corp.example with " +
                         kHfToken + " and " + kAwsKeyId +
                         "')\n"
                         "# the token the job used: " +
                         kHfToken + "\n");
  std::string out;
  ASSERT_EQ(
      testing::runCommand(testing::python() +
                              " -c \"import torch; x = torch.arange(8) + 10; x[5] = 4; "
                              "torch.save({'x': x, 'id': torch.arange(8), '" +
                              kTokenTensor + "': torch.rand(8, 3)}, '" + (case_dir / "batch.pt").string() + "')\"",
                          &out),
      0)
      << out;
  testing::writeFile(case_dir / "case.yaml",
                     "batch: batch.pt\nsamples:\n  tensors: {x: 0, id: 0, " + kTokenTensor +
                         ": 0}\n"
                         "trial:\n  command: [\"/usr/bin/python3\", \"{case_dir}/trial.py\", \"{batch}\"]\n"
                         "flaky:\n  enabled: false\nreducers: [samples]\n"
                         "context:\n  user: " +
                         user +
                         "\n  host: trainbox-7\n  workdir_at_capture: /home/alice/proj\n"
                         "  note: \"first line\\nFORGED: second line\"\n  api: " +
                         kOpenAiKey + "\n");
  const fs::path archive = dir.path() / "repro.tar.gz";
  ASSERT_EQ(testing::runCommand("HOME=" + home + " " + MINREPRO_BINARY + " shrink --no-op-repro -q --config " +
                                    (case_dir / "case.yaml").string() + " --output " + archive.string() + " 2>&1",
                                &out),
            0)
      << out;
  std::map<std::string, std::string> texts;
  for (const auto& e : readTarGz(archive))
    if (e.name == "REPORT.md" || e.name == "REPORT.html" || e.name == "case.yaml" || e.name == "signature.txt" ||
        e.name == "repro.py")
      texts[e.name] = e.contents;
  ASSERT_EQ(texts.size(), 5u);
  const std::regex host_word("(^|[^A-Za-z0-9])" + std::string(host) + "($|[^A-Za-z0-9])");
  for (const auto& [name, text] : texts) {
    EXPECT_EQ(text.find("alice"), std::string::npos) << name << ":\n" << text;
    EXPECT_EQ(text.find("trainbox-7"), std::string::npos) << name << ":\n" << text;
    EXPECT_EQ(text.find(dir.path().string()), std::string::npos) << name << ":\n" << text;
    EXPECT_FALSE(std::regex_search(text, host_word)) << name << ":\n" << text;
    EXPECT_EQ(text.find("\nFORGED"), std::string::npos) << name << ":\n" << text;
    for (const std::string& secret : {kHfToken, kAwsKeyId, kOpenAiKey, std::string("jane.doe@corp.example")})
      EXPECT_EQ(text.find(secret), std::string::npos) << name << ":\n" << text;
  }
  // A tensor named with a token: case.yaml must name it as the batch does;
  // the reports do not show it. Before, REPORT.html showed it in its panels.
  for (const auto& [name, text] : texts) {
    if (name == "case.yaml") continue;
    EXPECT_EQ(text.find(kTokenTensor), std::string::npos) << name << ":\n" << text;
  }
  // The step script is bundled verbatim: the report says what in it looks like a secret.
  EXPECT_NE(texts["REPORT.md"].find("**Looks like a secret, copied verbatim**: trial.py:5: huggingface-access-token"),
            std::string::npos)
      << texts["REPORT.md"];
  // The classifier cut the temp directory the home lies in; the rest is scrubbed too.
  EXPECT_NE(texts["signature.txt"].find("message: cannot open <tmp>/.../shard-7.bin on <host> as <email> with "
                                        "<secret:huggingface-access-token> and <secret:aws-access-token>"),
            std::string::npos)
      << texts["signature.txt"];
  EXPECT_NE(texts["case.yaml"].find("user: \"<user>\""), std::string::npos) << texts["case.yaml"];
  EXPECT_NE(texts["case.yaml"].find("host: \"<host>\""), std::string::npos) << texts["case.yaml"];
  EXPECT_NE(texts["case.yaml"].find("first line\\\\x0aFORGED: second line"), std::string::npos) << texts["case.yaml"];
  // The scrubbed record still matches a run: the self-check passed (exit 0
  // above) and so does verify, each run's message scrubbed the same way.
  EXPECT_EQ(
      testing::runCommand(
          "HOME=" + home + " " + std::string(MINREPRO_BINARY) + " verify --runs 1 " + archive.string() + " 2>&1", &out),
      0)
      << out;
}

}  // namespace
}  // namespace minrepro

namespace minrepro {
namespace {

// A message with backslashes (a Windows path, "\N", a byte written "\xe2")
// and quotes is quoted in repro.py's docstring: Python compiles the file
// (a malformed \N escape stopped repro.py before it reproduced anything).
TEST(ReproPy, AMessageWithBackslashesAndQuotesStillCompiles) {
  CaseConfig config;
  config.command = CommandTrial{{"python3", "step.py", "{batch}"}, {}, {}};
  FailureSignature signature;
  signature.family = FailureFamily::IndexError;
  // A byte that is no UTF-8 (a raw 8-bit CSI a step wrote to stderr) made
  // repro.py "Non-UTF-8 code" (probe 23): the archive did not reproduce.
  signature.message = std::string(R"(cannot open C:\New\data.pt: "\xe2\x8" """ )") + "\x9b" + "2J \xc3\xa9";
  testing::TempDir dir;
  testing::writeFile(dir.path() / "repro.py", renderReproPy(config, signature));
  std::string out;
  // Compiled as Python compiles a file: from its bytes.
  EXPECT_EQ(testing::runCommand(testing::python() +
                                    " -c \"import sys; compile(open(sys.argv[1], 'rb').read(), "
                                    "sys.argv[1], 'exec')\" " +
                                    (dir.path() / "repro.py").string() + " 2>&1",
                                &out),
            0)
      << out << renderReproPy(config, signature);
  EXPECT_NE(renderReproPy(config, signature).find("\\\\x9b2J \xc3\xa9"), std::string::npos);
}

}  // namespace
}  // namespace minrepro
