// Atomic writes: a failing writer never damages the existing file nor leaves litter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/atomic_file.h"
#include "core/check.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_dir;

namespace {

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST(AtomicFile, ReplacesContent) {
  const fs::path dir = fresh_dir("replace");
  const fs::path file = dir / "checkpoint.pth";
  xdino::write_file_atomically(file, "old");
  xdino::write_file_atomically(file, "new content");
  EXPECT_EQ(xdino::read_file(file), "new content");
  EXPECT_EQ(files_in(dir), 1u);
  fs::remove_all(dir);
}

TEST(AtomicFile, FailingWriterLeavesOldFileIntact) {
  const fs::path dir = fresh_dir("fail");
  const fs::path file = dir / "checkpoint.pth";
  xdino::write_file_atomically(file, "precious");
  EXPECT_THROW(xdino::write_atomically(file,
                                       [](const fs::path& tmp) {
                                         std::ofstream(tmp) << "half-writ";
                                         throw std::runtime_error("disk on fire");
                                       }),
               std::runtime_error);
  EXPECT_EQ(xdino::read_file(file), "precious");
  EXPECT_EQ(files_in(dir), 1u) << "the temporary file must be removed";
  fs::remove_all(dir);
}

TEST(AtomicFile, WriterThatProducesNothingFails) {
  const fs::path dir = fresh_dir("nothing");
  EXPECT_THROW(xdino::write_atomically(dir / "x", [](const fs::path&) {}), xdino::Error);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(AtomicFile, MissingFolderIsNamed) {
  try {
    xdino::write_file_atomically("/nonexistent_xdino_dir/file.txt", "x");
    FAIL();
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nonexistent_xdino_dir"), std::string::npos);
  }
}

TEST(AtomicFile, ReadMissingFileNamesPath) {
  try {
    xdino::read_file("/nonexistent_xdino_file");
    FAIL();
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nonexistent_xdino_file"), std::string::npos);
  }
}

// A copy crossing the 1 MiB buffer several times is the same bytes; a copy that meets a full
// disk (a file-size limit: EFBIG, SIGXFSZ ignored as `dino` does) names the file and the
// reason, keeps the previous file and leaves no temporary.
TEST(AtomicFile, CopyIsExactAndAFailedCopyKeepsThePreviousFile) {
  const fs::path dir = fresh_dir("copy");
  std::string bytes(3 * (1 << 20) + 12345, '\0');
  std::mt19937 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  xdino::write_file_atomically(dir / "from", bytes);
  xdino::copy_file_atomically(dir / "from", dir / "to");
  EXPECT_EQ(xdino::read_file(dir / "to"), bytes);

  xdino::write_file_atomically(dir / "to", "previous");
  const std::string message = xdino::testing::error_under_file_size_limit(
      1 << 20, [&] { xdino::copy_file_atomically(dir / "from", dir / "to"); });
  EXPECT_NE(message.find("cannot write '" + (dir / "to").string() +
                         "': File too large (the previous file is left as it was)"),
            std::string::npos)
      << message;
  EXPECT_EQ(xdino::read_file(dir / "to"), "previous");
  EXPECT_EQ(files_in(dir), 2u);  // from, to: no temporary
  EXPECT_THROW(xdino::copy_file_atomically(dir / "missing", dir / "to2"), xdino::Error);
  fs::remove_all(dir);
}
