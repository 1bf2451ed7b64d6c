// case.yaml: what the user gives minrepro. Loading validates every key and
// reports bad input as a CaseError that names the file, the key, the line
// and column, what was expected and what was found.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/failure_signature.h"
#include "engine/flaky.h"

namespace minrepro {

// Bad input from the user: exit status 2, message printed as is.
class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SampleAxis {
  std::string tensor;  // name in the batch dict
  int axis = 0;        // may be negative (counted from the end), as in PyTorch
};

// The built-in harness: a TorchScript model slice and a loss, run by minrepro-trial.
struct HarnessTrial {
  std::filesystem::path model;  // absolute
  std::string input = "input";  // batch key passed to forward()
  std::string target;           // batch key of the targets; empty: no loss
  std::string loss = "cross_entropy";  // cross_entropy | nll | none
  std::int64_t ignore_index = -100;
};

// A user command: argv list, never passed through a shell. "{batch}" in any
// element is replaced by the candidate batch's path, "{workdir}" by the trial dir.
struct CommandTrial {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
};

struct CaseConfig {
  std::filesystem::path case_file;  // absolute path of case.yaml
  std::filesystem::path base_dir;   // relative paths in the case are relative to this
  std::filesystem::path batch;      // absolute
  std::vector<SampleAxis> sample_axes;
  std::string sample_ids;  // optional batch key of per-sample ids (reduced with the samples)

  std::optional<HarnessTrial> harness;  // exactly one of harness / command
  std::optional<CommandTrial> command;
  std::chrono::milliseconds timeout{60'000};
  std::uint64_t memory_limit_bytes = 0;
  bool deterministic = false;        // trials get MINREPRO_DETERMINISTIC=1 (the harness turns on
                                     // deterministic algorithms) and CUBLAS_WORKSPACE_CONFIG
  bool fork_server = true;           // trials may run in fork servers (engine/fork_server.h)
  std::vector<std::string> preload;  // modules the Python fork server imports once (with command)

  ExpectedFailure expected;
  FlakyOptions flaky;
  std::vector<std::string> reducers{"samples"};
  std::filesystem::path output;    // absolute; default <base_dir>/repro.tar.gz
  std::filesystem::path work_dir;  // absolute; default <base_dir>/minrepro-work
  std::uint64_t seed = 0;

  // Context recorded by a capture (free-form, shown in the report).
  std::map<std::string, std::string> context;
};

// The reducer names case.yaml may list under `reducers`: those of
// reducers/reducers.def, in its order, so a registered reducer is accepted.
const std::vector<std::string>& knownReducers();

// Loads and validates case.yaml (file-level checks only: keys, types, files
// exist). Batch contents are checked when the batch is opened.
CaseConfig loadCase(const std::filesystem::path& case_file);

// Writes a case.yaml equivalent to `config` with paths relative to `dir`
// (used for the archive and the best-so-far case).
std::string renderCase(const CaseConfig& config, const std::filesystem::path& dir,
                       const std::string& batch_name, const std::string& model_name);

// The files a command trial names inside the case directory, as
// "{case_dir}/NAME" or as an absolute path under base_dir, relative to
// base_dir and only those that exist. renderCase writes all of them as
// "{case_dir}/NAME", so an archive of the case must carry them.
std::vector<std::filesystem::path> commandCaseFiles(const CaseConfig& config);

}  // namespace minrepro
