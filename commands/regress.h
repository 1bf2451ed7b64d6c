// A regression set kept with the user's project (docs/method.md, "Regression sets"): minimal
// cases stored by `shrink --add-to DIR`, rerun together by `minrepro regress DIR`.
//
// DIR holds NAME.tar.gz (a reproducer archive) and NAME.expect ("fail" while
// the bug is open, "pass" once the archive's case is fixed; "fail" when absent).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

#include "engine/archive/run_archive.h"

namespace minrepro {

// Whether the case can go into `dir` under `name`: a name of letters,
// digits, '-', '_' and '.', and a NAME.tar.gz and NAME.expect that are new
// or regular files (not links, devices or directories, which the write
// would follow or could not make). BadInputError (exit 2) otherwise:
// `shrink --add-to` asks before its first trial.
void checkRegressionTarget(const std::filesystem::path& dir, const std::string& name);

// The name a shrunk case gets in a regression set: `name`, or the case
// directory's name.
std::string regressionName(const std::filesystem::path& config, const std::string& name);

// Copies `archive` into `dir` as NAME.tar.gz with NAME.expect "fail".
// Throws BadInputError for a bad name or target (checkRegressionTarget) or
// an unreadable archive, Error when a file cannot be written.
void addToRegressionSet(const std::filesystem::path& archive, const std::filesystem::path& dir,
                        const std::string& name);

// After a successful shrink: the archive written for `config` (or `output`
// when given) goes into `dir` under `name` (default: the case directory's
// name). `case_dir`: the directory the case's paths are relative to, when
// not the case file's (a shrink --batch run's case lies in its work
// directory). Throws BadInputError when it cannot.
void addShrunkCase(const std::filesystem::path& config, const std::string& output, const std::filesystem::path& dir,
                   std::string name, std::ostream& out, const std::filesystem::path& case_dir = {});

// Reruns every case with the verify rules (`base` gives runs, python,
// timeout) and prints name / expected / got. Exit 0 every case as expected,
// 1 some differ; BadInputError when the directory is missing or holds no case.
int runRegress(const std::filesystem::path& dir, const VerifyOptions& base, std::ostream& out);

}  // namespace minrepro
