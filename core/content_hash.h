// FNV-1a 64 of a byte string, as 16 hex digits: the identity of a
// candidate (reducers/reducer.h, selectionKey) and of a case (the journal).
// Not cryptographic: it names inputs the run made itself.
#pragma once

#include <filesystem>
#include <string>

namespace minrepro {

std::string contentHash(const std::string& bytes);
// The same hash of a file's bytes, read a piece at a time (a batch of
// gigabytes is not read into memory). Throws BadInputError when unreadable.
std::string contentHashOfFile(const std::filesystem::path& file);

}  // namespace minrepro
