// The main job's smoke variant end to end, as CI runs it: `dino pipeline` with
// configs/fashion_mnist.ini + configs/fashion_mnist_smoke.ini on the Debian Fashion-MNIST
// package, from an empty working folder. Every stage's output must exist and be well-formed,
// and a rerun must reuse every stage instead of redoing it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "core/atomic_file.h"
#include "core/json.h"
#include "tests/support/demo_runs.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::testing::config;
using xdino::testing::count_of;
using xdino::testing::dino_binary;
using xdino::testing::kFashionMnist;
using xdino::testing::reported_top1;
using xdino::testing::run_process;

TEST(Demo, SmokeVariantRunsEveryStageAndReusesThemOnRerun) {
  if (!fs::exists(kFashionMnist / "t10k-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING()
        << "needs the Debian package dataset-fashion-mnist (scripts/setup.sh --tests)";
  const fs::path dir = xdino::testing::fresh_dir("demo");
  const fs::path here = fs::current_path();
  fs::current_path(dir);  // the configs' relative runs/ folders land here
  const std::vector<std::string> argv = {dino_binary(), "pipeline",
                                         "--config",    config("fashion_mnist.ini").string(),
                                         "--config",    config("fashion_mnist_smoke.ini").string()};
  auto r = run_process(argv);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path runs = dir / "runs" / "fashion_mnist_smoke";

  for (const char* f : {"train/checkpoint.pth", "train/config.ini", "train/log.txt"})
    EXPECT_TRUE(fs::is_regular_file(runs / f)) << f;
  const std::string log = xdino::read_file(runs / "train" / "log.txt");
  EXPECT_EQ(count_of(log, "\"train_loss\""), 2u);
  // The online k-NN monitor ran after each epoch and drew the curves the report shows.
  EXPECT_EQ(count_of(log, "\"knn_top1\""), 2u) << log;
  // ... measured before training against raw pixels, the initial teacher, and the initial
  // teacher with the data's BatchNorm statistics (XCiT has BatchNorm).
  const auto reference = xdino::parse_json(xdino::read_file(runs / "train" / "knn_reference.json"),
                                           "knn_reference.json");
  EXPECT_TRUE(reference.at("knn_top1_random_bn").is_number()) << reference;
  EXPECT_FALSE(cv::imread((runs / "train" / "curves.png").string()).empty());

  // 10 classes: pixels on 1000 training images are far above chance (10%).
  EXPECT_GT(reported_top1(runs / "pixels" / "knn.json"), 50.0);
  reported_top1(runs / "random" / "knn.json");
  const auto random = xdino::parse_json(xdino::read_file(runs / "random" / "knn.json"), "knn.json");
  EXPECT_EQ(random.at("batch_norm").get<std::string>(), "initial");
  EXPECT_EQ(random.at("data_batch_norm").at("images").get<int64_t>(), 256);  // smoke config
  reported_top1(runs / "dino" / "knn.json");
  const auto linear =
      xdino::parse_json(xdino::read_file(runs / "dino" / "linear.json"), "linear.json");
  EXPECT_NE(linear.at("protocol").get<std::string>().find("cached"), std::string::npos);

  const std::string report = xdino::read_file(runs / "report.md");
  for (const char* row : xdino::testing::kReferenceRows)
    EXPECT_NE(report.find(row), std::string::npos) << row << " missing from\n" << report;
  for (const char* row : {"| DINO | XCiT-N4/4", "(train/curves.png)"})
    EXPECT_NE(report.find(row), std::string::npos) << row << " missing from\n" << report;

  int pictures = 0;
  for (const auto& e : fs::directory_iterator(runs / "pictures")) {
    if (!e.is_directory()) continue;  // the pipeline's marker
    ++pictures;
    const cv::Mat overview = cv::imread((e.path() / "overview.png").string());
    EXPECT_FALSE(overview.empty()) << e.path();
    EXPECT_TRUE(fs::is_regular_file(e.path() / "attn.npy")) << e.path();
  }
  EXPECT_EQ(pictures, 2);
  EXPECT_NE(r.out.find("report.md"), std::string::npos) << "the end names the report";

  r = run_process(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_of(r.out, "reused"), 7u) << r.out;
  fs::current_path(here);
  fs::remove_all(dir);
}
