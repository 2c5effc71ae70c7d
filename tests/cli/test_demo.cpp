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
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::testing::count_of;
using xdino::testing::dino_binary;
using xdino::testing::kFashionMnist;
using xdino::testing::run_process;

namespace {

fs::path config(const std::string& name) {
  return fs::path(xdino::testing::test_data_dir()).parent_path().parent_path() / "configs" / name;
}

// knn.json's reported top-1, checked to be a percentage.
double reported_top1(const fs::path& file) {
  const auto j = xdino::parse_json(xdino::read_file(file), file.string());
  const double top1 = j.at("reported").at("top1").get<double>();
  EXPECT_GE(top1, 0.0) << file;
  EXPECT_LE(top1, 100.0) << file;
  return top1;
}

}  // namespace

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
  for (const char* row :
       {"| None | Pixels", "| Random init, initial BatchNorm statistics | XCiT-N4/4",
        "| Random init, BatchNorm statistics of the data | XCiT-N4/4", "| DINO | XCiT-N4/4",
        "(train/curves.png)"})
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

// configs/fashion_mnist_dinov2.ini on top of the smoke sizes: its own runs folder, DINOv2's three
// terms in the training log (each separately, as the collapse monitor shows them), the options in
// the run's config.ini, and the teacher's k-NN.
TEST(Demo, DinoV2OverlayTrainsWithItsThreeTermsApartFromTheMainJob) {
  if (!fs::exists(kFashionMnist / "t10k-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING()
        << "needs the Debian package dataset-fashion-mnist (scripts/setup.sh --tests)";
  const fs::path dir = xdino::testing::fresh_dir("demo_dinov2");
  const fs::path here = fs::current_path();
  fs::current_path(dir);
  const auto r =
      run_process({dino_binary(), "pipeline", "--config", config("fashion_mnist.ini").string(),
                   "--config", config("fashion_mnist_smoke.ini").string(), "--config",
                   config("fashion_mnist_dinov2.ini").string()});
  fs::current_path(here);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path runs = dir / "runs";
  EXPECT_FALSE(fs::exists(runs / "fashion_mnist_smoke")) << "the overlay's runs stay apart";
  const std::string log = xdino::read_file(runs / "fashion_mnist_dinov2" / "train" / "log.txt");
  for (const char* term : {"\"train_dino_loss\"", "\"train_koleo_loss\"", "\"train_ibot_loss\""})
    EXPECT_EQ(count_of(log, term), 2u) << term << " in\n" << log;
  const std::string ini = xdino::read_file(runs / "fashion_mnist_dinov2" / "train" / "config.ini");
  for (const char* option :
       {"koleo_loss_weight = 0.1", "centering = sinkhorn_knopp", "ibot_loss_weight = 1.0"})
    EXPECT_NE(ini.find(option), std::string::npos) << option << " missing from\n" << ini;
  reported_top1(runs / "fashion_mnist_dinov2" / "dino" / "knn.json");
  fs::remove_all(dir);
}
