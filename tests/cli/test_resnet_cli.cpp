// The official README's ResNet-50 command lines through the `dino` binary, on a tiny PPM
// ImageFolder (tests/support/files.h) with small crops and resnet18 (resnet50 checkpoints
// would be 300 MB each):
//  - `dino train` with the README's ResNet recipe (--optimizer sgd --lr 0.03 --weight_decay
//    1e-4 --weight_decay_end 1e-4 --global_crops_scale 0.14 1 --local_crops_scale 0.05 0.14)
//    trains 2 epochs; a run resumed from the end of epoch 0 writes the same files, byte for
//    byte, as the uninterrupted one; `dino knn` and `dino linear` evaluate its teacher;
//  - where the official script refuses a ResNet (eval_copy_detection.py,
//    eval_video_segmentation.py) or any command gets an unknown name, the command fails with
//    one line and exit 2 before it opens the data; `dino info --arch resnet50` prints
//    torchvision's parameter count.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

std::vector<std::string> readme_recipe(const fs::path& data, const fs::path& out) {
  return {dino_binary(), "train", "--arch", "resnet18", "--optimizer", "sgd", "--lr", "0.03",
          "--weight_decay", "1e-4", "--weight_decay_end", "1e-4", "--global_crops_scale", "0.14",
          "1", "--local_crops_scale", "0.05", "0.14",
          // tiny: 8 images, 2 iterations of 4 per epoch, 32/16-pixel crops, a small head
          "--data_path", data.string(), "--output_dir", out.string(), "--epochs", "2",
          "--warmup_epochs", "1", "--batch_size_per_gpu", "4", "--global_crops_size", "32",
          "--local_crops_size", "16", "--local_crops_number", "2", "--out_dim", "64",
          "--head_hidden_dim", "32", "--head_bottleneck_dim", "16", "--num_workers", "1",
          "--device", "cpu", "--use_fp16", "false", "--saveckp_freq", "1", "--replicas", "1"};
}

void expect_resnet_refusal(const std::vector<std::string>& args, const std::string& needle) {
  std::vector<std::string> argv{dino_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("/no/such/data"), std::string::npos) << "opened the data first: " << r.err;
}

}  // namespace

TEST(ResNetCli, ReadmeRecipeTrainsResumesExactlyAndEvaluates) {
  const fs::path root = xdino::testing::fresh_dir("resnet_cli");
  xdino::testing::write_ppm_folder(root / "img", 4, 32, 32);
  // Both runs write to root/run (the folder's name is in config.ini and in the checkpoints'
  // args); the uninterrupted one is then moved to root/ref.
  const fs::path run = root / "run", ref = root / "ref";
  const auto uninterrupted = run_process(readme_recipe(root / "img" / "train", run));
  ASSERT_EQ(uninterrupted.exit_code, 0) << uninterrupted.err;
  EXPECT_NE(xdino::read_file(run / "config.ini").find("optimizer = sgd"), std::string::npos);
  fs::rename(run, ref);

  // Interrupted after epoch 0: checkpoint.pth was then what checkpoint0000.pth still is, and
  // log.txt had one line. The rerun of the same command resumes and must end identical.
  fs::create_directories(run);
  fs::copy_file(ref / "checkpoint0000.pth", run / "checkpoint0000.pth");
  fs::copy_file(ref / "checkpoint0000.pth", run / "checkpoint.pth");
  const std::string log = xdino::read_file(ref / "log.txt");
  ASSERT_EQ(count_lines(log), 2u);
  std::ofstream(run / "log.txt") << log.substr(0, log.find('\n') + 1);
  const auto resumed = run_process(readme_recipe(root / "img" / "train", run));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("Starting DINO training at epoch 1"), std::string::npos)
      << resumed.out;
  EXPECT_EQ(xdino::testing::differences_from(ref, run), "");

  const std::string weights = (ref / "checkpoint.pth").string();
  const auto knn = run_process({dino_binary(), "knn", "--arch", "resnet18", "--pretrained_weights",
                                weights, "--checkpoint_key", "teacher", "--image_size", "32",
                                "--data_path", (root / "img").string(), "--nb_knn", "1",
                                "--num_workers", "1", "--output_dir", (root / "knn").string()});
  ASSERT_EQ(knn.exit_code, 0) << knn.err;
  EXPECT_TRUE(fs::exists(root / "knn" / "knn.json"));
  const auto linear = run_process({dino_binary(),
                                   "linear",
                                   "--arch",
                                   "resnet18",
                                   "--pretrained_weights",
                                   weights,
                                   "--checkpoint_key",
                                   "teacher",
                                   "--image_size",
                                   "32",
                                   "--data_path",
                                   (root / "img").string(),
                                   "--epochs",
                                   "1",
                                   "--num_labels",
                                   "2",
                                   "--batch_size_per_gpu",
                                   "4",
                                   "--num_workers",
                                   "1",
                                   "--output_dir",
                                   (root / "linear").string()});
  ASSERT_EQ(linear.exit_code, 0) << linear.err;
  EXPECT_TRUE(fs::exists(root / "linear" / "linear.json"));
  fs::remove_all(root);
}

TEST(ResNetCli, RefusedWhereTheOfficialScriptRefusesBeforeOpeningData) {
  const std::string out = xdino::testing::fresh_dir("resnet_cli_refuse").string();
  expect_resnet_refusal(
      {"copy_detection", "--arch", "resnet50", "--data_path", "/no/such/data", "--output_dir", out},
      "convolutional network");
  expect_resnet_refusal({"video_segmentation", "--arch", "resnet50", "--data_path", "/no/such/data",
                         "--output_dir", out},
                        "convolutional network");
  expect_resnet_refusal(
      {"visualize", "--arch", "resnet50", "--data_path", "/no/such/data", "--output_dir", out},
      "convolutional network without patch tokens, which attention maps");
  expect_resnet_refusal({"visualize", "--arch", "resnet50", "--image_path", "/no/such/data/a.png",
                         "--output_dir", out},
                        "convolutional network without patch tokens, which attention maps");
  for (const char* command : {"train", "knn", "linear", "features", "retrieval"}) {
    SCOPED_TRACE(command);
    std::vector<std::string> args{command, "--arch", "resnet51", "--data_path", "/no/such/data"};
    if (std::string(command) == "features") {
      args.insert(args.end(), {"--output", out + "/f.h5"});
    } else {
      args.insert(args.end(), {"--output_dir", out});
    }
    expect_resnet_refusal(args, "unknown architecture 'resnet51'");
  }
  const auto info = run_process({dino_binary(), "info", "--arch", "resnet50"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("parameters: 23508032"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("GFLOPs: 4.11"), std::string::npos) << info.out;
  fs::remove_all(out);
}
