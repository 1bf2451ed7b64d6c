// Which torch made the case, and which one runs it.
//
// A case captured on PyTorch 2.13 whose trials run Debian's 1.13 fails with
// `module 'torch' has no attribute 'export'`, or with a RuntimeError where
// 2.13 raised an IndexError: a version mismatch, not the bug. minrepro
// cannot fix that, but it must say it, in the log, REPORT.md and exit 3's
// message, instead of reducing or refusing without a word.
#pragma once

#include <map>
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

}  // namespace minrepro
