#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace minrepro::testing {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string readFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
}

int runCommand(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  std::array<char, 4096> buf;
  std::string text;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) text.append(buf.data(), n);
  const int status = ::pclose(pipe);
  if (output) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string python() {
  const char* p = std::getenv("MINREPRO_PYTHON");
  return p && *p ? p : MINREPRO_TEST_DEFAULT_PYTHON;
}

bool programsOfAnotherBuild() {
  const char* other = std::getenv("MINREPRO_TEST_PROGRAMS");
  return other && *other;
}

const char* programUnderTest(const char* path_in_this_build) {
  static std::mutex mutex;
  static std::map<std::string, std::string> programs;  // node-based: c_str() stays valid
  const std::lock_guard lock(mutex);
  auto [at, inserted] = programs.try_emplace(path_in_this_build, path_in_this_build);
  if (inserted && programsOfAnotherBuild()) {
    const fs::path relative = fs::path(path_in_this_build).lexically_relative(MINREPRO_TEST_BUILD_DIR);
    at->second = (fs::path(std::getenv("MINREPRO_TEST_PROGRAMS")) / relative).string();
  }
  return at->second.c_str();
}

fs::path sharedTestData() {
  const char* p = std::getenv("MINREPRO_TEST_SHARED");
  return p && *p ? fs::path(p) : fs::path();
}

std::string makeCases(const std::string& generator, const fs::path& dest) {
  const fs::path root = sharedTestData();
  const fs::path shared = root / fs::path(generator).parent_path().filename();
  if (!root.empty() && fs::is_directory(shared)) {
    std::error_code ec;
    fs::create_directories(dest, ec);
    if (!ec) fs::copy(shared, dest, fs::copy_options::recursive, ec);
    return ec ? "copying " + shared.string() + " to " + dest.string() + ": " + ec.message() : "";
  }
  std::string output;
  const int status =
      runCommand(python() + " " + std::string(MINREPRO_SOURCE_DIR) + "/" + generator + " " + dest.string(), &output);
  return status == 0 ? "" : generator + " exited with " + std::to_string(status) + ":\n" + output;
}

std::string saveSmallClass4Batch(const fs::path& examples, const fs::path& batch) {
  std::string output;
  const int status =
      runCommand(python() + " -c \"import torch; b = torch.load('" + (examples / "class4" / "batch.pt").string() +
                     "'); i = list(range(8)) + [313]; "
                     "torch.save({k: v[i] for k, v in b.items()}, '" +
                     batch.string() + "')\"",
                 &output);
  return status == 0 ? "" : "saving the small class4 batch exited with " + std::to_string(status) + ":\n" + output;
}

}  // namespace minrepro::testing
