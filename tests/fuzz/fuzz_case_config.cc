// libFuzzer target: the case loader on any case.yaml. Bad input must be a
// BadInputError (exit 2 with its message), never a crash, a hang or another
// exception. The batch and model files exist (empty), so the loader gets
// past the file checks to every key.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/case_config.h"
#include "tests/fuzz/scratch_dir.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const FuzzScratch scratch("case");
  static const fs::path dir = [] {
    for (const char* name : {"batch.pt", "model.pt", "step.py"}) std::ofstream(scratch.path / name) << "";
    return scratch.path;
  }();
  const fs::path file = dir / "case.yaml";
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const minrepro::CaseConfig config = minrepro::loadCase(file);
    (void)config;
  } catch (const minrepro::BadInputError&) {
  }
  return 0;
}
