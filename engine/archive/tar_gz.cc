#include "engine/archive/tar_gz.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <stdlib.h>

#include <cerrno>

#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "core/disk_space.h"
#include "core/paths.h"
#include "core/text_lines.h"

namespace fs = std::filesystem;

namespace minrepro {

std::string readFileBytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw BadInputError("cannot read " + file.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

using WriteHandle = std::unique_ptr<struct archive, decltype(&archive_write_free)>;
using ReadHandle = std::unique_ptr<struct archive, decltype(&archive_read_free)>;
using EntryHandle = std::unique_ptr<struct archive_entry, decltype(&archive_entry_free)>;

void check(struct archive* a, int status, const std::string& what) {
  if (status < ARCHIVE_WARN)
    throw BadInputError(what + ": " + (archive_error_string(a) ? archive_error_string(a) : "libarchive error"));
}

constexpr time_t kFixedMtime = 946684800;  // 2000-01-01: archives are byte-reproducible

void writeData(struct archive* a, const char* data, std::size_t size, const std::string& name) {
  const la_ssize_t n = archive_write_data(a, data, size);
  if (n < 0 || static_cast<std::size_t>(n) != size) check(a, ARCHIVE_FATAL, "writing " + name);
}

// The file's bytes, a piece at a time; its size is fixed when the header
// is written, so a file that changes meanwhile is an error, not a torn entry.
void writeFileData(struct archive* a, const ArchiveEntry& e, std::uintmax_t size) {
  std::ifstream in(e.source, std::ios::binary);
  std::vector<char> piece(1 << 20);
  std::uintmax_t left = size;
  while (left > 0 &&
         in.read(piece.data(), static_cast<std::streamsize>(std::min<std::uintmax_t>(left, piece.size())))) {
    writeData(a, piece.data(), static_cast<std::size_t>(in.gcount()), e.name);
    left -= static_cast<std::uintmax_t>(in.gcount());
  }
  if (left > 0) throw BadInputError(e.source.string() + ": changed or unreadable while it was being archived");
}

void writeEntry(struct archive* a, const ArchiveEntry& e) {
  EntryHandle entry(archive_entry_new(), &archive_entry_free);
  const std::uintmax_t size = e.source.empty() ? e.contents.size() : fs::file_size(e.source);
  archive_entry_set_pathname(entry.get(), e.name.c_str());
  archive_entry_set_size(entry.get(), static_cast<la_int64_t>(size));
  archive_entry_set_filetype(entry.get(), AE_IFREG);
  archive_entry_set_perm(entry.get(), e.executable ? 0755 : 0644);
  archive_entry_set_mtime(entry.get(), kFixedMtime, 0);
  check(a, archive_write_header(a, entry.get()), "writing header of " + e.name);
  if (!e.source.empty())
    writeFileData(a, e, size);
  else if (!e.contents.empty())
    writeData(a, e.contents.data(), e.contents.size(), e.name);
}

}  // namespace

ArchiveEntry fileEntry(const std::string& name, const fs::path& file, bool executable) {
  return ArchiveEntry{name, "", executable, file};
}

namespace {

std::string uniqueSuffix() {
  std::random_device rd;
  return "." + std::to_string(::getpid()) + "." + std::to_string(rd() % 1000000) + ".partial";
}

}  // namespace

void writeTarGz(const fs::path& target, const std::vector<ArchiveEntry>& entries) {
  const fs::path tmp = target.string() + uniqueSuffix();
  WriteHandle a(archive_write_new(), &archive_write_free);
  try {
    check(a.get(), archive_write_add_filter_gzip(a.get()), "gzip filter");
    check(a.get(), archive_write_set_format_pax_restricted(a.get()), "tar format");
    check(a.get(), archive_write_set_options(a.get(), "gzip:!timestamp"), "gzip options");
    check(a.get(), archive_write_open_filename(a.get(), tmp.c_str()), "creating " + tmp.string());
    for (const auto& e : entries) writeEntry(a.get(), e);
    check(a.get(), archive_write_close(a.get()), "closing " + tmp.string());
    fs::rename(tmp, target);
  } catch (...) {
    const bool full = archive_errno(a.get()) == ENOSPC || errno == ENOSPC;
    std::error_code ec;
    fs::remove(tmp, ec);
    // libarchive says "Write error"; the user needs to hear which disk is full.
    if (full)
      throw DiskFullError(target.parent_path(), "writing " + target.filename().string(),
                          "free some space there, or write the archive elsewhere (--output)");
    throw;
  }
}

namespace {

// An entry's name as an error line quotes it: its controls escaped, a
// newline too (a name holding "\nfake line: reproduced" forged a line of
// verify's output: probe 25), and no longer than 200 bytes (a 300 KB name
// was one 300 KB line).
std::string quotedName(const std::string& name) {
  constexpr std::size_t kShown = 200;
  std::string out;
  for (const char c : text::printable(name.substr(0, kShown)))
    out += c == '\n' ? std::string("\\n") : c == '\t' ? std::string("\\t") : std::string(1, c);
  return name.size() > kShown ? out + "... (" + std::to_string(name.size()) + " bytes)" : out;
}

// Why an entry may not be extracted, or "" when it may.
std::string refusal(struct archive_entry* entry, std::size_t max_bytes) {
  const std::string given = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
  if (given.empty()) return "an entry without a name";
  const std::string name = quotedName(given);
  if (given.front() == '/') return "'" + name + "' has an absolute path";
  for (const auto& part : fs::path(given))
    if (part == "..") return "'" + name + "' climbs out of the archive with '..'";
  const auto type = archive_entry_filetype(entry);
  if (type == AE_IFLNK || archive_entry_hardlink(entry)) return "'" + name + "' is a link";
  if (type != AE_IFREG && type != AE_IFDIR) return "'" + name + "' is a device, fifo or socket";
  if (archive_entry_size(entry) > static_cast<la_int64_t>(max_bytes)) return "'" + name + "' is too large";
  return "";
}

// What `shrink` writes and nothing else: tar, gzip-compressed (a zip entry
// may declare no size, which the caps could not see in advance).
ReadHandle openTarGz(const fs::path& source) {
  ReadHandle a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  check(a.get(), archive_read_open_filename(a.get(), source.c_str(), 1 << 16), "opening " + source.string());
  return a;
}

// The next entry, refused (BadInputError) when it may not be extracted;
// null at the end of the archive.
struct archive_entry* nextEntry(struct archive* a, const fs::path& source, std::size_t max_entry_bytes) {
  struct archive_entry* entry = nullptr;
  const int status = archive_read_next_header(a, &entry);
  if (status == ARCHIVE_EOF) return nullptr;
  check(a, status, "reading " + source.string());
  if (const std::string why = refusal(entry, max_entry_bytes); !why.empty())
    throw BadInputError(source.string() + ": refused: " + why);
  return entry;
}

}  // namespace

std::vector<ArchiveEntry> readTarGz(const fs::path& source, std::size_t max_entry_bytes) {
  ReadHandle a = openTarGz(source);
  std::vector<ArchiveEntry> entries;
  while (struct archive_entry* entry = nextEntry(a.get(), source, max_entry_bytes)) {
    if (archive_entry_filetype(entry) == AE_IFDIR) continue;
    ArchiveEntry e{archive_entry_pathname(entry),
                   std::string(static_cast<std::size_t>(archive_entry_size(entry)), '\0'),
                   (archive_entry_perm(entry) & 0100) != 0};
    if (!e.contents.empty()) {
      const la_ssize_t n = archive_read_data(a.get(), e.contents.data(), e.contents.size());
      if (n < 0 || static_cast<std::size_t>(n) != e.contents.size()) check(a.get(), ARCHIVE_FATAL, "reading " + e.name);
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

namespace {

// Whether the first bytes are a compressed stream's or an archive's magic.
bool packedMagic(const std::string& head) {
  static const std::string_view kMagic[]{"\x1f\x8b",
                                         "BZh",
                                         "\xfd"
                                         "7zXZ",
                                         "\x28\xb5\x2f\xfd",
                                         "PK\x03\x04",
                                         "7z\xbc\xaf\x27\x1c"};
  for (std::string_view m : kMagic)
    if (head.starts_with(m)) return true;
  return head.size() >= 262 && head.compare(257, 5, "ustar") == 0;
}

}  // namespace

std::optional<std::string> packedContents(const fs::path& file, std::size_t max_bytes) {
  std::ifstream in(file, std::ios::binary);
  std::string head(512, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (!packedMagic(head)) return std::nullopt;
  ReadHandle a(archive_read_new(), &archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_all(a.get());
  archive_read_support_format_raw(a.get());  // a compressed stream of one file (creds.json.gz)
  if (archive_read_open_filename(a.get(), file.c_str(), 1 << 16) != ARCHIVE_OK) return std::nullopt;
  std::string out;
  std::vector<char> buffer(1 << 16);
  struct archive_entry* entry = nullptr;
  while (out.size() < max_bytes && archive_read_next_header(a.get(), &entry) == ARCHIVE_OK) {
    for (la_ssize_t n; out.size() < max_bytes && (n = archive_read_data(a.get(), buffer.data(), buffer.size())) > 0;)
      out.append(buffer.data(), std::min(static_cast<std::size_t>(n), max_bytes - out.size()));
    out += '\n';
  }
  return out;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw BadInputError("cannot create a temporary directory in " + tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

bool madeByMinrepro(const fs::path& file) {
  try {
    ReadHandle a = openTarGz(file);
    bool repro = false, signature = false;
    struct archive_entry* entry = nullptr;
    for (std::size_t n = 0; n < kMaxArchiveEntries && archive_read_next_header(a.get(), &entry) == ARCHIVE_OK; ++n) {
      const std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
      repro = repro || name == "repro.py";
      signature = signature || name == "signature.txt";
      if (repro && signature) return true;
    }
  } catch (const std::exception&) {
  }
  return false;
}

namespace {

// The archive is not at fault when the extraction's own disk is full (a
// TMPDIR on a small tmpfs): said as a full disk, exit 4, not as a refusal.
[[noreturn]] void throwExtractionFull(const fs::path& archive, const fs::path& dir, const fs::path& rel) {
  const fs::path tmp = fs::temp_directory_path();
  throw DiskFullError(isWithin(dir, tmp) ? tmp : dir.parent_path(),
                      "extracting '" + quotedName(rel.string()) + "' of " + archive.string(),
                      "free space there, or set TMPDIR to a directory with room");
}

}  // namespace

std::vector<std::string> extractArchive(const fs::path& archive, const fs::path& dir, std::size_t max_entry_bytes,
                                        std::uint64_t max_total_bytes, std::size_t max_entries,
                                        bool* directory_entries) {
  if (directory_entries) *directory_entries = false;
  if (fs::is_directory(archive))
    throw BadInputError(archive.string() +
                        ": a directory, not an archive; give the repro.tar.gz that minrepro shrink wrote (an "
                        "extracted archive runs as its README says: python repro.py)");
  if (!fs::is_regular_file(archive))
    throw BadInputError(archive.string() + ": no such archive; give the repro.tar.gz that minrepro shrink wrote");
  std::vector<std::string> names;
  try {
    ReadHandle a = openTarGz(archive);
    std::set<fs::path> seen;
    std::uint64_t total = 0;
    std::vector<char> buffer(1 << 16);
    // Directories count too: 200 000 empty ones were extracted (probe 25).
    for (std::size_t entries = 0; struct archive_entry* entry = nextEntry(a.get(), archive, max_entry_bytes);) {
      if (++entries > max_entries)
        throw BadInputError(archive.string() + ": refused: it holds more than " + std::to_string(max_entries) +
                            " entries");
      if (archive_entry_filetype(entry) == AE_IFDIR) {
        if (directory_entries) *directory_entries = true;
        continue;
      }
      const fs::path rel = fs::path(archive_entry_pathname(entry)).lexically_normal();
      if (!seen.insert(rel).second)
        throw BadInputError(archive.string() + ": refused: '" + quotedName(rel.string()) + "' appears twice");
      total += static_cast<std::uint64_t>(archive_entry_size(entry));
      if (total > max_total_bytes)
        throw BadInputError(archive.string() + ": refused: its entries add up to more than " +
                            std::to_string(max_total_bytes >> 20) + " MiB");
      const fs::path target = dir / rel;
      std::error_code ec;
      fs::create_directories(target.parent_path(), ec);
      std::ofstream out(target, std::ios::binary | std::ios::trunc);
      if (ec || !out) {
        if (ec.value() == ENOSPC || errno == ENOSPC || errno == EDQUOT) throwExtractionFull(archive, dir, rel);
        throw BadInputError(archive.string() + ": cannot extract '" + quotedName(rel.string()) + "'");
      }
      // Streamed: one buffer in memory, whatever the entry's size; the caps
      // count the bytes really written, not only what the header declared.
      std::uint64_t written = 0;
      for (la_ssize_t n; (n = archive_read_data(a.get(), buffer.data(), buffer.size())) != 0;) {
        if (n < 0) check(a.get(), ARCHIVE_FATAL, "reading " + quotedName(rel.string()));
        written += static_cast<std::uint64_t>(n);
        if (written > max_entry_bytes ||
            total - static_cast<std::uint64_t>(archive_entry_size(entry)) + written > max_total_bytes)
          throw BadInputError(archive.string() + ": refused: '" + quotedName(rel.string()) +
                              "' holds more than its header said");
        out.write(buffer.data(), n);
      }
      if (!out.flush()) {
        if (errno == ENOSPC || errno == EDQUOT) throwExtractionFull(archive, dir, rel);
        throw BadInputError(archive.string() + ": cannot write '" + quotedName(rel.string()) + "'");
      }
      fs::permissions(target, (archive_entry_perm(entry) & 0100) ? fs::perms(0755) : fs::perms(0644));
      names.push_back(rel.string());
    }
  } catch (const BadInputError& e) {
    std::error_code ec;
    fs::remove_all(dir, ec);  // a refused archive leaves nothing behind
    throw BadInputError(std::string(e.what()) +
                        "; nothing was extracted. Only archives made by minrepro shrink "
                        "can be verified");
  } catch (const DiskFullError&) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  }
  return names;
}

}  // namespace minrepro
