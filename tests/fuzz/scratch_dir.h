// The directory a fuzz target writes its input into, made once per process
// under TMPDIR and removed when the process exits normally. libFuzzer may
// end with _Exit, so scripts/fuzz.sh also gives each target a TMPDIR of its
// own and removes it afterwards.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

struct FuzzScratch {
  explicit FuzzScratch(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("minrepro-fuzz-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~FuzzScratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};
