// The reproducer archive (.tar.gz via libarchive). Written atomically: a temp
// file beside the target, renamed into place only when complete, so a run
// killed halfway never leaves a half-written archive.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"

namespace minrepro {

// More entries than any archive of minrepro shrink holds (a bundled
// project of a few hundred files, the op step's, the neighbours).
inline constexpr std::size_t kMaxArchiveEntries = 10000;

struct ArchiveEntry {
  std::string name;      // relative path inside the archive
  std::string contents;  // the file's bytes (when `source` is empty)
  bool executable = false;
  // A file whose bytes are streamed into the archive instead (a batch of
  // any size is never read into memory whole).
  std::filesystem::path source = {};
};

// An entry streamed from `file` when the archive is written.
ArchiveEntry fileEntry(const std::string& name, const std::filesystem::path& file, bool executable = false);

// Byte-reproducible: fixed mtimes, no gzip timestamp, entries in the given order.
void writeTarGz(const std::filesystem::path& target, const std::vector<ArchiveEntry>& entries);

// Reads every regular file of a .tar.gz into memory. Refuses absolute paths,
// "..", links and device files, and entries over max_entry_bytes.
std::vector<ArchiveEntry> readTarGz(const std::filesystem::path& source,
                                    std::size_t max_entry_bytes = std::size_t{1} << 30);

std::string readFileBytes(const std::filesystem::path& file);

// What a compressed file or an archive of files holds, for the secret
// check of what the archive bundles (a creds.json.gz, a .env inside a
// vocab.tar.gz: probe 45): a gzip, bzip2, xz or zstd stream decompressed,
// or each entry of a tar, zip or 7z archive (compressed or not), one after
// another, at most `max_bytes` in all; nullopt when `file` is neither.
std::optional<std::string> packedContents(const std::filesystem::path& file, std::size_t max_bytes);

// Whether `file` is a .tar.gz holding repro.py and signature.txt, as every
// archive of minrepro shrink does (a run may replace such a file without
// --force). Reads entry headers only; false for anything unreadable.
bool madeByMinrepro(const std::filesystem::path& file);

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

// Extracts an archive made by `minrepro shrink` under `dir`, streamed entry
// by entry (memory: one buffer), refusing absolute paths, '..', links,
// devices, duplicates, entries over `max_entry_bytes`, archives whose
// entries add up to more than `max_total_bytes` and archives of more than
// `max_entries` entries (100,000 one-byte files fill an inode table, not a
// disk); a refused archive leaves nothing under `dir` (BadInputError saying
// why). Returns the entries' names. Directory entries are not extracted
// (a file's directories are made for it); `directory_entries`, when given,
// says whether there were any: shrink writes none, so an archive with one
// is not as shrink wrote it, whatever its seal says (engine/archive/seal.h).
std::vector<std::string> extractArchive(const std::filesystem::path& archive, const std::filesystem::path& dir,
                                        std::size_t max_entry_bytes = std::size_t{1} << 30,
                                        std::uint64_t max_total_bytes = std::uint64_t{4} << 30,
                                        std::size_t max_entries = kMaxArchiveEntries,
                                        bool* directory_entries = nullptr);

}  // namespace minrepro
