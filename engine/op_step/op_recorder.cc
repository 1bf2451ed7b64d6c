#include "engine/op_step/op_recorder.h"

#include <cstdlib>

#include "core/process/process.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string opRecorderDir() {
  const std::string script = ownFile("op_recorder/minrepro_op.py",
                                     fs::path(MINREPRO_SOURCE_DIR) / "harness/python/op_recorder/minrepro_op.py");
  return script.empty() ? "" : fs::path(script).parent_path().string();
}

std::map<std::string, std::string> recorderEnvironment(const fs::path& record_dir, bool note_calls,
                                                       const std::optional<std::string>& pythonpath,
                                                       bool first_non_finite) {
  std::string path = opRecorderDir();
  const char* inherited = std::getenv("PYTHONPATH");
  const std::string after = pythonpath ? *pythonpath : inherited ? inherited : "";
  if (!after.empty()) path += ":" + after;
  std::map<std::string, std::string> env{{"PYTHONPATH", path}, {"MINREPRO_OP_RECORD", record_dir.string()}};
  if (note_calls) env["MINREPRO_OP_NOTE_CALLS"] = "1";
  if (first_non_finite) env["MINREPRO_OP_NONFINITE"] = "1";
  return env;
}

bool recorderCanRide(FailureFamily family) { return family != FailureFamily::Signal && callOutOfReach(family).empty(); }

std::string callOutOfReach(FailureFamily family) {
  switch (family) {
    case FailureFamily::Timeout:
      return "a hang or a timeout is no call that fails";
    case FailureFamily::NonzeroExit:
      return "the program exited with a status of its own; no error was raised";
    case FailureFamily::CompileError:
      return "a torch.compile failure is the compiler's, not an ATen call's (PyTorch's own minifier reduces its "
             "graph: TORCHDYNAMO_REPRO_AFTER)";
    case FailureFamily::None:
    case FailureFamily::StartFailure:
      return "the case did not fail";
    case FailureFamily::DeviceAssert:
    case FailureFamily::OutOfMemory:
    case FailureFamily::OpUnavailable:
    case FailureFamily::DeviceMismatch:
    case FailureFamily::IndexError:
    case FailureFamily::NonFinite:
    case FailureFamily::ValueError:
    case FailureFamily::RuntimeError:
    case FailureFamily::Signal:
      return "";
  }
  return "";
}

}  // namespace minrepro
