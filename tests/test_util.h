// Small helpers shared by the tests.
#pragma once

#include <filesystem>
#include <string>

namespace minrepro::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "minrepro-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string readFile(const std::filesystem::path& file);
void writeFile(const std::filesystem::path& file, const std::string& text);

// Runs a command through /bin/sh, returning its exit status; output goes to *output.
int runCommand(const std::string& command, std::string* output = nullptr);

// The Python with PyTorch: $MINREPRO_PYTHON, default /usr/bin/python3.
std::string python();

}  // namespace minrepro::testing
