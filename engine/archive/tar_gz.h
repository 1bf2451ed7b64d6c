// The reproducer archive (.tar.gz via libarchive). Written atomically: a temp
// file beside the target, renamed into place only when complete, so a run
// killed halfway never leaves a half-written archive.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/errors.h"

namespace minrepro {

struct ArchiveEntry {
  std::string name;      // relative path inside the archive
  std::string contents;  // the file's bytes
  bool executable = false;
};

// Byte-reproducible: fixed mtimes, no gzip timestamp, entries in the given order.
void writeTarGz(const std::filesystem::path& target, const std::vector<ArchiveEntry>& entries);

// Reads every regular file of a .tar.gz into memory. Refuses absolute paths,
// "..", links and device files, and entries over max_entry_bytes.
std::vector<ArchiveEntry> readTarGz(const std::filesystem::path& source,
                                    std::size_t max_entry_bytes = std::size_t{1} << 30);

std::string readFileBytes(const std::filesystem::path& file);

// A fresh directory under the temp dir, removed with everything in it
// (verify, compare and the self-check extract archives into one). Throws
// BadInputError.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A reproducer archive made by `minrepro shrink`, read with readTarGz's
// refusals; a missing or refused archive is BadInputError saying so.
std::vector<ArchiveEntry> readReproducerArchive(const std::filesystem::path& archive,
                                                std::size_t max_entry_bytes = std::size_t{1} << 30);

// The entry named `name` (compared as normalized paths), or null.
const ArchiveEntry* findEntry(const std::vector<ArchiveEntry>& entries, const std::string& name);

// Writes `entries` under `root`, refusing names outside it and duplicates
// (BadInputError naming `source`).
void writeEntries(const std::filesystem::path& root, const std::vector<ArchiveEntry>& entries, const std::string& source);

// Reads an archive made by `minrepro shrink` and writes its entries under
// `dir`, after refusing absolute paths, '..', links, devices and entries over
// `max_entry_bytes` (a refused archive writes nothing). Throws BadInputError.
std::vector<ArchiveEntry> extractArchive(const std::filesystem::path& archive, const std::filesystem::path& dir,
                                         std::size_t max_entry_bytes = std::size_t{1} << 30);

}  // namespace minrepro
