// Sealing the archives this user makes (see the header for why).
#include "engine/archive/seal.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/process/sandbox.h"

namespace fs = std::filesystem;

namespace minrepro {

namespace {

constexpr std::size_t kKeyBytes = 32;
constexpr const char* kScheme = "hmac-sha256:";

std::string readPrivateKey(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string key(kKeyBytes, '\0');
  const bool trusted = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::getuid() &&
                       (st.st_mode & 077) == 0 && st.st_size == static_cast<off_t>(kKeyBytes) &&
                       ::read(fd, key.data(), kKeyBytes) == static_cast<ssize_t>(kKeyBytes);
  ::close(fd);
  return trusted ? key : "";
}

// Made once, never replaced: O_EXCL, so two runs starting together keep one key.
void createKey(const fs::path& file) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  ::chmod(file.parent_path().c_str(), 0700);
  std::array<unsigned char, kKeyBytes> bytes{};
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) return;
  const fs::path temporary = file.string() + ".new-" + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  // link() fails when another run made the key first: that key stays.
  if (written) (void)::link(temporary.c_str(), file.c_str());
  ::unlink(temporary.c_str());
}

// HMAC-SHA256, fed in pieces.
class Mac {
 public:
  explicit Mac(const std::string& key)
      : mac_(EVP_MAC_fetch(nullptr, "HMAC", nullptr), EVP_MAC_free), ctx_(nullptr, EVP_MAC_CTX_free) {
    if (mac_) ctx_.reset(EVP_MAC_CTX_new(mac_.get()));
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                 OSSL_PARAM_construct_end()};
    ok_ = ctx_ && EVP_MAC_init(ctx_.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(), params);
  }
  void add(const char* data, std::size_t size) {
    ok_ = ok_ && EVP_MAC_update(ctx_.get(), reinterpret_cast<const unsigned char*>(data), size);
  }
  void add(const std::string& text) { add(text.data(), text.size()); }
  void addFile(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::array<char, 1 << 16> buffer{};
    while (in) {
      in.read(buffer.data(), buffer.size());
      add(buffer.data(), static_cast<std::size_t>(in.gcount()));
    }
    ok_ = ok_ && in.eof();
  }
  // "" when OpenSSL failed anywhere: then nothing counts as sealed.
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
    std::size_t size = 0;
    if (!ok_ || !EVP_MAC_final(ctx_.get(), out.data(), &size, out.size())) return "";
    static const char* kDigits = "0123456789abcdef";
    std::string text;
    for (std::size_t i = 0; i < size; ++i) text += {kDigits[out[i] >> 4], kDigits[out[i] & 15]};
    return text;
  }

 private:
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac_;
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx_;
  bool ok_ = false;
};

bool isSealLine(const std::string& line) { return line.rfind(std::string(kSealKey) + ":", 0) == 0; }

std::string withoutSealLines(const std::string& text) {
  std::istringstream lines(text);
  std::string kept;
  for (std::string line; std::getline(lines, line);)
    if (!isSealLine(line)) kept += line + "\n";
  return kept;
}

// One entry: its name, its size and its bytes, each delimited, so that no
// two different archives feed the same stream.
void addEntry(Mac& mac, const std::string& name, std::uintmax_t size) {
  mac.add(name);
  mac.add(std::string(1, '\0') + std::to_string(size) + std::string(1, '\0'));
}

std::string sealOfEntries(const std::string& key, std::vector<const ArchiveEntry*> entries) {
  std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->name < b->name; });
  Mac mac(key);
  for (const ArchiveEntry* e : entries) {
    if (e->name == "signature.txt") {
      const std::string text = withoutSealLines(e->contents);
      addEntry(mac, e->name, text.size());
      mac.add(text);
    } else if (!e->source.empty()) {
      std::error_code ec;
      addEntry(mac, e->name, fs::file_size(e->source, ec));
      mac.addFile(e->source);
    } else {
      addEntry(mac, e->name, e->contents.size());
      mac.add(e->contents);
    }
  }
  return mac.hex();
}

}  // namespace

fs::path userArchiveKeyFile() {
  const char* config = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  if (config && *config == '/') return fs::path(config) / "minrepro" / "archive.key";
  if (home && *home == '/') return fs::path(home) / ".config" / "minrepro" / "archive.key";
  return {};
}

std::vector<fs::path> archiveKeyDirectories() {
  std::vector<fs::path> dirs;
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config && *config == '/')
    dirs.push_back(fs::path(config) / "minrepro");
  for (const fs::path& home : userHomes()) dirs.push_back(home / ".config" / "minrepro");
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  return dirs;
}

std::optional<std::string> userArchiveKey() {
  const fs::path file = userArchiveKeyFile();
  if (file.empty()) return std::nullopt;
  std::string key = readPrivateKey(file);
  if (key.empty() && !fs::exists(fs::symlink_status(file))) {
    createKey(file);
    key = readPrivateKey(file);
  }
  if (key.empty()) return std::nullopt;
  return key;
}

void sealEntries(std::vector<ArchiveEntry>& entries) {
  const auto key = userArchiveKey();
  const auto signature =
      std::find_if(entries.begin(), entries.end(), [](const ArchiveEntry& e) { return e.name == "signature.txt"; });
  if (!key || signature == entries.end()) return;
  std::vector<const ArchiveEntry*> all;
  for (const auto& e : entries) all.push_back(&e);
  const std::string seal = sealOfEntries(*key, all);
  if (seal.empty()) return;
  signature->contents = withoutSealLines(signature->contents) + kSealKey + ": " + kScheme + seal + "\n";
}

bool sealedByThisUser(const fs::path& dir, const std::vector<std::string>& names) {
  const auto key = userArchiveKey();
  if (!key || std::find(names.begin(), names.end(), "signature.txt") == names.end()) return false;
  std::vector<ArchiveEntry> entries;
  std::string recorded;
  for (const auto& name : names) {
    ArchiveEntry e{name, "", false, dir / name};
    if (name == "signature.txt") {
      e.contents = readFileBytes(dir / name);
      e.source.clear();
      std::istringstream lines(e.contents);
      for (std::string line; std::getline(lines, line);)
        if (isSealLine(line)) recorded = line.substr(std::string(kSealKey).size() + 1);
    }
    entries.push_back(std::move(e));
  }
  const std::string prefix = std::string(" ") + kScheme;
  if (recorded.rfind(prefix, 0) != 0) return false;
  recorded = recorded.substr(prefix.size());
  std::vector<const ArchiveEntry*> all;
  for (const auto& e : entries) all.push_back(&e);
  const std::string computed = sealOfEntries(*key, all);
  return !computed.empty() && computed.size() == recorded.size() &&
         CRYPTO_memcmp(computed.data(), recorded.data(), computed.size()) == 0;
}

}  // namespace minrepro
