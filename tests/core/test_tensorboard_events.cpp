// core/tensorboard.h's event files, read back by the tensorboard package's own reader
// (tests/support/tensorboard_events.h):
//  - CRC-32C against its published check value, the masking against the formula written
//    out again here;
//  - EventWriter's scalars and images come back as written; a flipped byte in a record makes
//    the reader drop it and what follows (so the checksums are what it verifies);
//  - prune_events keeps exactly what it is told, in order, from a file cut at any byte of its
//    last records too, and touches only this program's own writable files: not a damaged
//    one, not Python's SummaryWriter's, not a read-only one or a link.
// The commands' boards (dino train, dino knn) are tests/cli/test_tensorboard.cpp's. Without the
// reader's environment the tests that read skip (fail under XDINO_REQUIRE_ALL).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/json.h"
#include "core/tensorboard.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/tensorboard_events.h"

namespace fs = std::filesystem;
using xdino::testing::event_files;
using xdino::testing::Point;
using xdino::testing::pyenv_python;
using xdino::testing::read_events;
using xdino::testing::reader_missing;
using xdino::testing::run_process;
using xdino::testing::scalars_of;

namespace {

// Masked CRC as the TFRecord format defines it, written out independently of the library.
uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace

TEST(TensorBoardEvents, Crc32cMatchesItsCheckValue) {
  // The CRC-32C (Castagnoli) check value of "123456789" (RFC 3720, appendix B.4).
  EXPECT_EQ(xdino::tensorboard::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(xdino::tensorboard::crc32c(""), 0u);
  EXPECT_EQ(xdino::tensorboard::crc32c(std::string(32, '\0')),
            0x8A9136AAu);  // RFC 3720 B.4: 32 zeros
  EXPECT_EQ(xdino::tensorboard::masked_crc32c("123456789"), mask(0xE3069283u));
}

TEST(TensorBoardEvents, WrittenEventsReadBackAndCorruptionIsDetected) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const fs::path dir = xdino::testing::fresh_dir("tb_writer");
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, 'x');
  fs::path file;
  {
    xdino::tensorboard::EventWriter w(dir / "run");
    file = w.path();
    for (int64_t step = 0; step < 5; ++step) w.scalar("a/loss", 1.0 / (step + 1), step * 10);
    w.image("pictures/attention", png, 7, 5, 3, 3);
    w.scalar("b/top1", 73.5, 20);
  }
  const xdino::Json events = read_events({file});
  const auto scalars = scalars_of(events);
  ASSERT_EQ(scalars.size(), 6u) << events.dump();
  for (int64_t step = 0; step < 5; ++step)
    EXPECT_EQ(scalars.at({"a/loss", step * 10}), static_cast<float>(1.0 / (step + 1)));
  EXPECT_EQ(scalars.at({"b/top1", 20}), 73.5);
  ASSERT_EQ(events["images"].size(), 1u);
  EXPECT_EQ(events["images"][0], xdino::Json::parse(R"(["pictures/attention", 3, 7, 5, 108])"));

  // A flipped bit in the image record's data: that record and the one after are lost.
  std::string bytes = xdino::read_file(file);
  const size_t at = bytes.find("xxxxxxxxxx");
  ASSERT_NE(at, std::string::npos);
  bytes[at] ^= 0x40;
  const fs::path broken = dir / "events.out.tfevents.broken";
  std::ofstream(broken, std::ios::binary) << bytes;
  const xdino::Json partial = read_events({broken});
  EXPECT_EQ(partial["scalars"].size(), 5u) << partial.dump();
  EXPECT_EQ(partial["images"].size(), 0u) << partial.dump();
}

TEST(TensorBoardEvents, PruneKeepsExactlyWhatItIsTold) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const fs::path dir = xdino::testing::fresh_dir("tb_prune");
  fs::path file;
  {
    xdino::tensorboard::EventWriter w(dir);
    file = w.path();
    for (int64_t step = 0; step < 10; ++step) {
      w.scalar("train/loss", static_cast<double>(step), step);
      w.scalar("epoch/loss", static_cast<double>(-step), step);
    }
  }
  std::ofstream(dir / "notes.txt") << "not an event file";
  xdino::tensorboard::prune_events(
      dir, [](const std::string& tag, int64_t step) { return tag != "train/loss" || step < 4; });
  EXPECT_EQ(xdino::read_file(dir / "notes.txt"), "not an event file");
  const xdino::Json events = read_events({file});
  std::vector<Point> order;
  for (const auto& s : events["scalars"]) order.emplace_back(s[0], s[1]);
  std::vector<Point> expected;
  for (int64_t step = 0; step < 10; ++step) {
    if (step < 4) expected.emplace_back("train/loss", step);
    expected.emplace_back("epoch/loss", step);
  }
  EXPECT_EQ(order, expected);
  xdino::tensorboard::prune_events(dir / "missing",
                                   [](const std::string&, int64_t) { return false; });
}

// A run killed while it wrote its last event leaves a file that ends at any byte of that
// record. Resuming prunes the steps it will log again, and the file must come out as its
// whole records before them, every cut alike: a record cut within its 8-byte length or its
// CRC, or within the event, as well as one cut at a record boundary. The resumed run's new
// file then holds those steps again, and tensorboard's reader sees each step once.
TEST(TensorBoardEvents, AFileCutAtAnyByteOfItsLastRecordsResumesWithEveryStepOnce) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const fs::path root = xdino::testing::fresh_dir("tb_cut");
  fs::path written;
  {
    xdino::tensorboard::EventWriter w(root / "whole");
    written = w.path();
    for (int64_t step = 0; step < 6; ++step) w.scalar("train/loss", 0.5 * step, step);
  }
  const std::string whole = xdino::read_file(written);
  // The records' starts, from the framing: 8-byte length, 4-byte CRC, data, 4-byte CRC.
  std::vector<size_t> starts;
  for (size_t at = 0; at < whole.size();) {
    starts.push_back(at);
    uint64_t n = 0;
    std::memcpy(&n, whole.data() + at, 8);
    at += 16 + n;
  }
  ASSERT_EQ(starts.size(), 7u);       // file_version, then steps 0..5
  const size_t keep_end = starts[5];  // steps 4 and 5 (the last two records) are logged again
  const auto keep = [](const std::string& tag, int64_t step) {
    return tag != "train/loss" || step < 4;
  };
  std::vector<std::string> files;  // per cut: the pruned file, then the resumed run's
  for (size_t cut = keep_end; cut <= whole.size(); ++cut) {
    const fs::path dir = root / ("cut_" + std::to_string(cut));
    fs::create_directories(dir);
    const fs::path file = dir / written.filename();
    std::ofstream(file, std::ios::binary) << whole.substr(0, cut);
    xdino::tensorboard::prune_events(dir, keep);
    // What remains is the records before the pruned steps, byte for byte.
    EXPECT_EQ(xdino::read_file(file), whole.substr(0, keep_end)) << "cut at byte " << cut;
    fs::path resumed;
    {
      xdino::tensorboard::EventWriter w(dir);
      resumed = w.path();
      for (int64_t step = 4; step < 6; ++step) w.scalar("train/loss", 0.5 * step, step);
    }
    files.push_back(file.string());
    files.push_back(resumed.string());
  }
  std::vector<std::string> argv{
      pyenv_python(), xdino::testing::repo_file("tests/support/tensorboard_read.py"), "--each"};
  argv.insert(argv.end(), files.begin(), files.end());
  const auto r = run_process(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const xdino::Json each = xdino::Json::parse(r.out)["files"];
  ASSERT_EQ(each.size(), files.size());
  for (size_t i = 0; i < files.size(); i += 2) {
    SCOPED_TRACE(files[i]);
    xdino::Json both = each[i];
    for (const auto& s : each[i + 1]["scalars"]) both["scalars"].push_back(s);
    const auto scalars = scalars_of(both);  // fails on a step seen twice
    EXPECT_EQ(scalars.size(), 6u) << both.dump();
  }
}

// Resuming prunes only what this writer wrote: a file with the name of one of ours that does
// not parse as one (damaged, or not an event file at all) stays byte for byte.
TEST(TensorBoardEvents, PruneLeavesAFileItDidNotWriteAsItIs) {
  const fs::path dir = xdino::testing::fresh_dir("tb_foreign");
  fs::path ours;
  {
    xdino::tensorboard::EventWriter w(dir);
    ours = w.path();
    for (int64_t step = 0; step < 4; ++step) w.scalar("train/loss", 1.0, step);
  }
  std::string flipped = xdino::read_file(ours);
  flipped[flipped.size() / 2] ^= 0x01;  // inside a record: its CRC no longer matches
  const std::vector<std::pair<std::string, std::string>> foreign = {
      {"events.out.tfevents.text.xdino", std::string(500, 'x')},  // its "length" is 8 x's
      {"events.out.tfevents.short.xdino", "abc"},
      {"events.out.tfevents.zeros.xdino", std::string(64, '\0')},
      {"events.out.tfevents.flipped.xdino", flipped},
  };
  for (const auto& [name, bytes] : foreign) std::ofstream(dir / name, std::ios::binary) << bytes;
  xdino::tensorboard::prune_events(dir, [](const std::string&, int64_t step) { return step < 2; });
  for (const auto& [name, bytes] : foreign) EXPECT_EQ(xdino::read_file(dir / name), bytes) << name;
  EXPECT_LT(xdino::read_file(ours).size(), flipped.size()) << "our own file is still pruned";
}

// What another program wrote in the run folder is not ours to prune, however valid: a file
// of Python's own torch.utils.tensorboard SummaryWriter (22 records of steps 0..20; it
// shrank to 4 before), and, of our own files, a read-only one and a link to one outside the
// folder: each stays byte for byte, with its mode, and the link a link.
TEST(TensorBoardEvents, PruneTouchesOnlyItsOwnWritableFiles) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  if (const std::string why = xdino::testing::python_lacks({"torch"}, pyenv_python()); !why.empty())
    XDINO_SKIP_MISSING() << why;
  const fs::path root = xdino::testing::fresh_dir("tb_others"), dir = root / "run";
  fs::create_directories(dir);
  const auto r =
      run_process({pyenv_python(), "-c",
                   "import sys\n"
                   "from torch.utils.tensorboard import SummaryWriter\n"
                   "w = SummaryWriter(sys.argv[1])\n"
                   "for step in range(21): w.add_scalar('train/loss', 1.0 / (step + 1), step)\n"
                   "w.close()\n",
                   dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto python_files = event_files(dir);
  ASSERT_EQ(python_files.size(), 1u);
  const std::string python_bytes = xdino::read_file(python_files[0]);
  ASSERT_EQ(read_events(python_files)["scalars"].size(), 21u);
  fs::path read_only, outside, ours;
  for (fs::path* p : {&read_only, &outside, &ours}) {
    xdino::tensorboard::EventWriter w(p == &outside ? root / "elsewhere" : dir);
    *p = w.path();
    for (int64_t step = 0; step < 6; ++step) w.scalar("train/loss", 1.0, step);
  }
  fs::permissions(read_only, fs::perms::owner_read | fs::perms::group_read);
  const fs::path link = dir / outside.filename();
  fs::create_symlink(outside, link);
  const std::string ours_before = xdino::read_file(ours), linked = xdino::read_file(outside),
                    locked = xdino::read_file(read_only);
  xdino::tensorboard::prune_events(dir, [](const std::string&, int64_t step) { return step < 2; });
  EXPECT_EQ(xdino::read_file(python_files[0]), python_bytes) << "SummaryWriter's file changed";
  EXPECT_EQ(xdino::read_file(read_only), locked);
  EXPECT_EQ(fs::status(read_only).permissions() & fs::perms::owner_write, fs::perms::none);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(xdino::read_file(outside), linked);
  EXPECT_LT(xdino::read_file(ours).size(), ours_before.size()) << "our own file is pruned";
  fs::remove_all(root);
}
