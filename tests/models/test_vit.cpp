// DINO's ViT and the pixels baseline: parameter counts and FLOPs against closed forms and the
// published figures, key order, a tiny model against a naive float64 forward, position
// interpolation against PyTorch (golden file), and eval_linear.py's feature rule.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/compat.h"
#include "models/pixels.h"
#include "models/registry.h"
#include "models/vit.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/grad_check.h"
#include "tests/support/naive_nn.h"
#include "tests/support/naive_xcit.h"
#include "tests/support/process.h"

namespace naive = xdino::testing::naive;
using namespace xdino::models;
using torch::Tensor;

namespace {

std::shared_ptr<VisionTransformer> tiny_vit(torch::Dtype dtype, uint64_t seed) {
  ViTConfig c;
  c.name = "vit_test_tiny";
  c.patch_size = 4;
  c.embed_dim = 12;
  c.depth = 3;
  c.num_heads = 3;
  c.img_size = 16;
  auto m = std::make_shared<VisionTransformer>(c);
  m->to(dtype);
  naive::randomize(*m, seed);
  m->eval();
  return m;
}

// Tokens after each block, naive float64 (input at the native grid: no interpolation).
std::vector<Tensor> naive_vit_blocks(const Tensor& img, const naive::Params& p, int64_t heads,
                                     int64_t depth, int64_t patch, Tensor* last_cls_attention) {
  Tensor x = naive::conv2d(img, p.at("patch_embed.proj.weight"), p.at("patch_embed.proj.bias"),
                           patch, 0, 1);
  const int64_t B = x.size(0), C = x.size(1);
  x = x.flatten(2).transpose(1, 2);
  x = torch::cat({p.at("cls_token").expand({B, 1, C}), x}, 1) + p.at("pos_embed");
  std::vector<Tensor> outs;
  const int64_t T = x.size(1), d = C / heads;
  for (int64_t i = 0; i < depth; ++i) {
    const std::string pre = "blocks." + std::to_string(i) + ".";
    const Tensor u =
        naive::layer_norm(x, p.at(pre + "norm1.weight"), p.at(pre + "norm1.bias"), 1e-6);
    const Tensor qkv = naive::linear(u, p.at(pre + "attn.qkv.weight"), p.at(pre + "attn.qkv.bias"));
    Tensor out = torch::zeros({B, T, C}, torch::kDouble);
    if (last_cls_attention) *last_cls_attention = torch::zeros({B, heads, T}, torch::kDouble);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h) {
        const Tensor q = qkv[b].narrow(1, h * d, d), k = qkv[b].narrow(1, C + h * d, d),
                     v = qkv[b].narrow(1, 2 * C + h * d, d);
        const Tensor a = naive::softmax(torch::matmul(q, k.t()) / std::sqrt(double(d)));
        out[b].narrow(1, h * d, d).copy_(torch::matmul(a, v));
        if (last_cls_attention) (*last_cls_attention)[b][h].copy_(a[0]);
      }
    x = x + naive::linear(out, p.at(pre + "attn.proj.weight"), p.at(pre + "attn.proj.bias"));
    const Tensor u2 =
        naive::layer_norm(x, p.at(pre + "norm2.weight"), p.at(pre + "norm2.bias"), 1e-6);
    const Tensor hid =
        naive::gelu(naive::linear(u2, p.at(pre + "mlp.fc1.weight"), p.at(pre + "mlp.fc1.bias")));
    x = x + naive::linear(hid, p.at(pre + "mlp.fc2.weight"), p.at(pre + "mlp.fc2.bias"));
    outs.push_back(x);
  }
  return outs;
}

int64_t vit_closed_form_params(int64_t C, int64_t patch, int64_t img = 224) {
  const int64_t n0 = (img / patch) * (img / patch);
  return 3 * patch * patch * C + C + C + (n0 + 1) * C + 12 * (12 * C * C + 13 * C) + 2 * C;
}

}  // namespace

TEST(ViT, ParameterCountsMatchClosedFormAndPublishedSizes) {
  // Published (DINO README / XCiT Table 3): ViT-S 21M / 22M, ViT-B 85M / 87M (with head).
  const std::map<std::string, int64_t> dims = {
      {"vit_tiny", 192}, {"vit_small", 384}, {"vit_base", 768}};
  for (const auto& [name, C] : dims) {
    for (int64_t patch : {16, 8}) {
      BackboneOptions o;
      o.patch_size = patch;
      EXPECT_EQ(create_backbone(name, o)->num_parameters(), vit_closed_form_params(C, patch))
          << name << "/" << patch;
    }
  }
  EXPECT_EQ(vit_closed_form_params(384, 16), 21665664);  // timm vit_small_patch16_224 minus head
  EXPECT_EQ(vit_closed_form_params(768, 16), 85798656);  // timm vit_base_patch16_224 minus head
  EXPECT_NEAR(vit_closed_form_params(384, 16) / 1e6, 21.7, 0.05);
  EXPECT_NEAR(vit_closed_form_params(768, 8) / 1e6, 85.8, 0.05);
}

TEST(ViT, FlopsMatchTheSpec) {
  const std::map<std::pair<std::string, int64_t>, double> spec = {{{"vit_small", 16}, 4.61},
                                                                  {{"vit_small", 8}, 22.44},
                                                                  {{"vit_base", 16}, 17.58},
                                                                  {{"vit_base", 8}, 78.22}};
  for (const auto& [key, gflops] : spec) {
    const ViTConfig c = *find_vit_variant(key.first, key.second);
    EXPECT_NEAR(vit_flops(c, 224, 224) / 1e9, gflops, 0.01 * gflops) << key.first;
    EXPECT_NEAR(vit_flops(c, 224, 224) / 1e9, gflops, 0.006) << key.first;
  }
}

TEST(ViT, KeysInOfficialOrder) {
  auto m = tiny_vit(torch::kFloat, 1);
  std::vector<std::string> keys;
  for (const auto& [k, t] : naive::state_entries(*m)) keys.push_back(k);
  std::vector<std::string> want = {"cls_token", "pos_embed", "patch_embed.proj.weight",
                                   "patch_embed.proj.bias"};
  for (int i = 0; i < 3; ++i)
    for (const char* k : {"norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias",
                          "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
                          "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
      want.push_back("blocks." + std::to_string(i) + "." + k);
  want.push_back("norm.weight");
  want.push_back("norm.bias");
  EXPECT_EQ(keys, want);
  EXPECT_EQ(m->pos_embed.sizes(), (std::vector<int64_t>{1, 17, 12}));
}

TEST(ViT, TinyForwardAndAttentionMatchNaive) {
  for (const auto& [dtype, tol] : {std::pair{torch::kDouble, 1e-6}, {torch::kFloat, 1e-4}}) {
    auto m = tiny_vit(dtype, 2);
    const Tensor img = torch::randn({2, 3, 16, 16}, dtype);
    Tensor want_attn;
    const auto p = naive::params_of(*m);
    const auto outs = naive_vit_blocks(naive::f64(img), p, 3, 3, 4, &want_attn);
    const Tensor want =
        naive::layer_norm(outs.back(), p.at("norm.weight"), p.at("norm.bias"), 1e-6);
    torch::NoGradGuard no_grad;
    EXPECT_LE(naive::max_abs_diff(m->forward(img), want.select(1, 0)), tol);
    EXPECT_LE(naive::max_abs_diff(m->cls_attention(img, -1), want_attn), tol);
    EXPECT_LE(naive::max_abs_diff(m->block_outputs(img, {1})[0], outs[1]), tol);
    EXPECT_LE(naive::max_abs_diff(m->patch_tokens(img), want.narrow(1, 1, 16)), tol);
    const Tensor rows = m->cls_attention(img, 0).sum(-1);
    EXPECT_TRUE(torch::allclose(rows, torch::ones_like(rows), 0, tol));
  }
}

TEST(ViT, PositionInterpolationMatchesDinoInPyTorch) {
  std::ifstream in(xdino::testing::test_data_dir() + "/vit_pos_golden.txt");
  ASSERT_TRUE(in.good());
  Tensor pe = torch::empty({1, 17, 3}, torch::kDouble);
  {
    const Tensor i = torch::arange(17, torch::kDouble).view({1, -1, 1});
    const Tensor c = torch::arange(3, torch::kDouble).view({1, 1, -1});
    pe = torch::sin(0.7 * i + 0.3 * c).to(torch::kFloat);
  }
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.rfind("case", 0) != 0) continue;
    std::istringstream is(line.substr(5));
    int64_t h, w, tokens;
    is >> h >> w >> tokens;
    Tensor want = torch::empty({1, tokens, 3});
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t c = 0; c < 3; ++c) {
        double v;
        in >> v;
        want[0][t][c] = v;
      }
    const Tensor got = interpolate_pos_encoding(pe, h, w, 4);
    ASSERT_EQ(got.sizes(), want.sizes()) << h << "x" << w;
    EXPECT_LE((got - want).abs().max().item<double>(), 1e-6) << h << "x" << w;
    ++cases;
  }
  EXPECT_EQ(cases, 6);
}

TEST(ViT, AnyInputSizeFloorsToWholePatches) {
  auto m = tiny_vit(torch::kFloat, 3);
  torch::NoGradGuard no_grad;
  const Tensor img = torch::randn({1, 3, 23, 13});  // 5 x 3 patches, remainder dropped
  EXPECT_EQ(m->token_grid(23, 13), (std::pair<int64_t, int64_t>{5, 3}));
  EXPECT_EQ(m->patch_tokens(img).sizes(), (std::vector<int64_t>{1, 15, 12}));
  EXPECT_EQ(m->forward(img).sizes(), (std::vector<int64_t>{1, 12}));
}

TEST(ViT, LinearFeaturesFollowEvalLinear) {
  auto m = tiny_vit(torch::kDouble, 4);
  const Tensor img = torch::randn({2, 3, 16, 16}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const auto outs = m->block_outputs(img, {0, 1, 2});
  const auto norm = [&](const Tensor& x) { return m->norm(x); };
  // n = 2: [norm(cls of block 1), norm(cls of block 2)].
  const Tensor two = m->linear_features(img, 2, false);
  EXPECT_TRUE(torch::allclose(
      two, torch::cat({norm(outs[1]).select(1, 0), norm(outs[2]).select(1, 0)}, -1)));
  // avgpool: interleaved [cls_0, avg_0, cls_1, avg_1, ...].
  const Tensor pooled = m->linear_features(img, 1, true);
  ASSERT_EQ(pooled.sizes(), (std::vector<int64_t>{2, 24}));
  const Tensor normed = norm(outs[2]);
  EXPECT_TRUE(torch::allclose(
      pooled.index({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}),
      normed.select(1, 0)));
  EXPECT_TRUE(torch::allclose(
      pooled.index({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)}),
      normed.narrow(1, 1, 16).mean(1)));
  EXPECT_TRUE(torch::allclose(m->linear_features(img, 1, false), m->forward(img)));
  EXPECT_THROW(m->linear_features(img, 2, true), xdino::UsageError);
  EXPECT_THROW(m->qk_norms(img, 0), xdino::UsageError);
}

TEST(ViT, DropPathRampsLinearly) {
  BackboneOptions o;
  o.drop_path_rate = 0.1;
  auto m = std::dynamic_pointer_cast<VisionTransformer>(create_backbone("vit_tiny", o));
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->blocks.front()->drop_path_rate, 0.0);
  EXPECT_NEAR(m->blocks[6]->drop_path_rate, 0.1 * 6 / 11, 1e-12);
  EXPECT_DOUBLE_EQ(m->blocks.back()->drop_path_rate, 0.1);
}

TEST(ViT, Bfloat16AndAutocastRunForwardAndBackward) {
  if (!xdino::testing::cpu_bfloat16_runs())
    return;  // .ci/run's AVX2 emulation: its phase 1 runs it
  auto m = tiny_vit(torch::kFloat, 5);
  const Tensor img = torch::randn({2, 3, 24, 20});  // interpolated position embeddings
  const Tensor want = [&] {
    torch::NoGradGuard no_grad;
    return m->forward(img);
  }();
  const double scale = want.abs().max().item<double>();
  {
    xdino::compat::AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
    const Tensor y = m->forward(img).to(torch::kFloat);
    EXPECT_LE((y - want).abs().max().item<double>(), 0.1 * scale);
    y.pow(2).sum().backward();
  }
  for (const auto& p : m->parameters()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  m->to(torch::kBFloat16);
  const Tensor y = m->forward(img.to(torch::kBFloat16));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_LE((y.to(torch::kFloat) - want).abs().max().item<double>(), 0.1 * scale);
}

TEST(Pixels, ResizedAndFlattenedImage) {
  BackboneOptions o;
  o.img_size = 8;
  auto m = create_backbone("pixels", o);
  EXPECT_EQ(m->num_parameters(), 0);
  EXPECT_EQ(m->embed_dim(), 192);
  const Tensor img = torch::randn({2, 3, 16, 16});
  const Tensor f = m->forward(img);
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{2, 192}));
  // 2x shrink by area averaging: feature (c, r, q) = mean of the 2x2 block.
  const Tensor want = img.view({2, 3, 8, 2, 8, 2}).mean({3, 5}).flatten(1);
  EXPECT_TRUE(torch::allclose(f, want, 1e-6, 1e-6));
  const Tensor same = torch::randn({1, 3, 8, 8});
  EXPECT_TRUE(torch::equal(m->forward(same), same.flatten(1)));
  EXPECT_THROW(m->cls_attention(img, -1), xdino::UsageError);
}

TEST(ViTBlock, GradientsMatchFiniteDifferences) {
  ViTBlock block(ViTBlockOptions(8, 2));
  block->to(torch::kDouble);
  xdino::testing::naive::randomize(*block, 22);
  block->eval();  // drop path off (rate 0 anyway): the loss is deterministic
  const Tensor x = torch::randn({2, 5, 8}, torch::kDouble).requires_grad_(true);
  const Tensor r = torch::randn({2, 5, 8}, torch::kDouble);
  xdino::testing::NamedTensors checked = xdino::testing::trainable_parameters(*block);
  checked.emplace_back("input", x);
  xdino::testing::expect_gradients_match([&] { return (block(x) * r).sum(); }, checked);
}
