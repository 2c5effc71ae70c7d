// The main job's overlays end to end at the smoke sizes (configs/fashion_mnist_smoke.ini):
// configs/fashion_mnist_dinov2.ini and configs/fashion_mnist_tuned.ini, each through `dino
// pipeline` from an empty working folder, as README gives them. What they check is the configs'
// wiring (folders, options, stages, report); the tuned recipe's numerics are
// test_main_job_digest's, recorded per LibTorch, so this file is labelled `once`
// (tests/cli/CMakeLists.txt).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

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

namespace {

// `dino pipeline` with the main job's config, the smoke sizes and then `overlays`, from the
// empty working folder `dir`, as README gives it.
xdino::testing::ProcessResult run_overlays(const fs::path& dir,
                                           const std::vector<std::string>& overlays) {
  std::vector<std::string> argv{dino_binary(), "pipeline",
                                "--config",    config("fashion_mnist.ini").string(),
                                "--config",    config("fashion_mnist_smoke.ini").string()};
  for (const auto& overlay : overlays) argv.insert(argv.end(), {"--config", overlay});
  const fs::path here = fs::current_path();
  fs::current_path(dir);
  auto r = run_process(argv);
  fs::current_path(here);
  return r;
}

// The overlay trained in runs/<name>/train, apart from the smoke run's folder: DINOv2's three
// terms in each of the two epochs' log lines, and `options` in the run's config.ini.
void expect_trained_apart(const fs::path& runs, const std::string& name,
                          const std::vector<const char*>& options) {
  EXPECT_FALSE(fs::exists(runs / "fashion_mnist_smoke")) << "the overlay's runs stay apart";
  const std::string log = xdino::read_file(runs / name / "train" / "log.txt");
  for (const char* term : {"\"train_dino_loss\"", "\"train_koleo_loss\"", "\"train_ibot_loss\""})
    EXPECT_EQ(count_of(log, term), 2u) << term << " in\n" << log;
  const std::string ini = xdino::read_file(runs / name / "train" / "config.ini");
  for (const char* option : options)
    EXPECT_NE(ini.find(option), std::string::npos) << option << " missing from\n" << ini;
}

}  // namespace

// configs/fashion_mnist_dinov2.ini on top of the smoke sizes: its own runs folder, DINOv2's three
// terms in the training log (each separately, as the collapse monitor shows them), the options in
// the run's config.ini, and the teacher's k-NN.
TEST(DemoOverlays, DinoV2OverlayTrainsWithItsThreeTermsApartFromTheMainJob) {
  if (!fs::exists(kFashionMnist / "t10k-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING()
        << "needs the Debian package dataset-fashion-mnist (scripts/setup.sh --tests)";
  const fs::path dir = xdino::testing::fresh_dir("demo_dinov2");
  const auto r = run_overlays(dir, {config("fashion_mnist_dinov2.ini").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path runs = dir / "runs";
  expect_trained_apart(
      runs, "fashion_mnist_dinov2",
      {"koleo_loss_weight = 0.1", "centering = sinkhorn_knopp", "ibot_loss_weight = 1.0"});
  reported_top1(runs / "fashion_mnist_dinov2" / "dino" / "knn.json");
  fs::remove_all(dir);
}

// configs/fashion_mnist_tuned.ini, the tuned recipe, at the smoke sizes (a fourth config
// brings its 10 epochs down to the smoke's 2): its own runs folder, DINOv2's three terms and
// the tuned options in the run's config.ini, and a report with the same reference rows as the
// main job's (raw pixels, random weights with either BatchNorm statistics) beside its teacher's
// k-NN and linear probe, in a row that names the recipe.
TEST(DemoOverlays, TunedRecipeReportsItsTeacherBesideTheReferences) {
  if (!fs::exists(kFashionMnist / "t10k-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING()
        << "needs the Debian package dataset-fashion-mnist (scripts/setup.sh --tests)";
  const fs::path dir = xdino::testing::fresh_dir("demo_tuned");
  xdino::write_file_atomically(dir / "two_epochs.ini", "[train]\nepochs = 2\n");
  const auto r = run_overlays(
      dir, {config("fashion_mnist_tuned.ini").string(), (dir / "two_epochs.ini").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path runs = dir / "runs";
  expect_trained_apart(runs, "fashion_mnist_tuned",
                       {"koleo_loss_weight = 0.3", "centering = sinkhorn_knopp",
                        "ibot_loss_weight = 1.0", "drop_path_rate = 0.2", "epochs = 2"});
  const fs::path tuned = runs / "fashion_mnist_tuned";
  EXPECT_GT(reported_top1(tuned / "pixels" / "knn.json"), 50.0);
  reported_top1(tuned / "random" / "knn.json");
  reported_top1(tuned / "dino" / "knn.json");
  const auto linear =
      xdino::parse_json(xdino::read_file(tuned / "dino" / "linear.json"), "linear.json");
  EXPECT_NE(linear.at("protocol").get<std::string>().find("cached"), std::string::npos);
  const std::string report = xdino::read_file(tuned / "report.md");
  for (const char* row : xdino::testing::kReferenceRows)
    EXPECT_NE(report.find(row), std::string::npos) << row << " missing from\n" << report;
  // The method's row names the recipe's additions, so the report cannot pass for DINO's.
  EXPECT_NE(report.find("| DINO + KoLeo 0.3 + Sinkhorn-Knopp + iBOT 1.0 | XCiT-N4/4"),
            std::string::npos)
      << report;
  fs::remove_all(dir);
}
