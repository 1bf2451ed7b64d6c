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

// What looks like a secret in one file: its line and the rule.
struct SecretFinding {
  std::string file;  // as the archive names it
  std::size_t line = 0;
  std::string rule;              // gitleaks' rule id, or "email"
  std::string describe() const;  // "step.py:12: huggingface-access-token"
};

// The findings in `text` (a bundled file's contents), e-mail addresses
// left out (a script's author line is not a secret).
std::vector<SecretFinding> findSecrets(const std::string& text, const std::string& file);

}  // namespace minrepro
