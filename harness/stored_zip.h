// A zip file of stored (uncompressed) records written as a stream: each
// record's bytes come from a producer in pieces of any size, so a record as
// large as a whole candidate batch is never held in memory. This is the
// container of torch.save files (torch.load and LibTorch read it with
// miniz): every record's data starts at a multiple of 64 bytes, as
// PyTorch's own writer aligns it, and zip64 fields are used where a size
// or an offset does not fit in 32 bits (batches over 4 GiB).
//
// LibTorch-free; PyTorchStreamWriter cannot be used instead because it
// takes each record as one buffer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace minrepro {

// Receives a record's bytes, in order.
using ByteSink = std::function<void(const void* data, std::size_t size)>;

class StoredZipWriter {
 public:
  // Creates (or truncates) `file`. `force_zip64` writes zip64 fields for
  // every record and the end records, as a 4 GiB batch would need (tests).
  // Errors (a full disk, no permission) throw std::filesystem::filesystem_error
  // naming the file.
  explicit StoredZipWriter(const std::filesystem::path& file, bool force_zip64 = false);
  ~StoredZipWriter();
  StoredZipWriter(const StoredZipWriter&) = delete;
  StoredZipWriter& operator=(const StoredZipWriter&) = delete;

  // Appends a record of exactly `size` bytes, which `produce` writes into
  // the sink it is given (a different count is a bug: std::logic_error).
  void addRecord(const std::string& name, std::uint64_t size, const std::function<void(const ByteSink&)>& produce);
  // Writes the central directory and closes the file. A writer destroyed
  // without finish() leaves an incomplete file (the caller removes it).
  void finish();
  // Bytes of record data written so far.
  std::uint64_t dataBytes() const { return data_bytes_; }

 private:
  struct Entry {
    std::string name;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    std::uint64_t header_offset = 0;
  };
  void write(const void* data, std::size_t size);
  void flush();
  void fail(const char* what);
  bool zip64For(std::uint64_t size, std::uint64_t offset) const;

  std::filesystem::path file_;
  int fd_ = -1;
  bool force_zip64_ = false;
  std::uint64_t offset_ = 0;  // bytes written or buffered
  std::uint64_t data_bytes_ = 0;
  std::vector<unsigned char> buffer_;
  std::vector<Entry> entries_;
};

}  // namespace minrepro
