#include "harness/stored_zip.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace minrepro {

namespace {

constexpr std::uint64_t kAlignment = 64;            // where each record's data starts (PyTorch's kFieldAlignment)
constexpr std::uint32_t k32BitLimit = 0xFFFFFFFFu;  // a field that says "see the zip64 extra field"
constexpr std::size_t kBufferLimit = 1 << 20;
// 1980-01-01 00:00 in DOS format: files identical for identical content.
constexpr std::uint16_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;

void put16(std::vector<unsigned char>& out, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put32(std::vector<unsigned char>& out, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put64(std::vector<unsigned char>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

}  // namespace

StoredZipWriter::StoredZipWriter(const fs::path& file, bool force_zip64) : file_(file), force_zip64_(force_zip64) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create");
  buffer_.reserve(kBufferLimit);
}

StoredZipWriter::~StoredZipWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void StoredZipWriter::fail(const char* what) {
  const int error = errno;
  throw fs::filesystem_error(std::string(what) + " " + file_.string(), file_,
                             std::error_code(error, std::generic_category()));
}

bool StoredZipWriter::zip64For(std::uint64_t size, std::uint64_t offset) const {
  return force_zip64_ || size >= k32BitLimit || offset >= k32BitLimit;
}

void StoredZipWriter::flush() {
  const unsigned char* p = buffer_.data();
  std::size_t left = buffer_.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write");
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

void StoredZipWriter::write(const void* data, std::size_t size) {
  offset_ += size;
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (buffer_.size() + size <= kBufferLimit) {
    buffer_.insert(buffer_.end(), bytes, bytes + size);
    return;
  }
  flush();
  while (size > 0) {  // large pieces go straight to the file
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write");
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Local header (sizes known, CRC patched in afterwards: no data descriptor),
// a zip64 extra field where needed, and an "FB" padding field that puts the
// data at a multiple of 64 bytes.
void StoredZipWriter::addRecord(const std::string& name, std::uint64_t size,
                                const std::function<void(const ByteSink&)>& produce) {
  Entry entry{name, size, 0, offset_};
  const bool zip64 = zip64For(size, 0);
  std::vector<unsigned char> header;
  put32(header, 0x04034b50);
  put16(header, zip64 ? 45 : 20);
  put16(header, 0);  // flags
  put16(header, 0);  // stored
  put16(header, kDosTime);
  put16(header, kDosDate);
  put32(header, 0);  // CRC, patched below
  put32(header, zip64 ? k32BitLimit : size);
  put32(header, zip64 ? k32BitLimit : size);
  std::vector<unsigned char> extra;
  if (zip64) {
    put16(extra, 0x0001);
    put16(extra, 16);
    put64(extra, size);
    put64(extra, size);
  }
  const std::uint64_t before_padding = offset_ + 30 + name.size() + extra.size() + 4;
  const std::uint64_t padding = (kAlignment - before_padding % kAlignment) % kAlignment;
  put16(extra, 0x4246);  // "FB", as PyTorch's writer names its padding
  put16(extra, padding);
  extra.resize(extra.size() + padding, 0);
  put16(header, name.size());
  put16(header, extra.size());
  header.insert(header.end(), name.begin(), name.end());
  header.insert(header.end(), extra.begin(), extra.end());
  write(header.data(), header.size());

  std::uint64_t written = 0;
  uLong crc = crc32(0L, Z_NULL, 0);
  produce([&](const void* data, std::size_t n) {
    if (written + n > size) throw std::logic_error("record " + name + " is larger than announced");
    for (std::size_t done = 0; done < n;) {  // crc32 takes a 32-bit length
      const auto piece = static_cast<uInt>(std::min<std::size_t>(n - done, 1u << 30));
      crc = crc32(crc, static_cast<const Bytef*>(data) + done, piece);
      done += piece;
    }
    write(data, n);
    written += n;
  });
  if (written != size) throw std::logic_error("record " + name + " is smaller than announced");
  data_bytes_ += size;
  entry.crc = static_cast<std::uint32_t>(crc);
  flush();
  std::vector<unsigned char> crc_bytes;
  put32(crc_bytes, entry.crc);
  if (::pwrite(fd_, crc_bytes.data(), 4, static_cast<off_t>(entry.header_offset + 14)) != 4) fail("cannot write");
  entries_.push_back(std::move(entry));
}

void StoredZipWriter::finish() {
  const std::uint64_t directory_offset = offset_;
  bool any_zip64 = force_zip64_;
  for (const Entry& e : entries_) {
    const bool size64 = zip64For(e.size, 0), offset64 = zip64For(0, e.header_offset);
    std::vector<unsigned char> extra;
    if (size64 || offset64) {
      any_zip64 = true;
      put16(extra, 0x0001);
      put16(extra, (size64 ? 16 : 0) + (offset64 ? 8 : 0));
      if (size64) {
        put64(extra, e.size);
        put64(extra, e.size);
      }
      if (offset64) put64(extra, e.header_offset);
    }
    std::vector<unsigned char> h;
    put32(h, 0x02014b50);
    put16(h, (3 << 8) | 45);  // made by: Unix, zip 4.5
    put16(h, size64 || offset64 ? 45 : 20);
    put16(h, 0);
    put16(h, 0);
    put16(h, kDosTime);
    put16(h, kDosDate);
    put32(h, e.crc);
    put32(h, size64 ? k32BitLimit : e.size);
    put32(h, size64 ? k32BitLimit : e.size);
    put16(h, e.name.size());
    put16(h, extra.size());
    put16(h, 0);               // comment
    put16(h, 0);               // disk
    put16(h, 0);               // internal attributes
    put32(h, 0100644u << 16);  // external attributes: a regular file, rw-r--r--
    put32(h, offset64 ? k32BitLimit : e.header_offset);
    h.insert(h.end(), e.name.begin(), e.name.end());
    h.insert(h.end(), extra.begin(), extra.end());
    write(h.data(), h.size());
  }
  const std::uint64_t directory_size = offset_ - directory_offset;
  any_zip64 = any_zip64 || zip64For(directory_size, directory_offset) || entries_.size() >= 0xFFFF;
  std::vector<unsigned char> end;
  if (any_zip64) {
    const std::uint64_t record_offset = offset_;
    put32(end, 0x06064b50);
    put64(end, 44);  // size of the rest of this record
    put16(end, (3 << 8) | 45);
    put16(end, 45);
    put32(end, 0);
    put32(end, 0);
    put64(end, entries_.size());
    put64(end, entries_.size());
    put64(end, directory_size);
    put64(end, directory_offset);
    put32(end, 0x07064b50);  // locator
    put32(end, 0);
    put64(end, record_offset);
    put32(end, 1);
  }
  put32(end, 0x06054b50);
  put16(end, 0);
  put16(end, 0);
  put16(end, any_zip64 ? 0xFFFF : entries_.size());
  put16(end, any_zip64 ? 0xFFFF : entries_.size());
  put32(end, any_zip64 ? k32BitLimit : directory_size);
  put32(end, any_zip64 ? k32BitLimit : directory_offset);
  put16(end, 0);
  write(end.data(), end.size());
  flush();
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("cannot write");
  }
  fd_ = -1;
}

}  // namespace minrepro
