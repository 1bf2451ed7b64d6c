// libFuzzer target: archive extraction (verify, compare) on any file. A
// hostile archive is refused with a BadInputError and leaves nothing under
// the target directory; nothing is ever written outside it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/archive/tar_gz.h"
#include "tests/fuzz/scratch_dir.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const FuzzScratch scratch("archive");
  const fs::path& dir = scratch.path;
  fs::create_directories(dir / "outside");
  const fs::path archive = dir / "input.tar.gz", target = dir / "outside" / "into";
  std::ofstream(archive, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    minrepro::extractArchive(archive, target, std::size_t{1} << 20, std::uint64_t{4} << 20);
  } catch (const minrepro::BadInputError&) {
    if (fs::exists(target)) std::abort();  // a refused archive must leave nothing
  }
  // Nothing beside the target directory, whatever the archive held.
  for (const auto& entry : fs::directory_iterator(dir / "outside"))
    if (entry.path() != target) std::abort();
  fs::remove_all(target);
  return 0;
}
