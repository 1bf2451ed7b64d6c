// Which archives this user made: the sandbox decision of verify, regress
// and compare (core/process/sandbox.h) must rest on nothing an archive can
// forge.
//
// A line an archive carries ("made on this machine") is copied with the
// archive: take a published archive, swap its repro.py, keep the line, and
// the payload ran unsandboxed. So shrink seals what it writes: an
// HMAC-SHA256 over every entry's name and bytes, keyed with a secret only
// this user can read (created on first use, mode 0600, under
// $XDG_CONFIG_HOME/minrepro or ~/.config/minrepro). An archive whose seal
// this key reproduces was written by this user's minrepro, byte for byte;
// anything else (a changed file, an added one, another user's or another
// machine's archive, an archive made before seals) is "made elsewhere" and
// runs in the sandbox. OpenSSL's libcrypto computes the HMAC: cryptography
// is not code to write ourselves.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/archive/tar_gz.h"

namespace minrepro {

// signature.txt's line that carries the seal.
inline constexpr const char* kSealKey = "seal";

// The key file, made on first use (its directory 0700, the file 0600,
// never replaced). nullopt when there is no home to keep it in, or the file
// is not this user's, not private or not a key: then nothing is sealed and
// every archive counts as made elsewhere.
std::optional<std::string> userArchiveKey();
std::filesystem::path userArchiveKeyFile();

// Every directory the key may lie in, whichever of XDG_CONFIG_HOME and HOME
// a run names: both are hidden from a sandboxed run (a run that read the
// key could seal forgeries that later run without a sandbox).
std::vector<std::filesystem::path> archiveKeyDirectories();

// Appends "seal: hmac-sha256:HEX" to the signature.txt entry, computed over
// every entry (streamed from `source` where there is one; signature.txt
// without its seal line). Nothing when there is no key.
void sealEntries(std::vector<ArchiveEntry>& entries);

// Whether the archive extracted under `dir` (its entries `names`) carries a
// seal this user's key reproduces.
bool sealedByThisUser(const std::filesystem::path& dir, const std::vector<std::string>& names);

}  // namespace minrepro
