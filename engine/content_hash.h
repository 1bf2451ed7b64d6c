// FNV-1a 64 of a byte string, as 16 hex digits: the identity of a
// candidate (reducers/reducer.h, selectionKey) and of a case (the journal).
// Not cryptographic: it names inputs the run made itself.
#pragma once

#include <string>

namespace minrepro {

std::string contentHash(const std::string& bytes);

}  // namespace minrepro
