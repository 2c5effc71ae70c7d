// DINO demonstrably learns, end to end through `dino train --knn_every 1`, in about a minute
// on two cores: on tests/support/textures.h's images (the class is a texture, the colours are
// nuisance that varies within each image) a random network's features are dominated by
// colour, and DINO's multi-crop views teach the texture. The threshold is relative to what the
// monitor measures for the same network at random initialisation on the same data, in this
// run (knn_reference.json); the numbers this test sees are in bench/RESULTS.md ("Learning
// test").
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/textures.h"

namespace fs = std::filesystem;
using namespace xdino;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

// The recipe: XCiT-N4/4 (8x8 tokens at 32 px), a small head, 2 local crops, 4 epochs
// of 800 images at batch 32.
constexpr int kTrainPerClass = 200, kValPerClass = 100, kEpochs = 4;
// What "clearly learned" means: the final 20-NN top-1 at least this many points above the
// random-init value of the same run, and the epoch-mean loss this much lower than in epoch 0.
constexpr double kMarginPoints = 10.0, kLossDrop = 0.05;

}  // namespace

TEST(Learning, DinoLearnsTexturesThatARandomNetworkCannotTellApart) {
  const fs::path root = xdino::testing::fresh_dir("learning");
  const fs::path data = root / "data", out = root / "train";
  xdino::testing::write_textures(data, kTrainPerClass, kValPerClass);
  const auto r = run_process({dino_binary(),
                              "train",
                              "--data_path",
                              data.string(),
                              "--output_dir",
                              out.string(),
                              "--arch",
                              "xcit_nano_4_p4",
                              "--out_dim",
                              "256",
                              "--head_hidden_dim",
                              "256",
                              "--head_bottleneck_dim",
                              "64",
                              "--global_crops_size",
                              "32",
                              "--local_crops_size",
                              "16",
                              "--local_crops_number",
                              "2",
                              "--blur_sigma",
                              "0.02",
                              "0.3",
                              "--batch_size_per_gpu",
                              "32",
                              "--epochs",
                              std::to_string(kEpochs),
                              "--warmup_epochs",
                              "1",
                              "--lr",
                              "0.002",
                              "--momentum_teacher",
                              "0.99",
                              "--knn_every",
                              "1",
                              "--knn_train_samples",
                              std::to_string(4 * kTrainPerClass),
                              "--knn_val_samples",
                              std::to_string(4 * kValPerClass),
                              "--num_workers",
                              "1",
                              "--device",
                              "cpu"},
                             {{"OMP_NUM_THREADS", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const Json ref = parse_json(read_file(out / "knn_reference.json"), "knn_reference.json");
  const double random = ref.at("knn_top1_random").get<double>();
  std::vector<double> knn, loss;
  std::istringstream lines(read_file(out / "log.txt"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = parse_json(line, "log.txt");
    knn.push_back(j.at("knn_top1").get<double>());
    loss.push_back(j.at("train_loss").get<double>());
  }
  ASSERT_EQ(knn.size(), static_cast<size_t>(kEpochs));
  std::string curve;
  for (double v : knn) curve += " " + std::to_string(v);
  std::cout << "20-NN top-1: random init " << random << ", per epoch" << curve << "; loss "
            << loss.front() << " -> " << loss.back() << " (" << r.seconds << " s)\n";
  // Learned: the final teacher classifies clearly better than its random initialisation...
  EXPECT_GE(knn.back(), random + kMarginPoints) << "random init " << random << ", epochs:" << curve;
  // ... and the loss fell.
  EXPECT_LT(loss.back(), loss.front() - kLossDrop)
      << "loss " << loss.front() << " -> " << loss.back();
  EXPECT_FALSE(cv::imread((out / "curves.png").string()).empty());
  fs::remove_all(root);
}
