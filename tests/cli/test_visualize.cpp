// Visualisations: map shapes for p16/p8 and odd sizes, attention rows, |Q^|/|K^| against an
// independent computation from the block's q and k, the files a user opens, and the official
// README's video_generation.py command lines replayed as typed.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <set>

#include "augment/data/decode.h"
#include "core/atomic_file.h"
#include "core/pth.h"
#include "eval/visualize.h"
#include "models/registry.h"
#include "models/weights.h"
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
  for (const Case& c :
       {Case{"xcit_nano_12_p16", {0}, 3, 4}, Case{"xcit_nano_12_p8", {0}, 6, 8},
        Case{"xcit_nano_12_p8", {50, 70}, 6, 8},
        // One size is the shorter side, as torchvision's Resize: 48 x 64 -> 37 x 49.
        Case{"xcit_nano_12_p16", {37}, 2, 3}, Case{"vit_tiny", {40, 56}, 2, 3}}) {
    o.model.arch = c.arch;
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
    if (xcit) {
      EXPECT_EQ(maps.k_raw.sizes(), maps.attention.sizes());
    }
  }
}

TEST(Visualize, AttentionIsTheClsRowWithoutItsOwnEntry) {
  eval::VisualizeOptions o;
  o.model.arch = "xcit_nano_12_p8";
  o.image_size = {0};
  auto m = model(o.model.arch);
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
  o.model.arch = "xcit_nano_12_p8";
  o.image_size = {0};
  for (int64_t block : {0, 5, -1}) {
    o.qk_block = block;
    auto m = model(o.model.arch);
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
  o.model.arch = "xcit_nano_12_p8";
  o.image_size = {50, 70};  // -> 48 x 64 after cropping to multiples of 8
  o.threshold = 0.5;
  auto m = model(o.model.arch);
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
  // video_generation.py's layout: <out>/attention/attn-<frame>, then <out>/video.mp4.
  EXPECT_TRUE(fs::exists(dir / "out" / "attention" / "attn-f000.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "attention" / "attn-f001.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "video.mp4"));
  EXPECT_TRUE(fs::exists(dir / "out" / "overview.png"));
  EXPECT_NE(r.err.find("RANDOMLY INITIALISED"), std::string::npos)
      << "random weights must be announced (eval/frozen_backbone.h)";
  const auto missing = xdino::testing::run_process(
      {xdino::testing::dino_binary(), "visualize", "--arch", "xcit_nano_12_p16"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--image_path"), std::string::npos) << missing.err;
  fs::remove_all(dir);
}

// Photos of one file name from several folders (a dataset's class folders) each keep their own
// pictures: they wrote over each other in output_dir/<stem> before.
TEST(Visualize, ImagesOfOneNameInTwoFoldersKeepTheirOwnPictures) {
  const fs::path dir = fresh_dir("visualize_same_names");
  const std::vector<fs::path> inputs = {dir / "in" / "cat" / "00000.png",
                                        dir / "in" / "dog" / "00000.png", dir / "in" / "other.png"};
  const char* sources[] = {"augment/photo_a.png", "augment/photo_b.png", "augment/photo_a.png"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    fs::create_directories(inputs[i].parent_path());
    fs::copy_file(fixture(sources[i]), inputs[i]);
  }
  eval::VisualizeOptions o;
  o.model.arch = "xcit_nano_12_p16";
  o.image_size = {0};
  for (const fs::path& p : inputs) o.image_path.push_back(p.string());
  o.output_dir = (dir / "out").string();
  EXPECT_EQ(eval::visualize(o), 3);
  for (const char* name : {"cat-00000", "dog-00000", "other"})
    EXPECT_TRUE(fs::exists(dir / "out" / name / "overview.png")) << name;
  EXPECT_NE(xdino::read_file(dir / "out" / "cat-00000" / "img.png"),
            xdino::read_file(dir / "out" / "dog-00000" / "img.png"));
  EXPECT_FALSE(fs::exists(dir / "out" / "00000"));
  fs::remove_all(dir);
}

// Every folder named after an input stays inside --output_dir, one per input: the stems of
// "...png" and "..png" are ".." and "." (the parent and the folder itself, before), of ".png"
// a hidden name, of "-x.png" one a tool reads as a flag; two inputs named "00000.png" in
// folders "." and ".." make "..-00000"-like names too. Nothing is written beside out/.
TEST(Visualize, NamesFromInputsStayInsideTheOutputFolder) {
  const fs::path dir = fresh_dir("visualize_odd_names");
  const fs::path in = dir / "in";
  const std::vector<fs::path> inputs = {
      in / "...png", in / "..png",           in / ".png",
      in / "-x.png", in / "a" / "00000.png", in / "a" / ".." / "00000.png"};
  fs::create_directories(in / "a");
  for (const fs::path& p : inputs)
    if (!fs::exists(p)) fs::copy_file(fixture("augment/photo_a.png"), p);
  eval::VisualizeOptions o;
  o.model.arch = "xcit_nano_12_p16";
  o.image_size = {0};
  for (const fs::path& p : inputs) o.image_path.push_back(p.string());
  o.output_dir = (dir / "out").string();
  EXPECT_EQ(eval::visualize(o), static_cast<int64_t>(inputs.size()));
  std::set<std::string> folders;
  for (const auto& e : fs::directory_iterator(dir / "out")) {
    ASSERT_TRUE(e.is_directory()) << e.path() << ": a file beside the inputs' folders";
    const std::string name = e.path().filename().string();
    EXPECT_NE(name[0], '.') << name;
    EXPECT_NE(name[0], '-') << name;
    EXPECT_TRUE(fs::exists(e.path() / "overview.png")) << name;
    folders.insert(name);
  }
  EXPECT_EQ(folders.size(), inputs.size()) << "one folder per input";
  std::set<std::string> beside;
  for (const auto& e : fs::directory_iterator(dir)) beside.insert(e.path().filename().string());
  EXPECT_EQ(beside, (std::set<std::string>{"in", "out"}));
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

TEST(Visualize, OneSizeIsTheShorterSideOfLandscapeAndPortraitImages) {
  eval::VisualizeOptions o;
  o.image_size = {40};  // 64 x 48 -> 53 x 40 -> cropped to 48 x 40 at patch 8, and transposed
  auto m = model("xcit_nano_12_p8");
  const augment::Image landscape = photo();
  augment::Image portrait;
  cv::transpose(landscape, portrait);
  EXPECT_EQ(eval::compute_maps(*m, landscape, o, "l").image.size(), cv::Size(48, 40));
  EXPECT_EQ(eval::compute_maps(*m, portrait, o, "p").image.size(), cv::Size(40, 48));
}

namespace {

int frames_in(const fs::path& video) {
  cv::VideoCapture capture(video.string());
  int n = 0;
  for (cv::Mat frame; capture.read(frame) && !frame.empty();) ++n;
  return n;
}

}  // namespace

// The three command lines of the official README's "Self-attention video generation", run by a
// shell exactly as printed there (line continuations included), with `python
// video_generation.py` replaced by `dino visualize`: a 3-frame video in, random ViT-S/8 weights
// under the official file name.
TEST(Visualize, TheOfficialReadmeVideoCommandLinesRunAsTyped) {
  const fs::path dir = fresh_dir("visualize_readme_video");
  fs::create_directories(dir / "input");
  {
    cv::VideoWriter writer((dir / "input" / "video.mp4").string(),
                           cv::VideoWriter::fourcc('m', 'p', '4', 'v'), 25.0, cv::Size(40, 32));
    ASSERT_TRUE(writer.isOpened());
    for (int t = 0; t < 3; ++t) {
      cv::Mat frame(32, 40, CV_8UC3, cv::Scalar(40, 80, 120));
      frame(cv::Rect(4 + 8 * t, 8, 12, 12)).setTo(cv::Scalar(255, 255, 255));
      writer.write(frame);
    }
  }
  {
    torch::manual_seed(0);
    models::BackboneOptions vit_s8;
    vit_s8.patch_size = 8;
    save_pth(dir / "dino_deitsmall8_pretrain.pth",
             models::to_ivalue(models::state_dict(*models::create_backbone("vit_small", vit_s8))));
  }
  const auto shell = [&](const std::string& lines) {
    return xdino::testing::run_process(
        {"/bin/sh", "-c", "cd '" + dir.string() + "' && " + xdino::testing::dino_binary() + lines});
  };
  const fs::path out = dir / "output";

  // Each command as printed there, then what it leaves in output/.
  const std::vector<std::pair<std::string, std::function<void()>>> readme = {
      {" visualize  --pretrained_weights dino_deitsmall8_pretrain.pth \\\n"
       "    --input_path input/video.mp4 \\\n"
       "    --output_path output/ \\\n"
       "    --fps 25\n",
       [&] {
         for (const char* f : {"frames/frame-0000.jpg", "frames/frame-0002.jpg",
                               "attention/attn-frame-0000.jpg", "attention/attn-frame-0002.jpg"})
           EXPECT_TRUE(fs::exists(out / f)) << f;
         EXPECT_EQ(cv::imread((out / "attention" / "attn-frame-0000.jpg").string()).size(),
                   cv::Size(40, 32));
         EXPECT_EQ(frames_in(out / "video.mp4"), 3);
       }},
      {" visualize  --pretrained_weights dino_deitsmall8_pretrain.pth \\\n"
       "    --input_path output/frames/ \\\n"
       "    --output_path output/ \\\n"
       "    --resize 256 \\\n",
       [&] {  // --resize 256: the shorter side, 40 x 32 -> 320 x 256
         EXPECT_EQ(cv::imread((out / "attention" / "attn-frame-0001.jpg").string()).size(),
                   cv::Size(320, 256));
         EXPECT_EQ(frames_in(out / "video.mp4"), 3);
       }},
      {" visualize --input_path output/attention \\\n"
       "    --output_path output/ \\\n"
       "    --video_only \\\n"
       "    --video_format avi\n",
       [&] { EXPECT_EQ(frames_in(out / "video.avi"), 3); }}};
  for (const auto& [lines, check] : readme) {
    const auto r = shell(lines);
    ASSERT_EQ(r.exit_code, 0) << lines << r.err;
    if (lines.find("pretrained_weights") != std::string::npos) {
      EXPECT_NE(r.out.find("tensors loaded"), std::string::npos) << r.out;
    }
    check();
  }

  // Each script's flags go with its own input, as each script refuses the other's.
  const auto r = shell(" visualize --input_path output/frames --output_dir elsewhere");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--output_dir goes with --image_path"), std::string::npos) << r.err;
  fs::remove_all(dir);
}
