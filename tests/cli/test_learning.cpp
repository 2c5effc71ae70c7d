// What DINO training does in about two minutes on two cores, end to end through `dino train
// --knn_every 1`, judged against the honest reference (docs/evaluation.md, "The
// random-weights reference"): on tests/support/textures.h's images (the class is a texture, the
// colours are nuisance that varies within each image) XCiT-N4/4 with its initial BatchNorm
// statistics is near chance, and the same random weights with the BatchNorm statistics of the
// data (knn_reference.json's knn_top1_random_bn) are as good as anything this budget trains.
// Measured (2026-11-26, this recipe): random init 25.75, with the data's BatchNorm statistics
// 53.0, raw pixels 54.5; the teacher per epoch 42.0, 47.75, 48.0, 49.25 at lr 0.002, and 43.0,
// 50.0, 50.0, 51.0 at lr 0 (no learning: its BatchNorm statistics alone); 10 epochs at lr 0.002
// end at 52.25, lr 0.004 and 0.008 at 36.5 and 31.5, ViT-Ti/8 (no BatchNorm) below its random
// init. So the k-NN here shows no learning, and the test does not claim any: what it checks is
//  - the reference: the data's BatchNorm statistics lift the random network by 10 points or more
//    (the margin the previous version of this test took for learning);
//  - learning: the epoch loss falls (at lr 0 it rises: 5.20 -> 5.80), which an optimiser that
//    does nothing fails;
//  - no collapse: the final teacher stays within 8 points of the reference (a collapsed or
//    over-driven teacher falls towards chance, 25).
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/textures.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using namespace xdino;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

// The recipe: XCiT-N4/4 (8x8 tokens at 32 px), a small head, 2 local crops, 4 epochs
// of 800 images at batch 32.
constexpr int kTrainPerClass = 200, kValPerClass = 100, kEpochs = 4;
// The BatchNorm statistics' lift over random init (measured 27.25), the epoch-mean loss drop
// from epoch 0 (measured 0.29), how far below the reference the final teacher may end
// (measured 3.75), all in this run.
constexpr double kBatchNormLift = 10.0, kLossDrop = 0.05, kBelowReference = 8.0;

}  // namespace

TEST(Learning, DinoLowersItsLossAndKeepsItsKnnNearTheBatchNormReference) {
  const fs::path root = xdino::testing::fresh_dir("learning");
  const fs::path data = root / "data", out = root / "train";
  xdino::testing::write_textures(data, kTrainPerClass, kValPerClass);
  const auto r = run_process(
      cli::concat({{dino_binary()},
                   cli::train(data, out, "xcit_nano_4_p4"),
                   cli::dino_head(256, 256, 64),
                   cli::multi_crop(32, 16, 2),
                   {"--blur_sigma", "0.02", "0.3", "--batch_size_per_gpu", "32"},
                   cli::epochs(kEpochs, 1),
                   {"--lr", "0.002", "--momentum_teacher", "0.99", "--knn_every", "1",
                    "--knn_train_samples", std::to_string(4 * kTrainPerClass), "--knn_val_samples",
                    std::to_string(4 * kValPerClass), "--num_workers", "1", "--device", "cpu"}}),
      {{"OMP_NUM_THREADS", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const Json ref = parse_json(read_file(out / "knn_reference.json"), "knn_reference.json");
  const double random = ref.at("knn_top1_random").get<double>();
  const double random_bn = ref.at("knn_top1_random_bn").get<double>();
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
  std::cout << "20-NN top-1: random init " << random << ", with the data's BatchNorm statistics "
            << random_bn << ", per epoch" << curve << "; loss " << loss.front() << " -> "
            << loss.back() << " (" << r.seconds << " s)\n";
  // The reference that learning would have to clear is far above the initial statistics...
  EXPECT_GE(random_bn, random + kBatchNormLift) << "random init " << random << ", with the data's "
                                                << "BatchNorm statistics " << random_bn;
  // ... the DINO loss fell ...
  EXPECT_LT(loss.back(), loss.front() - kLossDrop)
      << "loss " << loss.front() << " -> " << loss.back();
  // ... and the teacher's features did not collapse on the way.
  EXPECT_GE(knn.back(), random_bn - kBelowReference)
      << "reference " << random_bn << ", epochs:" << curve;
  EXPECT_FALSE(cv::imread((out / "curves.png").string()).empty());
  fs::remove_all(root);
}
