// --in_chans through the binary (issue 44): `dino train --in_chans 1` on Fashion-MNIST writes a
// 1-channel model and records the count; `dino knn` on that checkpoint without the flag builds
// the 1-channel model from the weights; 16-bit 4-channel TIFFs train and evaluate through the
// float pipeline with --mean/--std; a count without the normalisation it needs, and the wrong
// count for the weights, are one line and exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "core/atomic_file.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/train_fixture.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::kFashionMnist;
using xdino::testing::run_process;
using xdino::testing::TempDir;

namespace {

std::vector<std::string> gray_train_args(const fs::path& data, const fs::path& out) {
  return cli::concat({{dino_binary()},
                      cli::train(data, out, "xcit_nano_4_p4"),
                      {"--in_chans", "1", "--max_samples", "64"},
                      cli::dino_head(64, 64, 32),
                      cli::multi_crop(28, 12, 2),
                      {"--batch_size_per_gpu", "16"},
                      cli::epochs(1, 0),
                      {"--num_workers", "1", "--device", "cpu"}});
}

std::vector<std::string> knn_args(const fs::path& weights, const fs::path& out) {
  return {dino_binary(),
          "knn",
          "--arch",
          "xcit_nano_4_p4",
          "--pretrained_weights",
          weights.string(),
          "--data_path",
          kFashionMnist.string(),
          "--output_dir",
          out.string(),
          "--image_size",
          "28",
          "--max_train_samples",
          "100",
          "--max_val_samples",
          "50",
          "--nb_knn",
          "5",
          "--batch_size_per_gpu",
          "50",
          "--num_workers",
          "1"};
}

}  // namespace

TEST(InChansCli, TrainGrayThenKnnTakesTheCountFromTheCheckpoint) {
  if (!fs::exists(kFashionMnist / "train-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING() << "needs the Debian package dataset-fashion-mnist";
  TempDir out, knn_out;
  auto r = run_process(gray_train_args(kFashionMnist, out.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(xdino::read_file(out.path() / "config.ini").find("in_chans = 1"), std::string::npos);
  const auto ckpt = xdino::load_pth(out.path() / "checkpoint.pth").toGenericDict();
  EXPECT_EQ(ckpt.at("args").toGenericDict().at("in_chans").toInt(), 1);
  for (const char* model : {"student", "teacher"}) {
    const auto weights = ckpt.at(model).toGenericDict();
    bool found = false;
    for (const auto& item : weights) {
      const std::string& key = item.key().toStringRef();
      if (key.size() >= 27 &&
          key.compare(key.size() - 27, 27, "patch_embed.proj.0.0.weight") == 0) {
        found = true;
        EXPECT_EQ(item.value().toTensor().size(1), 1) << model << " " << key;
      }
    }
    EXPECT_TRUE(found) << model;
  }

  r = run_process(knn_args(out.path() / "checkpoint.pth", knn_out.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("xcit_nano_4_p4 reads 1-channel images"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(knn_out.path() / "knn.json"));

  // Asked for 3 channels explicitly: the weights are refused in one line, exit 2.
  auto args = knn_args(out.path() / "checkpoint.pth", knn_out.path());
  args.insert(args.end(), {"--in_chans", "3"});
  r = run_process(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("the input convolution 'patch_embed.proj.0.0.weight' reads 1-channel "
                       "images but the model was built for 3; build it with --in_chans 1"),
            std::string::npos)
      << r.err;
}

// Only RGB and gray have a default normalisation: another count without --mean/--std is
// refused before the data path is even looked at (it does not exist here).
TEST(InChansCli, CountsWithoutANormalisationAreRefusedBeforeAnyData) {
  TempDir out;
  for (const std::string command : {"train", "knn"}) {
    std::vector<std::string> args = {
        dino_binary(),       command,  "--data_path",    "/nonexistent/data", "--output_dir",
        out.path().string(), "--arch", "xcit_nano_4_p4", "--in_chans",        "4",
        "--device",          "cpu"};
    if (command == "knn") args.resize(args.size() - 2);  // knn has no --device
    const auto r = run_process(args);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("--in_chans 4: give --mean and --std, one value or 4 each"),
              std::string::npos)
        << command << ": " << r.err;
  }
}

namespace {

// An ImageFolder of 16-bit 4-channel TIFFs (R, G, B, near infrared), two classes told apart by
// the orientation of the stripes in the fourth channel only: what RGB alone cannot see.
void write_multispectral_folder(const fs::path& root, int per_class, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(8000, 50000), noise(-3000, 3000);
  for (const char* cls : {"horizontal", "vertical"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < per_class; ++i) {
      cv::Mat image(32, 32, CV_16UC4);  // B, G, R, A order for OpenCV's encoder
      const int base = level(rng), period = 3 + i % 4;
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          uint16_t* p = image.ptr<uint16_t>(y) + 4 * x;
          for (int c = 0; c < 3; ++c) p[c] = static_cast<uint16_t>(base + noise(rng));
          const int t = cls[0] == 'h' ? y : x;
          p[3] = static_cast<uint16_t>((t / period) % 2 ? 60000 : 5000);
        }
      ASSERT_TRUE(cv::imwrite((root / cls / (std::to_string(i) + ".tif")).string(), image));
    }
  }
}

}  // namespace

TEST(InChansCli, SixteenBitFourChannelTiffsTrainAndEvaluate) {
  TempDir data, out, knn_out;
  write_multispectral_folder(data.path() / "train", 24, 1);
  write_multispectral_folder(data.path() / "val", 8, 2);
  auto args = gray_train_args(data.path(), out.path());
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--in_chans") args[i + 1] = "4";
    if (args[i] == "--global_crops_size") args[i + 1] = "32";
    if (args[i] == "--local_crops_size") args[i + 1] = "16";
  }
  args.insert(args.end(), {"--mean", "0.5", "--std", "0.25"});
  auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto saved = xdino::load_pth(out.path() / "checkpoint.pth").toGenericDict();
  const auto train_args = saved.at("args").toGenericDict();
  EXPECT_EQ(train_args.at("in_chans").toInt(), 4);
  EXPECT_EQ(train_args.at("mean").toList().get(0).toDouble(), 0.5);

  // knn takes the count from the weights; the data decode to 4 float channels (16-bit, kAuto).
  std::vector<std::string> knn = knn_args(out.path() / "checkpoint.pth", knn_out.path());
  for (size_t i = 0; i + 1 < knn.size(); ++i) {
    if (knn[i] == "--data_path") knn[i + 1] = data.path().string();
    if (knn[i] == "--image_size") knn[i + 1] = "32";
  }
  // Without --mean/--std: the checkpoint records the run's (args.mean, args.std), and 4
  // channels have no default, so knn takes them, says so, and measures what the flags give.
  r = run_process(knn);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("normalising 4-channel images with the mean and std that the weights"),
            std::string::npos)
      << r.out;
  const std::string from_file = xdino::read_file(knn_out.path() / "knn.json");
  knn.insert(knn.end(), {"--mean", "0.5", "--std", "0.25"});
  r = run_process(knn);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("normalising 4-channel images with the mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("xcit_nano_4_p4 reads 4-channel images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the float pipeline reads them at full depth"), std::string::npos) << r.out;
  const auto top1 = [](const std::string& json) {
    return xdino::Json::parse(json)["results"].dump();
  };
  EXPECT_EQ(top1(xdino::read_file(knn_out.path() / "knn.json")), top1(from_file));
}
