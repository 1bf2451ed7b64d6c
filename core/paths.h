// Path questions several parts ask, answered one way.
#pragma once

#include <algorithm>
#include <filesystem>

namespace minrepro {

// Whether `path` is `dir` or lies under it, component by component ("/tmp/a"
// is not under "/tmp/ab"); both as given: normalize or resolve them first.
inline bool isWithin(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const auto [end, _] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return end == dir.end();
}

}  // namespace minrepro
