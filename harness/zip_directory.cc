// Reading a zip's central directory (harness/zip_directory.h).
#include "harness/zip_directory.h"

#include <algorithm>
#include <fstream>

namespace fs = std::filesystem;

namespace minrepro {
namespace {

constexpr std::uint64_t kMaxDirectory = std::uint64_t{64} << 20;  // 1M entries of 64 bytes: no batch's
constexpr std::uint32_t kFull32 = 0xFFFFFFFFu;

std::uint64_t little(const std::string& bytes, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

std::string readAt(std::ifstream& in, std::uint64_t offset, std::uint64_t count) {
  std::string bytes(count, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(count));
  if (static_cast<std::uint64_t>(in.gcount()) != count) bytes.clear();
  return bytes;
}

struct Where {
  std::uint64_t offset = 0, size = 0;
};

// The directory's offset and size: from the last end record, or the zip64
// record it points at when its own fields are full.
std::string locateDirectory(std::ifstream& in, std::uint64_t file_size, Where& where) {
  const std::uint64_t tail = std::min<std::uint64_t>(file_size, 65535 + 22);
  const std::string end = readAt(in, file_size - tail, tail);
  const std::size_t at = end.rfind("PK\x05\x06");
  if (end.empty() || at == std::string::npos || at + 22 > end.size()) return "no end of central directory";
  where = {little(end, at + 16, 4), little(end, at + 12, 4)};
  if (where.offset != kFull32 && where.size != kFull32) return "";
  const std::uint64_t end_at = file_size - tail + at;
  if (end_at < 20) return "no zip64 locator";
  const std::string locator = readAt(in, end_at - 20, 20);
  if (locator.rfind("PK\x06\x07", 0) != 0) return "no zip64 locator";
  const std::uint64_t record_at = little(locator, 8, 8);
  if (record_at > file_size || file_size - record_at < 56) return "a zip64 record past the file";
  const std::string record = readAt(in, record_at, 56);
  if (record.rfind("PK\x06\x06", 0) != 0) return "no zip64 record where its locator says";
  where = {little(record, 48, 8), little(record, 40, 8)};
  return "";
}

// The zip64 extra field's values, for the fields the entry left full.
void readZip64Extra(const std::string& extra, ZipEntry& e, bool size_full, bool compressed_full, bool offset_full) {
  for (std::size_t at = 0; at + 4 <= extra.size();) {
    const std::uint64_t id = little(extra, at, 2), length = little(extra, at + 2, 2);
    if (at + 4 + length > extra.size()) return;
    if (id == 1) {
      std::size_t field = at + 4;
      for (auto [full, value] :
           {std::pair{size_full, &e.size}, {compressed_full, &e.compressed}, {offset_full, &e.header_offset}}) {
        if (!full) continue;
        if (field + 8 > at + 4 + length) return;
        *value = little(extra, field, 8);
        field += 8;
      }
      return;
    }
    at += 4 + length;
  }
}

}  // namespace

ZipDirectory readZipDirectory(const fs::path& file) {
  ZipDirectory d;
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  Where where;
  if (ec || !in || (d.unreadable = locateDirectory(in, file_size, where)) != "") return d;
  if (where.offset > file_size || where.size > file_size - where.offset || where.size > kMaxDirectory)
    return {{}, "a central directory past the file"};
  const std::string dir = readAt(in, where.offset, where.size);
  for (std::size_t at = 0; at + 46 <= dir.size() && dir.compare(at, 4, "PK\x01\x02") == 0;) {
    const std::uint64_t name_length = little(dir, at + 28, 2), extra_length = little(dir, at + 30, 2),
                        comment_length = little(dir, at + 32, 2);
    if (at + 46 + name_length + extra_length > dir.size()) break;
    ZipEntry e{dir.substr(at + 46, name_length), little(dir, at + 20, 4), little(dir, at + 24, 4),
               little(dir, at + 42, 4)};
    readZip64Extra(dir.substr(at + 46 + name_length, extra_length), e, e.size == kFull32, e.compressed == kFull32,
                   e.header_offset == kFull32);
    d.entries.push_back(std::move(e));
    at += 46 + name_length + extra_length + comment_length;
  }
  return d;
}

const ZipEntry* firstMismatchedLocalHeader(const fs::path& file, const ZipDirectory& directory) {
  std::ifstream in(file, std::ios::binary);
  for (const ZipEntry& e : directory.entries) {
    const std::string header = readAt(in, e.header_offset, 30);
    if (header.size() != 30 || header.compare(0, 4, "PK\x03\x04") != 0) return &e;
    const std::uint64_t name_length = little(header, 26, 2);
    if (name_length != e.name.size() || readAt(in, e.header_offset + 30, name_length) != e.name) return &e;
  }
  return nullptr;
}

}  // namespace minrepro
