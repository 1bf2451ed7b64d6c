// libFuzzer target: the journal reader (--resume) on any journal.txt. A
// journal that is not this run's, or torn, is a BadInputError or is read up
// to what makes sense; never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/journal.h"
#include "tests/fuzz/scratch_dir.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const FuzzScratch scratch("journal");
  const fs::path& dir = scratch.path;
  std::ofstream(dir / "journal.txt", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const minrepro::Journal journal(dir, "fuzz", /*resume=*/true);
    (void)journal.loadedTrials();
  } catch (const minrepro::BadInputError&) {
  }
  return 0;
}
