// A full file system named as one (#43.6). Without this a work directory
// with 40 KB free made every trial die by SIGABRT and the run ended "the
// original fails, but not as case.yaml's failure section expects", and an
// archive that could not be written ended with libarchive's "Write error"
// after the whole search: the user was sent to fix a case that was right.
//
// A run checks the room it needs before its first trial, asks after a trial
// that did not fail the expected way whether the file system it wrote to is
// full, and turns a write that failed with ENOSPC into the same error:
// DiskFullError (exit 4, like any other reason the trials cannot go on),
// naming the path, what is free there and what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/errors.h"

namespace minrepro {

// The bytes an unprivileged process may still write on the file system
// that holds `path` (or, when it does not exist yet, its nearest existing
// parent); nullopt when that cannot be read.
std::optional<std::uintmax_t> availableBytes(const std::filesystem::path& path);

// "40 KB", "3.2 MB", "12 GB": what the messages print.
std::string spaceText(std::uintmax_t bytes);

// The file system that holds `path` is full or nearly: the message says
// which path, how much is free, what was being written and what to do.
class DiskFullError : public Error {
 public:
  DiskFullError(const std::filesystem::path& path, const std::string& writing, const std::string& to_do);
};

// Throws DiskFullError when fewer than `needed` bytes are free where `path`
// lives; what_for says what they are for.
void requireSpace(const std::filesystem::path& path, std::uintmax_t needed, const std::string& what_for,
                  const std::string& to_do);

// After a run of an archive's script in `run_dir` (verify's, regress's,
// compare's): when the file system it wrote to has less than a megabyte
// left, what the run wrote there (its traceback) may be lost, and its
// ending is no verdict: throws DiskFullError naming TMPDIR when the run
// lay under it, else the run's parent directory (probe 30, probe 31).
void requireRoomAfterRun(const std::filesystem::path& run_dir, const std::string& what_ran);

// TMPDIR as verify, regress and compare use it: a directory they can
// write into. Throws an Error of exit 4 naming TMPDIR when it is set to a
// file, a missing place or a read-only directory (probe 31: an internal
// error, exit 1, which CI reads as "not as expected").
void requireUsableTmpdir();

}  // namespace minrepro
