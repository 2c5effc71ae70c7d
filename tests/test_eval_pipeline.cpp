// Evaluation end to end on a tiny generated ImageFolder with a tiny random XCiT: extraction
// against a per-image forward written here, k-NN and linear runs and their files (log.txt
// keys, checkpoint.pth read by Python's torch.load, resume, --evaluate, cached mode).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "augment/dataset.h"
#include "augment/decode.h"
#include "augment/eval_transforms.h"
#include "core/atomic_file.h"
#include "eval/extract.h"
#include "eval/json.h"
#include "eval/knn_eval.h"
#include "eval/linear_eval.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_temp_dir;
using namespace xdino::eval;

namespace {

// Two classes told apart by colour; 40x48 images so the eval resize and crop both act.
fs::path make_image_folder(const std::string& name, int per_class_train, int per_class_val) {
  const fs::path root = fresh_temp_dir(name);
  cv::RNG rng(7);
  for (const auto& [split, count] : {std::pair{"train", per_class_train}, {"val", per_class_val}})
    for (int c = 0; c < 2; ++c) {
      const fs::path dir = root / split / (c == 0 ? "red" : "blue");
      fs::create_directories(dir);
      for (int i = 0; i < count; ++i) {
        cv::Mat bgr(40, 48, CV_8UC3);
        rng.fill(bgr, cv::RNG::UNIFORM, 0, 120);
        bgr += c == 0 ? cv::Scalar(0, 0, 120) : cv::Scalar(120, 0, 0);
        cv::imwrite((dir / ("img" + std::to_string(i) + ".png")).string(), bgr);
      }
    }
  return root;
}

BackboneSpec tiny_xcit() {
  BackboneSpec s;
  s.arch = "xcit_nano_12_p16";
  s.image_size = 32;
  return s;
}

Json read_json(const fs::path& p) { return Json::parse(xdino::read_file(p), p.string()); }

std::vector<Json> read_lines(const fs::path& p) {
  std::vector<Json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line, p.string()));
  return out;
}

std::vector<std::string> keys(const Json& j) {
  std::vector<std::string> k;
  for (const auto& [name, v] : j.members()) k.push_back(name);
  return k;
}

}  // namespace

TEST(EvalPipeline, ExtractionEqualsPerImageForward) {
  const fs::path root = make_image_folder("extract", 3, 4);
  torch::manual_seed(0);
  const auto model = load_frozen_backbone(tiny_xcit(), torch::kCPU);
  const auto data = xdino::augment::open_dataset(root.string(), "val");
  ExtractOptions o;
  o.batch_size = 3;  // batches that do not divide the 8 images
  o.num_workers = 2;
  o.image_size = 32;
  const FeatureSet f = extract_features(*model, data, o, *xdino::local_communicator(), torch::kCPU);
  ASSERT_EQ(f.features.sizes(), (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(f.labels.sum().item<int64_t>(), 4);  // "blue" = 0, "red" = 1: four of each
  xdino::augment::EvalTransformOptions eo;
  eo.crop_size = 32;
  const xdino::augment::EvalTransform transform(eo);
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(f.paths[i], data->path(i));
    EXPECT_EQ(f.labels[i].item<int64_t>(), data->label(i));
    const torch::Tensor x = transform(xdino::augment::read_image(f.paths[i])).unsqueeze(0);
    const torch::Tensor y = model->forward(x).squeeze(0).to(torch::kDouble);
    const torch::Tensor expected = y / y.norm();
    EXPECT_TRUE(torch::allclose(f.features[i].to(torch::kDouble), expected, 1e-4, 1e-5)) << i;
  }
  EXPECT_NEAR(f.features.norm(2, 1).min().item<float>(), 1.0f, 1e-5);
  fs::remove_all(root);
}

TEST(EvalPipeline, KnnRunWritesResultsAndReloadsDumps) {
  const fs::path root = make_image_folder("knn", 6, 3);
  const fs::path out = root / "out";
  KnnEvalOptions o;
  o.model = tiny_xcit();
  o.data_path = root.string();
  o.nb_knn = {1, 3, 20};
  o.batch_size_per_gpu = 4;
  o.num_workers = 2;
  o.output_dir = out.string();
  o.dump_features = (root / "dump").string();
  torch::manual_seed(0);
  EXPECT_THROW(run_knn_eval(o, *xdino::local_communicator(), torch::kCPU),
               xdino::UsageError);  // k = 20 > 12 train images
  o.nb_knn = {1, 3, 10};
  const KnnEvalResult r = run_knn_eval(o, *xdino::local_communicator(), torch::kCPU);
  const Json j = read_json(out / "knn.json");
  EXPECT_EQ(keys(j), (std::vector<std::string>{
                         "protocol", "arch", "patch_size", "image_size", "pretrained_weights",
                         "checkpoint_key", "weights", "temperature", "num_train", "num_test",
                         "num_classes", "feature_dim", "backend", "features", "results",
                         "reported", "seconds"}));
  EXPECT_EQ(j.at("weights").as_string(), "random");
  EXPECT_EQ(j.at("num_train").as_int(), 12);
  EXPECT_EQ(j.at("num_classes").as_int(), 2);
  EXPECT_EQ(j.at("results").items().size(), 3u);
  EXPECT_EQ(j.at("reported").at("k").as_int(), 10);  // nearest to 20 among 1, 3, 10
  // The dumps hold what was classified: the same result from --load_features.
  KnnEvalOptions again = o;
  again.dump_features.clear();
  again.load_features = (root / "dump").string();
  again.output_dir = (root / "out2").string();
  again.model = BackboneSpec{};  // the model comes from the files' attributes
  run_knn_eval(again, *xdino::local_communicator(), torch::kCPU);
  const Json j2 = read_json(root / "out2/knn.json");
  EXPECT_EQ(j2.at("results").dump(), j.at("results").dump());
  EXPECT_EQ(j2.at("arch").as_string(), "xcit_nano_12_p16");
  EXPECT_EQ(j2.at("image_size").as_int(), 32);
  fs::remove_all(root);
}

TEST(EvalPipeline, LinearOfficialProtocolLogsCheckpointsAndResumes) {
  const fs::path root = make_image_folder("linear", 4, 2);
  LinearEvalOptions o;
  o.model = tiny_xcit();
  o.data_path = root.string();
  o.epochs = 2;
  o.batch_size_per_gpu = 3;
  o.num_workers = 2;
  o.num_labels = 2;
  o.lr = 0.1;
  o.output_dir = (root / "out").string();
  torch::manual_seed(0);
  run_linear_eval(o, *xdino::local_communicator(), torch::kCPU);
  const auto lines = read_lines(root / "out/log.txt");
  ASSERT_EQ(lines.size(), 2u);
  // Official keys in the official order; no test_acc5 with fewer than 5 labels.
  EXPECT_EQ(keys(lines[0]), (std::vector<std::string>{"train_lr", "train_loss", "epoch",
                                                      "test_loss", "test_acc1"}));
  EXPECT_NEAR(lines[0].at("train_lr").as_number(), 0.1 * 3 / 256, 1e-15);
  EXPECT_NEAR(lines[1].at("train_lr").as_number(), 0.1 * 3 / 256 * 0.5, 1e-15);  // cos(pi/2)
  const Json lj = read_json(root / "out/linear.json");
  EXPECT_EQ(lj.at("protocol").as_string(), kOfficialLinearProtocol);
  EXPECT_EQ(lj.at("feature_dim").as_int(), 128);
  EXPECT_EQ(lj.at("best").at("acc5").is_null(), true);

  if (fs::exists("/usr/bin/python3")) {
    const auto r = xdino::testing::run_process(
        {"/usr/bin/python3", "-c",
         "import sys, torch; c = torch.load(sys.argv[1]);"
         "print(sorted(c), c['epoch'], list(c['state_dict']), "
         "tuple(c['state_dict']['module.linear.weight'].shape), "
         "sorted(c['optimizer']['state'][0]), c['scheduler']['last_epoch'],"
         "c['optimizer']['param_groups'][0]['momentum'])",
         (root / "out/checkpoint.pth").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "['best_acc', 'best_acc5', 'best_epoch', 'epoch', 'optimizer', 'protocol', "
              "'scheduler', 'state_dict'] 2 ['module.linear.weight', 'module.linear.bias'] "
              "(2, 128) ['momentum_buffer'] 2 0.9\n");
  }

  // A longer run in the same folder resumes at epoch 2 (one more log line, not three).
  o.epochs = 3;
  run_linear_eval(o, *xdino::local_communicator(), torch::kCPU);
  const auto more = read_lines(root / "out/log.txt");
  ASSERT_EQ(more.size(), 3u);
  EXPECT_EQ(more[2].at("epoch").as_int(), 2);

  // --evaluate reproduces the last epoch's validation accuracy from the checkpoint.
  LinearEvalOptions ev = o;
  ev.evaluate = true;
  const LinearEvalResult e = run_linear_eval(ev, *xdino::local_communicator(), torch::kCPU);
  EXPECT_NEAR(e.outcome.best_acc, more[2].at("test_acc1").as_number(), 1e-9);
  fs::remove_all(root);
}

TEST(EvalPipeline, CachedLinearModeIsLabelled) {
  const fs::path root = make_image_folder("linear_cached", 4, 2);
  LinearEvalOptions o;
  o.model = tiny_xcit();
  o.data_path = root.string();
  o.epochs = 3;
  o.batch_size_per_gpu = 4;
  o.num_workers = 2;
  o.num_labels = 2;
  o.cached_features = true;
  o.dump_features = (root / "feats").string();
  o.output_dir = (root / "out").string();
  torch::manual_seed(0);
  run_linear_eval(o, *xdino::local_communicator(), torch::kCPU);
  const Json lj = read_json(root / "out/linear.json");
  EXPECT_EQ(lj.at("protocol").as_string(), "cached-features (fast, not the official protocol)");
  const FeatureSet dumped = read_features(root / "feats/trainfeat.h5");
  EXPECT_FALSE(dumped.attributes.normalized);
  EXPECT_EQ(dumped.features.size(0), 8);
  // Training again from the dumped features gives the same run (same seed, same data).
  LinearEvalOptions again = o;
  again.dump_features.clear();
  again.load_features = (root / "feats").string();
  again.output_dir = (root / "out2").string();
  torch::manual_seed(0);
  run_linear_eval(again, *xdino::local_communicator(), torch::kCPU);
  EXPECT_EQ(read_json(root / "out2/linear.json").at("best").dump(), lj.at("best").dump());
  fs::remove_all(root);
}
