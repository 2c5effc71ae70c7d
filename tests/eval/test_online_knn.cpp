// The online k-NN monitor (eval/online_knn.h) against `dino knn`'s own evaluation on the same
// subsets (the official protocol, tested against eval_knn.py in test_knn/test_eval_end_to_end),
// its side effects on the model, and curves.png's reading of log.txt (eval/curves.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <opencv2/imgcodecs.hpp>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "eval/curves.h"
#include "eval/knn_eval.h"
#include "eval/online_knn.h"
#include "models/registry.h"
#include "ssl/metrics.h"
#include "tests/support/files.h"
#include "tests/support/textures.h"

namespace fs = std::filesystem;
using namespace xdino;

namespace {

// Runs `measure` on a model in train mode, as the trainer holds its teacher, and checks that it
// only read it: every parameter and buffer equal, still in train mode, and the global RNG where
// `measure` found it (`who` names what would have consumed it).
void expect_only_read(torch::nn::Module& model, const char* who,
                      const std::function<void()>& measure) {
  std::vector<torch::Tensor> before;
  for (const auto& t : model.named_parameters()) before.push_back(t.value().clone());
  for (const auto& t : model.named_buffers()) before.push_back(t.value().clone());
  torch::manual_seed(123);
  measure();
  const torch::Tensor drawn_after = torch::rand({4});
  torch::manual_seed(123);
  EXPECT_TRUE(drawn_after.equal(torch::rand({4}))) << who << " consumed the global RNG";
  EXPECT_TRUE(model.is_training());
  size_t i = 0;
  for (const auto& t : model.named_parameters())
    EXPECT_TRUE(t.value().equal(before[i++])) << t.key();
  for (const auto& t : model.named_buffers()) EXPECT_TRUE(t.value().equal(before[i++])) << t.key();
}

class OnlineKnnTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(xdino::testing::fresh_dir("online_knn"));
    xdino::testing::write_textures(*root_, 40, 10);  // 160 train, 40 val
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static eval::OnlineKnnOptions options() {
    eval::OnlineKnnOptions o;
    o.data_path = root_->string();
    o.train_samples = 100;  // class-balanced: 25 per class
    o.val_samples = 20;
    o.input.image_size = 32;
    o.input.num_workers = 1;
    return o;
  }
  static fs::path* root_;
};
fs::path* OnlineKnnTest::root_ = nullptr;

eval::KnnEvalOptions dino_knn_options(const eval::OnlineKnnOptions& o, const std::string& arch,
                                      const fs::path& out) {
  eval::KnnEvalOptions k;
  k.model.arch = arch;
  k.input.image_size = o.input.image_size;
  k.data_path = o.data_path;
  k.subset.max_train_samples = o.train_samples;
  k.subset.max_val_samples = o.val_samples;
  k.nb_knn = {o.k};
  k.input.num_workers = 1;
  k.output_dir = out.string();
  return k;
}

eval::KnnResult dino_knn(const eval::OnlineKnnOptions& o, const std::string& arch,
                         const fs::path& out) {
  return eval::run_knn_eval(dino_knn_options(o, arch, out), *local_communicator(), torch::kCPU).knn;
}

}  // namespace

TEST_F(OnlineKnnTest, PixelsEqualDinoKnnOnTheSameSubsets) {
  auto knn = eval::OnlineKnn::open(options());
  ASSERT_NE(knn, nullptr);
  const auto r = knn->pixels(*local_communicator());
  EXPECT_EQ(r.num_train, 100);
  EXPECT_EQ(r.num_val, 20);
  const fs::path out = xdino::testing::fresh_dir("online_knn_pixels");
  const eval::KnnResult want = dino_knn(options(), "pixels", out);
  fs::remove_all(out);
  EXPECT_EQ(r.top1, want.per_k[0].top1);
  EXPECT_EQ(r.top5, want.per_k[0].top5);
  EXPECT_GT(r.top1, 0.0);
}

TEST_F(OnlineKnnTest, TeacherMeasuredAsDinoKnnMeasuresRandomWeightsAndLeftUntouched) {
  // dino knn builds the random-weight model with the global generator seeded by spec.seed 0;
  // build the same one here, in train mode as the trainer holds its teacher.
  torch::manual_seed(0);
  auto model = models::create_backbone("xcit_nano_4_p4");
  model->train();
  auto knn = eval::OnlineKnn::open(options());
  eval::OnlineKnnResult r;
  expect_only_read(*model, "the monitor",
                   [&] { r = knn->measure(*model, *local_communicator(), torch::kCPU); });

  const fs::path out = xdino::testing::fresh_dir("online_knn_random");
  const eval::KnnResult want = dino_knn(options(), "xcit_nano_4_p4", out);
  fs::remove_all(out);
  EXPECT_NEAR(r.top1, want.per_k[0].top1, 1e-9);
  EXPECT_GT(r.seconds, 0.0);
}

// The reference for learning (docs/evaluation.md, "The random-weights reference"): the
// monitor's copy of the teacher with the BatchNorm statistics of its train subset measures what
// `dino knn --recalibrate_bn` measures on the same images by its own path, and the teacher
// itself is only read.
TEST_F(OnlineKnnTest, DataBatchNormReferenceEqualsDinoKnnRecalibrateBnAndTeacherIsOnlyRead) {
  torch::manual_seed(0);  // dino knn's random weights (spec.seed 0)
  auto model = models::create_backbone("xcit_nano_4_p4");
  model->train();
  auto knn = eval::OnlineKnn::open(options());
  decltype(knn->measure_with_data_batch_norm(*model, {}, *local_communicator(), torch::kCPU)) r;
  expect_only_read(*model, "building the copy", [&] {
    r = knn->measure_with_data_batch_norm(*model, {}, *local_communicator(), torch::kCPU);
  });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->num_train, 100);

  const fs::path out = xdino::testing::fresh_dir("online_knn_random_bn");
  eval::KnnEvalOptions k = dino_knn_options(options(), "xcit_nano_4_p4", out);
  k.recalibrate_bn = options().train_samples;       // the monitor's images: its train subset
  k.input.batch_size = options().input.batch_size;  // the same batches, so the same average
  const eval::KnnEvalResult want = eval::run_knn_eval(k, *local_communicator(), torch::kCPU);
  ASSERT_TRUE(want.knn_data_batch_norm.has_value());
  EXPECT_NEAR(r->top1, want.knn_data_batch_norm->per_k[0].top1, 1e-9);
  EXPECT_NEAR(r->top5, want.knn_data_batch_norm->per_k[0].top5, 1e-9);
  const Json j = parse_json(read_file(out / "knn.json"), "knn.json");
  EXPECT_EQ(j.at("batch_norm").get<std::string>(), "initial");
  EXPECT_EQ(j.at("data_batch_norm").at("images").get<int64_t>(), 100);
  EXPECT_EQ(j.at("data_batch_norm").at("reported").at("top1").get<double>(),
            want.knn_data_batch_norm->per_k[0].top1);
  // The initial statistics and the data's give different features (else the reference would
  // measure nothing): the random-init k-NN of the same run differs.
  EXPECT_NE(j.at("reported").at("top1").get<double>(),
            j.at("data_batch_norm").at("reported").at("top1").get<double>());
  fs::remove_all(out);

  // Without BatchNorm there is nothing to adapt: no copy, no measurement.
  models::BackboneOptions pixel_options;
  pixel_options.img_size = 32;
  auto pixels = models::create_backbone("pixels", pixel_options);
  EXPECT_FALSE(knn->measure_with_data_batch_norm(*pixels, pixel_options, *local_communicator(),
                                                 torch::kCPU));
}

// dino knn --recalibrate_bn: random weights only; a model without BatchNorm is measured once.
TEST_F(OnlineKnnTest, DinoKnnRecalibrateBnMeasuresOnceWithoutBatchNormAndOnlyRandomWeights) {
  const fs::path out = xdino::testing::fresh_dir("knn_recalibrate_bn");
  eval::KnnEvalOptions k = dino_knn_options(options(), "vit_tiny", out);
  k.model.patch_size = 16;
  k.recalibrate_bn = 50;
  const eval::KnnEvalResult r = eval::run_knn_eval(k, *local_communicator(), torch::kCPU);
  EXPECT_FALSE(r.knn_data_batch_norm.has_value());
  const Json j = parse_json(read_file(out / "knn.json"), "knn.json");
  EXPECT_EQ(j.at("batch_norm").get<std::string>(), "none");
  EXPECT_FALSE(j.contains("data_batch_norm"));

  k.model.pretrained_weights = (out / "knn.json").string();  // any file: refused before reading
  EXPECT_THROW(eval::run_knn_eval(k, *local_communicator(), torch::kCPU), UsageError);
  k = dino_knn_options(options(), "pixels", out);
  k.recalibrate_bn = 50;
  EXPECT_THROW(eval::run_knn_eval(k, *local_communicator(), torch::kCPU), UsageError);
  k.recalibrate_bn = -1;
  EXPECT_THROW(eval::run_knn_eval(k, *local_communicator(), torch::kCPU), UsageError);
  fs::remove_all(out);
}

TEST(OnlineKnn, UnlabelledDataIsSkippedAndAMissingValSplitNamed) {
  const fs::path flat = xdino::testing::fresh_dir("online_knn_flat");
  xdino::testing::write_textures(flat / "tmp", 2, 0);  // 8 images, moved into one flat folder
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(flat / "tmp"))
    if (e.is_regular_file()) fs::copy_file(e.path(), flat / ("img" + std::to_string(n++) + ".png"));
  fs::remove_all(flat / "tmp");
  eval::OnlineKnnOptions o;
  o.data_path = flat.string();
  o.train_samples = 20;
  EXPECT_EQ(eval::OnlineKnn::open(o), nullptr);

  const fs::path no_val = xdino::testing::fresh_dir("online_knn_noval");
  xdino::testing::write_textures(no_val, 6, 1);
  fs::remove_all(no_val / "val");
  o.data_path = no_val.string();
  EXPECT_THROW(eval::OnlineKnn::open(o), UsageError);
  fs::remove_all(flat);
  fs::remove_all(no_val);
}

TEST(TrainingCurves, ReadsTheLogAndTheReferenceAndDrawsThreePanels) {
  const fs::path dir = xdino::testing::fresh_dir("curves");
  std::string log;
  for (int e = 0; e < 3; ++e) {
    Json extra = Json::object();
    extra["images_seen"] = 640 * (e + 1);
    if (e != 1) {
      extra["knn_top1"] = 50.0 + 10 * e;
      extra["knn_train"] = 100;
      extra["knn_val"] = 20;
    }
    ssl::IterationStats a;
    a.loss = 5.0 - e;
    a.teacher_entropy = 4.0 - e;
    a.dino_loss = a.loss;  // the DINO term: all of the loss
    log += ssl::log_line(e, a, extra) + "\n";
  }
  write_file_atomically(dir / "log.txt", log);
  write_file_atomically(dir / "knn_reference.json",
                        R"({"knn_top1_random": 40.0, "knn_top1_random_bn": 45.5, )"
                        R"("knn_top1_pixels": 70.5, "k": 20, "knn_train": 100, "knn_val": 20})");
  const eval::TrainingCurves c = eval::read_training_curves(dir);
  EXPECT_EQ(*c.knn_random_bn, 45.5);
  EXPECT_FALSE(c.knn_random_no_batch_norm);
  ASSERT_EQ(c.loss.size(), 3u);
  EXPECT_EQ(c.loss[2].images_seen, 1920);
  EXPECT_EQ(c.loss[2].value, 3.0);
  ASSERT_EQ(c.teacher_entropy.size(), 3u);
  ASSERT_EQ(c.knn_top1.size(), 3u);  // initial teacher at 0, epochs 0 and 2
  EXPECT_EQ(c.knn_top1[0].images_seen, 0);
  EXPECT_EQ(c.knn_top1[0].value, 40.0);
  EXPECT_EQ(c.knn_top1[2].value, 70.0);
  EXPECT_EQ(*c.knn_pixels, 70.5);
  EXPECT_EQ(c.knn_train, 100);

  eval::write_training_curves(dir);
  const cv::Mat png = cv::imread((dir / "curves.png").string());
  ASSERT_FALSE(png.empty());
  EXPECT_EQ(png.cols, 3 * 420);
  EXPECT_EQ(png.rows, 320 + 72);  // the panels, then the legend strip
  // The curve colour appears in each panel (something was drawn, not just axes).
  for (int panel = 0; panel < 3; ++panel) {
    int orange = 0;
    for (int y = 0; y < png.rows; ++y)
      for (int x = panel * 420; x < (panel + 1) * 420; ++x) {
        const cv::Vec3b p = png.at<cv::Vec3b>(y, x);  // BGR
        orange += p[2] == 200 && p[1] == 90 && p[0] == 30;
      }
    EXPECT_GT(orange, 20) << "panel " << panel;
  }
  // The reference line with the data's BatchNorm statistics, in its own colour, in the k-NN
  // panel only.
  const auto purple = [&](int panel, int y0 = 0, int y1 = 320 + 72) {
    int n = 0;
    for (int y = y0; y < y1; ++y)
      for (int x = panel * 420; x < (panel + 1) * 420; ++x) {
        const cv::Vec3b p = png.at<cv::Vec3b>(y, x);
        n += p[2] == 150 && p[1] == 60 && p[0] == 150;
      }
    return n;
  };
  EXPECT_GT(purple(2, 0, 320), 100);
  EXPECT_EQ(purple(0) + purple(1), 0);
  // Its label is a row of the legend strip: the k-NN panel's fourth (curve, pixels, random,
  // random with the data's BatchNorm), not drawn over the plot.
  EXPECT_GT(purple(2, 320 + 3 * 16, 320 + 4 * 16 + 4), 20);
  EXPECT_EQ(purple(2, 320, 320 + 3 * 16), 0);

  // A backbone without BatchNorm: null, and no such line.
  write_file_atomically(dir / "knn_reference.json",
                        R"({"knn_top1_random": 40.0, "knn_top1_random_bn": null, )"
                        R"("knn_top1_pixels": 70.5, "k": 20, "knn_train": 100, "knn_val": 20})");
  const eval::TrainingCurves no_bn = eval::read_training_curves(dir);
  EXPECT_FALSE(no_bn.knn_random_bn.has_value());
  EXPECT_TRUE(no_bn.knn_random_no_batch_norm);

  write_file_atomically(dir / "log.txt", log + "{\"epoch\": 3, \"train_loss\": \n");
  try {
    eval::read_training_curves(dir);
    FAIL() << "a truncated line must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("log.txt line 4"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
