#include "engine/archive/tar_gz.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace minrepro {
namespace {

namespace fs = std::filesystem;

TEST(ArchiveTest, RoundTripIsByteReproducibleAndAtomic) {
  testing::TempDir dir;
  const std::vector<ArchiveEntry> entries{{"REPORT.md", "# hi\n"}, {"repro.py", "print(1)\n", true}, {"empty", ""}};
  writeTarGz(dir.path() / "a.tar.gz", entries);
  writeTarGz(dir.path() / "b.tar.gz", entries);
  EXPECT_EQ(testing::readFile(dir.path() / "a.tar.gz"), testing::readFile(dir.path() / "b.tar.gz"));
  const auto back = readTarGz(dir.path() / "a.tar.gz");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[1].name, "repro.py");
  EXPECT_EQ(back[1].contents, "print(1)\n");
  EXPECT_TRUE(back[1].executable);
  EXPECT_FALSE(back[0].executable);
  // Only the two archives: no temp file left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);
  // tar itself reads it.
  std::string listing;
  ASSERT_EQ(testing::runCommand("tar tzf " + (dir.path() / "a.tar.gz").string(), &listing), 0);
  EXPECT_EQ(listing, "REPORT.md\nrepro.py\nempty\n");
}

TEST(ArchiveTest, FailedWriteLeavesNothing) {
  testing::TempDir dir;
  EXPECT_THROW(writeTarGz(dir.path() / "missing-dir" / "a.tar.gz", {{"x", "y"}}), BadInputError);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ArchiveTest, HostileEntriesAreRefused) {
  testing::TempDir dir;
  const fs::path src = dir.path() / "src";
  fs::create_directories(src / "sub");
  testing::writeFile(src / "sub" / "f", "x");
  fs::create_symlink("/etc/passwd", src / "link");
  const std::string tarball = (dir.path() / "evil.tar.gz").string();
  ASSERT_EQ(testing::runCommand("tar czf " + tarball + " -C " + src.string() + " sub/f link"), 0);
  EXPECT_THROW(readTarGz(tarball), BadInputError);
  ASSERT_EQ(testing::runCommand("tar czf " + tarball + " -C " + src.string() + " --transform 's,^sub,../sub,' sub/f"),
            0);
  try {
    readTarGz(tarball);
    FAIL() << "'..' accepted";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("'..'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minrepro
