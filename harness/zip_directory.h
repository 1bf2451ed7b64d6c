// The central directory of a zip, read as miniz (LibTorch's zip reader)
// reads it: the last end-of-central-directory record, its zip64 record
// where a field says so, then each entry's name, sizes and where its local
// header starts. LibTorch reads every record of a torch.save file through
// this directory, so what a crafted file would make it allocate is judged
// on the same entries. libarchive's zip reader cannot be asked: it merges
// entries that point at one local header, which miniz reads once each.
//
// LibTorch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace minrepro {

struct ZipEntry {
  std::string name;
  std::uint64_t compressed = 0;  // bytes the record takes in the file
  std::uint64_t size = 0;        // bytes it holds once read
  std::uint64_t header_offset = 0;
};

struct ZipDirectory {
  std::vector<ZipEntry> entries;  // in the directory's order
  std::string unreadable;         // why there is no directory to read ("" when read)
};

ZipDirectory readZipDirectory(const std::filesystem::path& file);

// The first entry whose local header is missing or names another record
// (Python's zipfile, and so torch.load, refuses such a file; miniz reads
// the bytes there all the same), or nullptr when each header is the entry's.
const ZipEntry* firstMismatchedLocalHeader(const std::filesystem::path& file, const ZipDirectory& directory);

}  // namespace minrepro
