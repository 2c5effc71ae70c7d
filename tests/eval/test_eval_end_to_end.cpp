// Evaluation end to end on a tiny generated ImageFolder with a tiny random XCiT: extraction
// against a per-image forward written here, k-NN and linear runs and their files (log.txt
// keys, checkpoint.pth read by Python's torch.load, resume, --evaluate, cached mode).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "augment/data/decode.h"
#include "augment/data/open_dataset.h"
#include "augment/eval_transforms.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "core/pth.h"
#include "eval/extract.h"
#include "eval/knn_eval.h"
#include "models/weights.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_dir;
using namespace xdino::eval;
using xdino::Json;

namespace {

// Two classes told apart by colour; 40x48 images so the eval resize and crop both act.
fs::path make_image_folder(const std::string& name, int per_class_train, int per_class_val) {
  const fs::path root = fresh_dir(name);
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
  return s;
}

// 32-pixel evaluation crops, `batch` images per batch.
ImageInput at_32(int64_t batch = 4, int64_t workers = 2) { return ImageInput(batch, workers, 32); }

Json read_json_file(const fs::path& p) {
  return xdino::parse_json(xdino::read_file(p), p.string());
}

std::vector<std::string> keys(const Json& j) {
  std::vector<std::string> k;
  for (const auto& [name, v] : j.items()) k.push_back(name);
  return k;
}

}  // namespace

TEST(EvalEndToEnd, ExtractionEqualsPerImageForward) {
  const fs::path root = make_image_folder("extract", 3, 4);
  torch::manual_seed(0);
  const auto model = load_frozen_backbone(tiny_xcit(), at_32(), torch::kCPU).model;
  const auto data = xdino::augment::open_dataset(root.string(), "val");
  ExtractOptions o;
  o.input = at_32(3);  // batches that do not divide the 8 images
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

// dino features --patch_tokens: /patch_tokens row i holds the patch tokens of /features row
// i's image, as the model gives them for that image alone, after an unreadable image (no row)
// has been left out of both; the CLS features are those of a run without patch tokens.
TEST(EvalEndToEnd, PatchTokensStreamToTheFileRowForRow) {
  const fs::path root = make_image_folder("patch_tokens", 1, 4);
  xdino::write_file_atomically(root / "val" / "red" / "broken.png", "not a png");
  FeaturesOptions o;
  o.model = tiny_xcit();
  o.data_path = root.string();
  o.split = "val";
  o.input = at_32(3, 1);
  o.output = (root / "plain.h5").string();
  run_features(o, *xdino::local_communicator(), torch::kCPU);
  o.patch_tokens = true;
  o.output = (root / "tokens.h5").string();
  run_features(o, *xdino::local_communicator(), torch::kCPU);

  const FeatureSet plain = read_features(root / "plain.h5");
  const FeatureSet with_tokens = read_features(root / "tokens.h5");
  EXPECT_THROW(read_patch_tokens(root / "plain.h5"), xdino::Error);
  const torch::Tensor tokens = read_patch_tokens(root / "tokens.h5");
  ASSERT_EQ(with_tokens.features.size(0), 8) << "9 images, one unreadable";
  ASSERT_EQ(tokens.sizes(), (std::vector<int64_t>{8, 4, 128})) << "(32 / 16)^2 tokens of 128";
  EXPECT_TRUE(torch::allclose(plain.features, with_tokens.features, 1e-6, 1e-6));
  EXPECT_EQ(plain.paths, with_tokens.paths);

  const auto model = load_frozen_backbone(tiny_xcit(), at_32(), torch::kCPU).model;
  xdino::augment::EvalTransformOptions eo;
  eo.crop_size = 32;
  const xdino::augment::EvalTransform transform(eo);
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < 8; ++i) {
    const torch::Tensor x =
        transform(xdino::augment::read_image(with_tokens.paths[i])).unsqueeze(0);
    EXPECT_TRUE(torch::allclose(tokens[i], model->patch_tokens(x).squeeze(0), 1e-4, 1e-5))
        << with_tokens.paths[i];
  }
  fs::remove_all(root);
}

TEST(EvalEndToEnd, KnnRunWritesResultsAndReloadsDumps) {
  const fs::path root = make_image_folder("knn", 6, 3);
  const fs::path out = root / "out";
  KnnEvalOptions o;
  o.model = tiny_xcit();
  o.data_path = root.string();
  o.nb_knn = {1, 3, 20};
  o.input = at_32();
  o.output_dir = out.string();
  o.dump_features = (root / "dump").string();
  torch::manual_seed(0);
  EXPECT_THROW(run_knn_eval(o, *xdino::local_communicator(), torch::kCPU),
               xdino::UsageError);  // k = 20 > 12 train images
  o.nb_knn = {1, 3, 10};
  const KnnEvalResult r = run_knn_eval(o, *xdino::local_communicator(), torch::kCPU);
  const Json j = read_json_file(out / "knn.json");
  EXPECT_EQ(keys(j), (std::vector<std::string>{"protocol", "arch", "patch_size", "image_size",
                                               "pretrained_weights", "checkpoint_key", "weights",
                                               "temperature", "num_train", "num_test",
                                               "num_classes", "feature_dim", "backend", "features",
                                               "results", "reported", "seconds", "batch_norm"}));
  EXPECT_EQ(j.at("weights").get<std::string>(), "random");
  // Random weights say which BatchNorm statistics they were measured with (XCiT's patch
  // embedding has BatchNorms; no --recalibrate_bn here).
  EXPECT_EQ(j.at("batch_norm").get<std::string>(), "initial");
  EXPECT_EQ(j.at("num_train").get<int64_t>(), 12);
  EXPECT_EQ(j.at("num_classes").get<int64_t>(), 2);
  EXPECT_EQ(j.at("results").size(), 3u);
  EXPECT_EQ(j.at("reported").at("k").get<int64_t>(), 10);  // nearest to 20 among 1, 3, 10
  // The dumps hold what was classified: the same result from --load_features.
  KnnEvalOptions again = o;
  again.dump_features.clear();
  again.load_features = (root / "dump").string();
  again.output_dir = (root / "out2").string();
  again.model = BackboneSpec{};  // the model comes from the files' attributes
  again.input = ImageInput{};
  run_knn_eval(again, *xdino::local_communicator(), torch::kCPU);
  const Json j2 = read_json_file(root / "out2/knn.json");
  EXPECT_EQ(j2.at("results"), j.at("results"));
  EXPECT_EQ(j2.at("arch").get<std::string>(), "xcit_nano_12_p16");
  EXPECT_EQ(j2.at("image_size").get<int64_t>(), 32);
  fs::remove_all(root);
}

TEST(EvalEndToEnd, LoadsDinoCheckpointsLikeTheOfficialLoader) {
  const fs::path dir = fresh_dir("dino_ckpt");
  torch::manual_seed(5);
  auto source = xdino::models::create_backbone("xcit_nano_12_p16",
                                               eval_backbone_options("xcit_nano_12_p16", 16, 32));
  source->eval();
  // A DINO training checkpoint: teacher without DDP prefix, student with it, heads included.
  auto sub = [&](const std::string& prefix) {
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    for (const auto& item : xdino::models::state_dict(*source))
      d.insert(prefix + item.key(), item.value().clone());
    d.insert(prefix.substr(0, prefix.size() - 9) + "head.mlp.0.weight", torch::zeros({4, 128}));
    return d;
  };
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("teacher", sub("backbone."));
  ckpt.insert("student", sub("module.backbone."));
  ckpt.insert("epoch", int64_t{3});
  xdino::save_pth(dir / "checkpoint.pth", ckpt);

  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = source->forward(x);
  for (const char* key : {"teacher", "student"}) {
    torch::manual_seed(99);  // a different random init, overwritten by the load
    BackboneSpec spec = tiny_xcit();
    spec.pretrained_weights = (dir / "checkpoint.pth").string();
    spec.checkpoint_key = key;
    const auto model = load_frozen_backbone(spec, at_32(), torch::kCPU).model;
    EXPECT_TRUE(torch::allclose(model->forward(x), expected, 1e-5, 1e-6)) << key;
    EXPECT_FALSE(model->is_training());
    for (const auto& p : model->parameters()) EXPECT_FALSE(p.requires_grad());
  }
  BackboneSpec missing = tiny_xcit();
  missing.pretrained_weights = (dir / "nope.pth").string();
  EXPECT_THROW(load_frozen_backbone(missing, at_32(), torch::kCPU), xdino::UsageError);
  fs::remove_all(dir);
}

TEST(EvalEndToEnd, LoadsAViTTrainedAtAnotherCropSize) {
  // `dino train --global_crops_size 32` builds its ViT with a 2 x 2 (+1) position table, the
  // official checkpoints have 14 x 14 (+1): both must evaluate, at any input size.
  const fs::path dir = fresh_dir("vit_small_crops");
  torch::manual_seed(7);
  xdino::models::BackboneOptions trained;
  trained.patch_size = 16;
  trained.img_size = 32;
  auto source = xdino::models::create_backbone("vit_tiny", trained);
  source->eval();
  c10::impl::GenericDict teacher(c10::StringType::get(), c10::AnyType::get());
  for (const auto& item : xdino::models::state_dict(*source))
    teacher.insert("backbone." + item.key(), item.value().clone());
  c10::impl::GenericDict ckpt(c10::StringType::get(), c10::AnyType::get());
  ckpt.insert("teacher", teacher);
  xdino::save_pth(dir / "checkpoint.pth", ckpt);

  const xdino::models::PretrainedWeights w =
      xdino::models::read_pretrained(dir / "checkpoint.pth", "teacher");
  EXPECT_EQ(xdino::models::position_table_image_size(w, 16, 224), 32);
  EXPECT_EQ(xdino::models::find_weight(w, "pos_embed").sizes(), (std::vector<int64_t>{1, 5, 192}));
  BackboneSpec spec;
  spec.arch = "vit_tiny";
  spec.patch_size = 16;
  spec.pretrained_weights = (dir / "checkpoint.pth").string();
  const auto model = load_frozen_backbone(spec, ImageInput(), torch::kCPU).model;
  torch::NoGradGuard no_grad;
  for (const int64_t side : {32, 64}) {  // the training size and a larger one (interpolated)
    const torch::Tensor x = torch::randn({2, 3, side, side});
    EXPECT_TRUE(torch::allclose(model->forward(x), source->forward(x), 1e-5, 1e-6)) << side;
  }
  // An official-size table keeps 224; a model without one (XCiT) keeps what it was given.
  auto official =
      xdino::models::create_backbone("vit_tiny", eval_backbone_options("vit_tiny", 16, 224));
  xdino::save_pth(dir / "official.pth",
                  xdino::models::to_ivalue(xdino::models::state_dict(*official)));
  EXPECT_EQ(xdino::models::position_table_image_size(
                xdino::models::read_pretrained(dir / "official.pth", ""), 16, 0),
            224);
  auto xcit = xdino::models::create_backbone("xcit_nano_12_p16",
                                             eval_backbone_options("xcit_nano_12_p16", 16, 224));
  xdino::save_pth(dir / "xcit.pth", xdino::models::to_ivalue(xdino::models::state_dict(*xcit)));
  EXPECT_EQ(xdino::models::position_table_image_size(
                xdino::models::read_pretrained(dir / "xcit.pth", ""), 16, 96),
            96);
  fs::remove_all(dir);
}
