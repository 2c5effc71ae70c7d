// The commands' TensorBoard boards (launch/training_board.h, launch/eval_board.h), read back by
// the tensorboard package's own reader (tests/support/tensorboard_events.h):
//  - `dino train`: epoch/<key> holds every number of log.txt at step epoch; a run resumed
//    from epoch 0 leaves the same (tag, step) set as the uninterrupted run, none twice, with
//    the same values; --tensorboard false writes no file;
//  - `dino knn`: knn/top1 and knn/top5 at step k equal knn.json's, once each after a rerun.
// The event files themselves (CRC, framing, pruning) are tests/core/test_tensorboard_events.cpp's.
// The reader needs scripts/setup.sh --tests' environment (pyenv_python); without it the tests
// skip (fail under XDINO_REQUIRE_ALL).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/json.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/tensorboard_events.h"

namespace fs = std::filesystem;
namespace cli = xdino::testing::cli;
using xdino::testing::dino_binary;
using xdino::testing::event_files;
using xdino::testing::pyenv_python;
using xdino::testing::read_events;
using xdino::testing::reader_missing;
using xdino::testing::run_process;
using xdino::testing::scalars_of;

namespace {

std::vector<std::string> train_args(const fs::path& data, const fs::path& out, int epochs = 2) {
  return cli::concat(
      {{dino_binary()},
       cli::train(data, out, "xcit_nano_12_p16"),
       cli::epochs(epochs, 1),
       cli::multi_crop(32, 16, 2),
       {"--batch_size_per_gpu", "4", "--out_dim", "64", "--num_workers", "1", "--device", "cpu",
        "--use_fp16", "false", "--saveckp_freq", "1", "--replicas", "1"}});
}

}  // namespace

TEST(TensorBoard, TrainingCurvesFollowLogAndResumeWritesNoStepTwice) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const fs::path root = xdino::testing::fresh_dir("tb_train");
  xdino::testing::write_ppm_folder(root / "img", 4, 32, 32);
  const fs::path data = root / "img" / "train", run = root / "run", ref = root / "ref";
  const auto full = run_process(train_args(data, run));
  ASSERT_EQ(full.exit_code, 0) << full.err;
  fs::rename(run, ref);
  const auto reference = scalars_of(read_events(event_files(ref)));

  // Every number of every log.txt line, at step epoch.
  std::istringstream log(xdino::read_file(ref / "log.txt"));
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    const xdino::Json j = xdino::Json::parse(line);
    const int64_t epoch = j["epoch"];
    for (const auto& [key, value] : j.items()) {
      if (key == "epoch" || !value.is_number()) continue;
      const auto it = reference.find({"epoch/" + key, epoch});
      ASSERT_NE(it, reference.end()) << key << " at epoch " << epoch;
      EXPECT_EQ(it->second, static_cast<float>(value.get<double>())) << key;
    }
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  EXPECT_TRUE(reference.count({"train/loss", 1}) && reference.count({"train/loss", 3}));

  // Interrupted after epoch 0, with epoch 1's events already in the file (a crash after the
  // writer flushed them): the resumed run removes them and writes them again, once.
  fs::create_directories(run);
  fs::copy_file(ref / "checkpoint0000.pth", run / "checkpoint.pth");
  for (const fs::path& f : event_files(ref)) fs::copy_file(f, run / f.filename());
  const std::string text = xdino::read_file(ref / "log.txt");
  std::ofstream(run / "log.txt") << text.substr(0, text.find('\n') + 1);
  const auto resumed = run_process(train_args(data, run));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto after = scalars_of(read_events(event_files(run)));
  ASSERT_EQ(after.size(), reference.size());
  for (const auto& [point, value] : reference) {
    const auto it = after.find(point);
    ASSERT_NE(it, after.end()) << point.first << " at " << point.second;
    // Resume is exact (tests/cli/test_train_cli.cpp); images_per_second is a clock reading.
    if (point.first != "train/images_per_second") {
      EXPECT_EQ(it->second, value) << point.first << " at " << point.second;
    }
  }

  const fs::path off = root / "off";
  std::vector<std::string> args = train_args(data, off, 1);
  args.insert(args.end(), {"--tensorboard", "false"});
  ASSERT_EQ(run_process(args).exit_code, 0);
  EXPECT_TRUE(event_files(off).empty());
}

TEST(TensorBoard, KnnBoardHoldsEveryKOnceAfterARerun) {
  if (const std::string why = reader_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const fs::path root = xdino::testing::fresh_dir("tb_knn");
  xdino::testing::write_ppm_folder(root / "img", 4, 32, 32);
  std::vector<std::string> args{dino_binary(),      "knn",         "--arch",
                                "xcit_nano_12_p16", "--data_path", (root / "img").string()};
  args.insert(args.end(), {"--image_size", "32", "--nb_knn", "1", "3", "--output_dir",
                           (root / "knn").string(), "--num_workers", "1"});
  for (int run = 0; run < 2; ++run) {
    const auto r = run_process(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const auto scalars = scalars_of(read_events(event_files(root / "knn")));
  const xdino::Json knn = xdino::Json::parse(xdino::read_file(root / "knn" / "knn.json"));
  ASSERT_EQ(knn["results"].size(), 2u);
  EXPECT_EQ(scalars.size(), 4u);
  for (const auto& row : knn["results"]) {
    const int64_t k = row["k"];
    EXPECT_EQ(scalars.at({"knn/top1", k}), static_cast<float>(row["top1"].get<double>()));
    EXPECT_EQ(scalars.at({"knn/top5", k}), static_cast<float>(row["top5"].get<double>()));
  }
}
