// Secrets in what leaves the machine. An error message or a captured
// context may quote a token (a Hugging Face or OpenAI key in a URL, an AWS
// key id in a boto error, a password in a connection string) or an e-mail
// address; REPORT.md, signature.txt, the repro.py docstring and case.yaml
// would carry them to whoever gets the archive.
//
// The token shapes are those of gitleaks' rule set (its rule ids name them
// here), not guesses of ours: a match becomes "<secret:RULE>" and an
// e-mail address "<email>". Files the archive bundles (the step script,
// its modules) are copied verbatim, never rewritten: what looks like a
// secret in them is reported instead (log and REPORT.md), by file and line.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace minrepro {

// `text` with every token of a known shape and every e-mail address
// replaced; a private key block is replaced from its BEGIN line to its END.
std::string scrubSecrets(const std::string& text);

// Whether a whole value reads like a generated credential of no known
// shape: twenty characters or more of a token's alphabet, letters and
// digits mixed throughout (six turns from one to the other at least: a
// run name's "resnet50-bs256" has four), at least 3.5 bits per character
// (a word, a path, a number or a list of options has less or other
// characters).
bool randomToken(const std::string& value);

// `text` with every run of a token's alphabet (letters, digits, + / = _ -)
// that reads like a generated credential of no known shape replaced by
// "<secret:random-token>": a secret after a word of the user's own ("mykey
// 9fJ2kQ7xLm3Rt8Vb1Zc4") has nothing else a rule could find. A run reads
// so when a piece of it between separators is 16 characters or more that
// turns between digits, capitals and small letters at least every fourth
// character and three times between letters and digits, at 3.3 bits per
// character; or when its pieces together do so at 0.4 turns a character
// (a base64 token cut by its own - and _). Names of models, layers, runs
// and CUDA's errors do not ("vit_base_patch16_224_augreg2_in21k_ft_in1k",
// "cudaErrorIllegalAddress"), nor a UUID, nor a hash in hex that the 40
// characters before it name (namesADigest: "sha 3f2c...", "invalid hash
// value (expected ..."). Free text only: an argument's file name or a
// bundled file is never judged by this (see scrub.h).
std::string scrubRandomTokens(const std::string& text);

// Whether `words` name a hash (sha, md5, commit, hash, checksum, digest,
// revision, crc, etag, or are "rev"), in any case: a hex value after them
// is that hash, which a maintainer compares or checks out.
bool namesADigest(std::string_view words);

// The rule of a finding in a bundled file's name (the archive carries the
// file by that name: the step opens it so).
inline constexpr const char* kSecretInFileName = "file-name";

// What looks like a secret in one file: its line and the rule.
struct SecretFinding {
  std::string file;  // as the archive names it
  std::size_t line = 0;
  std::string rule;              // gitleaks' rule id, or "email"
  bool packed = false;           // in what a compressed file or an archive of files holds
  std::string describe() const;  // "step.py:12: huggingface-access-token"
};

// The findings in `text` (a bundled file's contents), e-mail addresses
// left out (a script's author line is not a secret).
std::vector<SecretFinding> findSecrets(const std::string& text, const std::string& file);

// The same for a binary file the archive bundles (a captured step's
// state, a batch: torch.save's zip stores its pickles uncompressed): the
// strings its pickles hold (protocol 2+ SHORT_BINUNICODE and BINUNICODE),
// each alone and each beside the next (a dict's key and its value:
// "password: ..."), and every run of 16 printable bytes or more anywhere
// in it (text a tensor holds as bytes: a uint8 tensor of a log line, probe
// 34). Findings name the file, line 0.
std::vector<SecretFinding> findSecretsInPickles(const std::string& bytes, const std::string& file);

}  // namespace minrepro
