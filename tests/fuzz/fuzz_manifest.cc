// libFuzzer target: signature.txt, the manifest that verify, compare and
// regress read from an archive a stranger may have written. Refused with a
// BadInputError or read; what is read renders and reads back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/archive/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const minrepro::Manifest m = minrepro::parseManifest(text, "fuzz");
    const minrepro::Manifest back = minrepro::parseManifest(minrepro::renderManifest(m), "fuzz-rendered");
    if (minrepro::renderManifest(back) != minrepro::renderManifest(m)) std::abort();  // not a fixed point
  } catch (const minrepro::BadInputError&) {
  }
  return 0;
}
