#include "core/content_hash.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/errors.h"

namespace minrepro {

namespace {

constexpr std::uint64_t kOffsetBasis = 1469598103934665603ULL;

std::uint64_t update(std::uint64_t h, const char* data, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex(std::uint64_t h) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

std::string contentHash(const std::string& bytes) { return hex(update(kOffsetBasis, bytes.data(), bytes.size())); }

std::string contentHashOfFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw BadInputError(file.string() + ": cannot read it (does it exist, is it readable?)");
  std::vector<char> piece(1 << 20);
  std::uint64_t h = kOffsetBasis;
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0)
    h = update(h, piece.data(), static_cast<std::size_t>(in.gcount()));
  return hex(h);
}

}  // namespace minrepro
