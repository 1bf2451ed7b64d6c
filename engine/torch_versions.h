// Which torch made the case, and which one runs it.
//
// A case captured on PyTorch 2.13 whose trials run Debian's 1.13 fails with
// `module 'torch' has no attribute 'export'`, or with a RuntimeError where
// 2.13 raised an IndexError: a version mismatch, not the bug. minrepro
// cannot fix that, but it must say it, in the log, REPORT.md and exit 3's
// message, instead of reducing or refusing without a word.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minrepro {

// "2.13.0+cpu" -> "2.13"; "" when the text holds no major.minor.
std::string torchMinorVersion(const std::string& version);

// One sentence per pair that differs in major.minor: the captured PyTorch
// (context `pytorch`) or LibTorch (context `libtorch`) against the torch
// the trials run (the trial Python's PyTorch, or LibTorch for the built-in
// harness), and LibTorch against the trial Python's PyTorch (LibTorch reads
// and writes the batches that Python loads). `environment` holds the
// probe's keys "PyTorch", "PyTorch from" and "LibTorch".
std::vector<std::string> torchVersionMismatches(const std::map<std::string, std::string>& context,
                                                const std::vector<std::pair<std::string, std::string>>& environment,
                                                bool builtin_harness);

// The Python and PyTorch versions of `python` (its torch imported once, in
// `scratch`, a directory made and removed), and which interpreter it was:
// REPORT.md's environment, `minrepro --version`, and which torch verify
// runs an archive with. ("PyTorch", "not importable by PYTHON") when it
// cannot import torch.
std::vector<std::pair<std::string, std::string>> pythonTorchVersions(const std::string& python,
                                                                     const std::filesystem::path& scratch);

// The PyTorch version `python` imports ("2.13.0+cpu"), or nullopt.
std::optional<std::string> torchVersionOf(const std::string& python, const std::filesystem::path& scratch);

// Which Python runs an archive in verify, regress and compare, and whether
// its torch is the one the archive was made with (signature.txt's
// `python:` and `torch:`, compared by major.minor). `--python` when given;
// else the recorded interpreter when it exists and imports that torch;
// else `default_python` (the build's). `line` says which, for the command's
// first line of output; `matches` false: a run that does not reproduce is
// not evidence of a fix (verify's exit 4). `checked` false: the archive
// records no torch (made before these lines), and nothing is said.
struct TorchChoice {
  std::string python;
  std::string running_torch;
  bool checked = false;
  bool matches = true;
  std::string line;
};
// `trust_recorded`: whether the recorded Python may be run at all. Only
// for an archive this user's minrepro sealed (engine/archive/seal.h):
// probing a path an archive names runs it outside any sandbox, so an
// archive from elsewhere is never asked which interpreter to start.
TorchChoice chooseArchiveTorch(const std::string& recorded_python, const std::string& recorded_torch,
                               const std::optional<std::string>& given_python, const std::string& default_python,
                               const std::filesystem::path& scratch, bool trust_recorded);

}  // namespace minrepro
