// The reproducer archive (.tar.gz via libarchive). Written atomically: a temp
// file beside the target, renamed into place only when complete, so a run
// killed halfway never leaves a half-written archive.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace minrepro {

struct ArchiveEntry {
  std::string name;      // relative path inside the archive
  std::string contents;  // the file's bytes
  bool executable = false;
};

class ArchiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Byte-reproducible: fixed mtimes, no gzip timestamp, entries in the given order.
void writeTarGz(const std::filesystem::path& target, const std::vector<ArchiveEntry>& entries);

// Reads every regular file of a .tar.gz into memory. Refuses absolute paths,
// "..", links and device files, and entries over max_entry_bytes.
std::vector<ArchiveEntry> readTarGz(const std::filesystem::path& source,
                                    std::size_t max_entry_bytes = std::size_t{1} << 30);

std::string readFileBytes(const std::filesystem::path& file);

}  // namespace minrepro
