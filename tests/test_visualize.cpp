// Visualisations: map shapes for p16/p8 and odd sizes, attention rows, |Q^|/|K^| against an
// independent computation from the block's q and k, and the files a user opens.
#include <gtest/gtest.h>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "augment/data/decode.h"
#include "eval/visualize.h"
#include "models/registry.h"
#include "models/xcit.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using namespace xdino;
using xdino::testing::fixture;
using xdino::testing::fresh_dir;

namespace {

std::shared_ptr<models::Backbone> model(const std::string& arch) {
  torch::manual_seed(3);
  auto m = models::create_backbone(arch);
  m->eval();
  return m;
}

augment::Image photo() { return augment::read_image(fixture("augment/photo_a.png")); }  // 64x48

}  // namespace

TEST(Visualize, ShapesFollowThePatchGridAfterCropping) {
  eval::VisualizeOptions o;
  o.threshold = 0.6;
  struct Case {
    std::string arch;
    std::vector<int64_t> size;
    int64_t gh, gw;
  };
  for (const Case& c : {Case{"xcit_nano_12_p16", {0}, 3, 4}, Case{"xcit_nano_12_p8", {0}, 6, 8},
                        Case{"xcit_nano_12_p8", {50, 70}, 6, 8},
                        Case{"xcit_nano_12_p16", {37}, 2, 2}, Case{"vit_tiny", {40, 56}, 2, 3}}) {
    o.arch = c.arch;
    o.image_size = c.size;
    auto m = model(c.arch);
    const auto maps = eval::compute_maps(*m, photo(), o, "photo");
    const int64_t heads = m->num_heads();
    EXPECT_EQ(maps.attention.sizes(), (std::vector<int64_t>{heads, c.gh, c.gw})) << c.arch;
    EXPECT_EQ(maps.mask.sizes(), maps.attention.sizes());
    EXPECT_EQ(maps.image.rows, c.gh * m->patch_size());
    EXPECT_EQ(maps.image.cols, c.gw * m->patch_size());
    const bool xcit = c.arch.rfind("xcit", 0) == 0;
    EXPECT_EQ(maps.q_hat.defined(), xcit);
    if (xcit) EXPECT_EQ(maps.k_raw.sizes(), maps.attention.sizes());
  }
}

TEST(Visualize, AttentionIsTheClsRowWithoutItsOwnEntry) {
  eval::VisualizeOptions o;
  o.arch = "xcit_nano_12_p8";
  o.image_size = {0};
  auto m = model(o.arch);
  const auto maps = eval::compute_maps(*m, photo(), o, "photo");
  torch::NoGradGuard ng;
  const auto full = m->cls_attention(maps.input.unsqueeze(0), -1)[0];  // (h, N+1)
  EXPECT_TRUE(torch::allclose(full.sum(1), torch::ones({full.size(0)}), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(maps.attention.flatten(1), full.narrow(1, 1, full.size(1) - 1)));
  // Without renormalisation the patch weights sum to 1 minus the CLS->CLS weight.
  EXPECT_TRUE(torch::allclose(maps.attention.flatten(1).sum(1) + full.select(1, 0),
                              torch::ones({full.size(0)}), 1e-5, 1e-5));
}

TEST(Visualize, QKNormsEqualAnIndependentComputation) {
  eval::VisualizeOptions o;
  o.arch = "xcit_nano_12_p8";
  o.image_size = {0};
  for (int64_t block : {0, 5, -1}) {
    o.qk_block = block;
    auto m = model(o.arch);
    const auto maps = eval::compute_maps(*m, photo(), o, "photo");
    auto xcit = std::dynamic_pointer_cast<models::XCiT>(m);
    ASSERT_TRUE(xcit);
    torch::NoGradGuard ng;
    const auto x = maps.input.unsqueeze(0).to(torch::kDouble);
    xcit->to(torch::kDouble);
    const int64_t l = block < 0 ? xcit->num_blocks() + block : block;
    // The block's input: the previous block's output, or patch embedding + position encoding.
    // The block's input: the previous block's output, or patch tokens + position encoding.
    torch::Tensor tokens;
    if (l > 0) {
      tokens = xcit->block_outputs(x, {l - 1})[0];
    } else {
      const auto [patches, grid] = xcit->patch_embed->forward(x);
      tokens = patches + xcit->pos_embeder->forward(grid.first, grid.second);
    }
    auto& blk = xcit->blocks[l];
    const int64_t h = xcit->num_heads(), C = xcit->embed_dim(), d = C / h, N = tokens.size(1);
    const auto qkv = blk->attn->qkv->forward(blk->norm1->forward(tokens)).reshape({1, N, 3, h, d});
    const auto q = qkv.select(2, 0).permute({0, 2, 1, 3});  // (1, h, N, d)
    const auto k = qkv.select(2, 1).permute({0, 2, 1, 3});
    auto per_patch = [&](const torch::Tensor& t) { return t.pow(2).sum(-1).sqrt()[0]; };
    auto hat = [&](const torch::Tensor& t) {
      return t / t.pow(2).sum(2, true).sqrt().clamp_min(1e-12);  // over tokens, per channel
    };
    const auto grid = maps.q_hat.sizes();
    EXPECT_TRUE(
        torch::allclose(maps.q_raw.to(torch::kDouble), per_patch(q).reshape(grid), 1e-4, 1e-4))
        << block;
    EXPECT_TRUE(
        torch::allclose(maps.k_raw.to(torch::kDouble), per_patch(k).reshape(grid), 1e-4, 1e-4))
        << block;
    EXPECT_TRUE(
        torch::allclose(maps.q_hat.to(torch::kDouble), per_patch(hat(q)).reshape(grid), 1e-4, 1e-4))
        << block;
    EXPECT_TRUE(
        torch::allclose(maps.k_hat.to(torch::kDouble), per_patch(hat(k)).reshape(grid), 1e-4, 1e-4))
        << block;
    // sum_n |q^_n|^2 = d per head.
    EXPECT_TRUE(torch::allclose(maps.q_hat.pow(2).flatten(1).sum(1),
                                torch::full({h}, double(d)).to(torch::kFloat), 1e-3, 1e-3));
  }
}

TEST(Visualize, WritesPicturesThatDecodeWithTheImageSize) {
  const fs::path dir = fresh_dir("visualize_files");
  eval::VisualizeOptions o;
  o.arch = "xcit_nano_12_p8";
  o.image_size = {50, 70};  // -> 48 x 64 after cropping to multiples of 8
  o.threshold = 0.5;
  auto m = model(o.arch);
  eval::write_maps(eval::compute_maps(*m, photo(), o, "photo"), dir, o);
  for (const std::string f :
       {"img.png", "attn-head0.png", "attn-head3.png", "attn-overlay-head1.png",
        "mask_th0.5_head2.png", "qnorm-layer11-head0.png", "knorm-raw-layer11-head3.png"}) {
    const cv::Mat png = cv::imread((dir / f).string(), cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(png.empty()) << f;
    EXPECT_EQ(png.rows, 48) << f;
    EXPECT_EQ(png.cols, 64) << f;
  }
  EXPECT_FALSE(cv::imread((dir / "overview.png").string()).empty());
  for (const std::string f : {"attn.npy", "mask.npy", "qnorm.npy", "knorm_raw.npy"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  fs::remove_all(dir);
}

TEST(Visualize, CommandWritesFramesAndExplainsMistakes) {
  const fs::path dir = fresh_dir("visualize_cli");
  fs::create_directories(dir / "frames");
  fs::copy_file(fixture("augment/photo_a.png"), dir / "frames" / "f000.png");
  fs::copy_file(fixture("augment/photo_b.png"), dir / "frames" / "f001.png");
  const auto r = xdino::testing::run_process(
      {xdino::testing::dino_binary(), "visualize", "--arch", "xcit_nano_12_p16", "--image_path",
       (dir / "frames").string(), fixture("augment/photo_a.png").string(), "--image_size", "0",
       "--threshold", "0.6", "--output_dir", (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out" / "attn-f000.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "attn-f001.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "video.mp4"));  // video_generation.py's last step
  EXPECT_TRUE(fs::exists(dir / "out" / "overview.png"));
  EXPECT_NE(r.err.find("random"), std::string::npos) << "random weights must be announced";
  const auto missing = xdino::testing::run_process(
      {xdino::testing::dino_binary(), "visualize", "--arch", "xcit_nano_12_p16"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--image_path"), std::string::npos) << missing.err;
  fs::remove_all(dir);
}

TEST(Visualize, DatasetSamplesGetFoldersNamedBySplitIndexAndClass) {
  const fs::path dir = fresh_dir("visualize_dataset");
  for (const std::string cls : {"cat", "dog"}) {
    fs::create_directories(dir / "data" / "val" / cls);
    fs::copy_file(fixture("augment/photo_a.png"), dir / "data" / "val" / cls / "x.png");
  }
  const auto run = [&](const std::string& index) {
    return xdino::testing::run_process({xdino::testing::dino_binary(), "visualize", "--arch",
                                        "xcit_nano_12_p8", "--data_path", (dir / "data").string(),
                                        "--sample_indices", index, "--image_size", "32",
                                        "--output_dir", (dir / "out").string()});
  };
  const auto r = run("1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const cv::Mat overview = cv::imread((dir / "out" / "val_00001_dog" / "overview.png").string());
  EXPECT_FALSE(overview.empty());
  EXPECT_EQ(cv::imread((dir / "out" / "val_00001_dog" / "attn-head0.png").string()).rows, 32);
  EXPECT_FALSE(fs::exists(dir / "out" / "val_00000_cat"));
  const auto outside = run("2");
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.err.find("--sample_indices 2"), std::string::npos) << outside.err;
  fs::remove_all(dir);
}
