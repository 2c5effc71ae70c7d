// The XCiT model: a tiny model against a naive float64 composition of the reference layers,
// shapes for any input size, the official state_dict keys and order
// (tests/data/xcit_small_12_p16_keys.txt), parameter counts, FLOPs and the introspection API.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/compat.h"
#include "models/batch_norm.h"
#include "models/init.h"
#include "models/registry.h"
#include "models/xcit.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/naive_nn.h"
#include "tests/support/naive_xcit.h"
#include "tests/support/process.h"

namespace naive = xdino::testing::naive;
using namespace xdino::models;
using torch::Tensor;

namespace {

XCiTConfig tiny_xcit_config(int64_t patch, bool tokens_norm) {
  XCiTConfig c;
  c.name = "xcit_test_tiny";
  c.patch_size = patch;
  c.embed_dim = 16;
  c.depth = 2;
  c.num_heads = 4;
  c.tokens_norm = tokens_norm;
  return c;
}

std::shared_ptr<XCiT> tiny_model(int64_t patch, bool tokens_norm, torch::Dtype dtype,
                                 uint64_t seed) {
  auto m = std::make_shared<XCiT>(tiny_xcit_config(patch, tokens_norm));
  m->to(dtype);
  naive::randomize(*m, seed);
  m->eval();
  return m;
}

struct KeyShape {
  std::string key;
  std::vector<int64_t> shape;
};

std::vector<KeyShape> spec_keys() {
  std::ifstream in(xdino::testing::test_data_dir() + "/xcit_small_12_p16_keys.txt");
  EXPECT_TRUE(in.good());
  std::vector<KeyShape> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    KeyShape ks{line.substr(0, space), {}};
    std::string dims = line.substr(space + 2, line.size() - space - 3);  // inside [ ]
    std::replace(dims.begin(), dims.end(), ',', ' ');
    std::istringstream is(dims);
    for (int64_t v; is >> v;) ks.shape.push_back(v);
    out.push_back(ks);
  }
  return out;
}

std::vector<KeyShape> model_keys(const torch::nn::Module& m) {
  std::vector<KeyShape> out;
  for (const auto& [k, t] : naive::state_entries(m)) out.push_back({k, t.sizes().vec()});
  return out;
}

// Parameter count from the layer definitions of the XCiT family (closed form, num_classes 0).
int64_t xcit_closed_form_params(int64_t C, int64_t depth, int64_t heads, int64_t patch) {
  int64_t n = C;  // cls_token
  int64_t in = 3, out = C / (patch / 2);
  for (; out <= C; in = out, out *= 2) n += out * in * 9 + 2 * out;  // conv + BN affine
  n += 64 * C + C;                                                   // pos_embeder
  const int64_t xca_block = 3 * C + 3 * 2 * C + heads + (3 * C * C + 3 * C) + (C * C + C) +
                            (4 * C * C + 4 * C) + (4 * C * C + C) + (9 * C + C) * 2 + 2 * C;
  const int64_t ca_block =
      2 * C + 2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C);
  return n + depth * xca_block + 2 * ca_block + 2 * C;
}

}  // namespace

TEST(XCiTModel, TinyForwardMatchesNaiveComposition) {
  for (int64_t patch : {16, 8, 4}) {
    for (bool tokens_norm : {true, false}) {
      for (const auto& [dtype, tol] : {std::pair{torch::kDouble, 1e-6}, {torch::kFloat, 1e-4}}) {
        auto m = tiny_model(patch, tokens_norm, dtype, 20);
        const Tensor img = torch::randn({2, 3, 45, 30}, dtype);  // 3x2 (p16) / 6x4 (p8) / 12x8 (p4)
        const Tensor want = naive::xcit(img, naive::params_of(*m), patch, 2, 4, tokens_norm);
        torch::NoGradGuard no_grad;
        const Tensor got = m->forward(img);
        const double scale = std::max(1.0, want.abs().max().item<double>());
        EXPECT_LE(naive::max_abs_diff(got, want), tol * scale)
            << "p" << patch << " tokens_norm " << tokens_norm << " " << dtype;
      }
    }
  }
}

TEST(XCiTModel, OutputShapesForAnyInputSize) {
  for (const char* arch : {"xcit_nano_12_p16", "xcit_nano_12_p8"}) {
    auto m = create_backbone(arch);
    m->eval();
    torch::NoGradGuard no_grad;
    for (auto [h, w] : {std::pair<int64_t, int64_t>{224, 224}, {96, 96}, {100, 160}}) {
      const Tensor img = torch::randn({1, 3, h, w});
      const auto [rows, cols] = m->token_grid(h, w);
      const int64_t p = m->patch_size();
      EXPECT_EQ(rows, (h + p - 1) / p) << arch << " " << h;
      EXPECT_EQ(cols, (w + p - 1) / p) << arch << " " << w;
      EXPECT_EQ(m->forward(img).sizes(), (std::vector<int64_t>{1, 128}));
      EXPECT_EQ(m->patch_tokens(img).sizes(), (std::vector<int64_t>{1, rows * cols, 128}));
      EXPECT_EQ(m->cls_attention(img).sizes(), (std::vector<int64_t>{1, 4, rows * cols + 1}));
    }
  }
}

TEST(XCiTModel, StateDictKeysAndOrderAreTheOfficialOnes) {
  const auto want = spec_keys();
  ASSERT_EQ(want.size(), 381u);
  auto m = create_backbone("xcit_small_12_p16");
  const auto got = model_keys(*m);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].key, want[i].key) << "entry " << i;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].key;
  }
  EXPECT_EQ(m->num_parameters(), 25868304);
}

TEST(XCiTModel, PatchEightDropsTheFourthStage) {
  std::vector<KeyShape> want;
  for (KeyShape ks : spec_keys()) {
    if (ks.key.rfind("patch_embed.proj.6.", 0) == 0) continue;
    // 3 -> C/4 -> C/2 -> C instead of 3 -> C/8 -> C/4 -> C/2 -> C.
    if (ks.key == "patch_embed.proj.0.0.weight") ks.shape = {96, 3, 3, 3};
    if (ks.key == "patch_embed.proj.2.0.weight") ks.shape = {192, 96, 3, 3};
    if (ks.key == "patch_embed.proj.4.0.weight") ks.shape = {384, 192, 3, 3};
    if (ks.key.rfind("patch_embed.proj.", 0) == 0 && ks.shape.size() == 1)
      ks.shape[0] = ks.key[17] == '0' ? 96 : ks.key[17] == '2' ? 192 : 384;
    want.push_back(ks);
  }
  const auto got = model_keys(*create_backbone("xcit_small_12_p8"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].key, want[i].key) << "entry " << i;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].key;
  }
}

TEST(XCiTModel, HeadExistsOnlyWithClassesBetweenNormAndPosEmbeder) {
  BackboneOptions options;
  options.num_classes = 1000;
  auto m = create_backbone("xcit_nano_12_p16", options);
  const auto keys = model_keys(*m);
  std::vector<std::string> tail;
  for (size_t i = keys.size() - 6; i < keys.size(); ++i) tail.push_back(keys[i].key);
  EXPECT_EQ(tail, (std::vector<std::string>{"norm.weight", "norm.bias", "head.weight", "head.bias",
                                            "pos_embeder.token_projection.weight",
                                            "pos_embeder.token_projection.bias"}));
  EXPECT_EQ(m->num_parameters(), 2924224 + 128 * 1000 + 1000);  // spec: 3.05M with the head
  m->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(m->forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 1000}));
}

TEST(XCiTModel, OfficialInitialisation) {
  // Spec section 12, on a depth-24 variant (eta 1e-5).
  torch::manual_seed(30);
  auto m = create_backbone("xcit_tiny_24_p16");
  const auto params = m->named_parameters();
  const auto std_of = [](const Tensor& t) { return t.std().item<double>(); };
  for (const auto& item : params) {
    const std::string& k = item.key();
    const Tensor& t = item.value();
    const auto ends = [&](const std::string& s) {
      return k.size() >= s.size() && k.compare(k.size() - s.size(), s.size(), s) == 0;
    };
    const auto has = [&](const char* part) { return k.find(part) != std::string::npos; };
    // PyTorch's default conv init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform, a=sqrt(5)).
    const auto expect_default_conv = [&] {
      const double bound = 1.0 / std::sqrt(static_cast<double>(t.numel() / t.size(0)));
      EXPECT_LE(t.abs().max().item<double>(), bound) << k;
      EXPECT_GT(t.abs().max().item<double>(), 0.9 * bound) << k;
    };
    const auto expect_ones_zeros = [&] {
      EXPECT_TRUE(torch::equal(t, ends("weight") ? torch::ones_like(t) : torch::zeros_like(t)))
          << k;
    };
    if (has("gamma")) {
      EXPECT_TRUE(torch::equal(t, torch::full_like(t, 1e-5))) << k;
    } else if (ends("temperature")) {
      EXPECT_TRUE(torch::equal(t, torch::ones_like(t))) << k;
    } else if (has("patch_embed")) {
      if (ends(".0.weight"))
        expect_default_conv();
      else
        expect_ones_zeros();  // conv / BN
    } else if (has("local_mp") || has("pos_embeder")) {
      if (has("bn."))
        expect_ones_zeros();
      else if (ends("weight"))
        expect_default_conv();
    } else if (has("norm")) {
      expect_ones_zeros();                            // LayerNorm
    } else if (ends("weight") && k != "cls_token") {  // every Linear: qkv, proj, fc1, fc2
      EXPECT_NEAR(std_of(t), 0.02, 0.002) << k;
      EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.002) << k;
    } else if (ends("bias")) {
      EXPECT_EQ(t.abs().max().item<double>(), 0.0) << k;
    }
  }
  EXPECT_NEAR(std_of(params["cls_token"]), 0.02, 0.003);
}

TEST(XCiTModel, TruncatedNormalHonoursMaterialBounds) {
  // N(0, 1) truncated to [-1, 1]: variance 1 - 2 phi(1) / (2 Phi(1) - 1) = 0.29112.
  torch::manual_seed(31);
  Tensor t = torch::empty({200000});
  xdino::models::trunc_normal_(t, 0.0, 1.0, -1.0, 1.0);
  EXPECT_LE(t.abs().max().item<double>(), 1.0);
  EXPECT_NEAR(t.var().item<double>(), 0.29112, 0.005);
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.005);
  // Shifted mean with absolute bounds (timm semantics): all samples in [a, b].
  xdino::models::trunc_normal_(t, 2.0, 0.5, 1.5, 4.0);
  EXPECT_GE(t.min().item<double>(), 1.5);
  const auto phi = [](double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); };
  const auto Phi = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  const double alpha = -1.0, beta = 4.0;  // (a - mean) / std, (b - mean) / std
  EXPECT_NEAR(t.mean().item<double>(),
              2.0 + 0.5 * (phi(alpha) - phi(beta)) / (Phi(beta) - Phi(alpha)), 0.005);
}

TEST(XCiTModel, EveryBatchNormCanBeSynchronised) {
  // set_batch_norm_communicator reaches models::BatchNorm only: 4 in the p16 patch embedding
  // and one per LPI.
  auto m = create_backbone("xcit_small_12_p16");
  int64_t count = 0;
  for (const auto& module : m->modules())
    count += dynamic_cast<BatchNormImpl*>(module.get()) ? 1 : 0;
  EXPECT_EQ(count, 4 + 12);
}

TEST(XCiTModel, ParameterCountsOfAllVariantsMatchTheSpec) {
  // Spec section 1, millions with three decimals: p16 / p8.
  const std::map<std::string, std::pair<double, double>> spec = {
      {"nano_12", {2.924, 2.920}},     {"tiny_12", {6.523, 6.514}},
      {"small_12", {25.868, 25.828}},  {"tiny_24", {11.924, 11.914}},
      {"small_24", {47.286, 47.246}},  {"medium_24", {83.883, 83.811}},
      {"large_24", {188.327, 188.164}}};
  ASSERT_EQ(xcit_variants().size(), 14u);
  for (const XCiTConfig& c : xcit_variants()) {
    const std::string size = c.name.substr(5, c.name.rfind("_p") - 5);
    const double want_m = c.patch_size == 16 ? spec.at(size).first : spec.at(size).second;
    const int64_t exact = xcit_closed_form_params(c.embed_dim, c.depth, c.num_heads, c.patch_size);
    EXPECT_NEAR(exact / 1e6, want_m, 0.0005 + 1e-9) << c.name;
    EXPECT_EQ(create_backbone(c.name)->num_parameters(), exact) << c.name;
  }
}

TEST(XCiTModel, SmallImageVariantsHavePatch4AndTheirNamedShape) {
  // Ours: 2 stem units (3 -> C/2 -> C); a 28 px image is a 7x7 grid.
  ASSERT_EQ(xcit_small_image_variants().size(), 4u);
  for (const XCiTConfig& c : xcit_small_image_variants()) {
    ASSERT_EQ(c.patch_size, 4) << c.name;
    const std::string size = c.name.substr(5, c.name.rfind("_p") - 5);
    const int64_t depth = std::stoll(size.substr(size.find('_') + 1));
    EXPECT_EQ(c.depth, depth) << c.name;
    EXPECT_EQ(c.embed_dim, size.rfind("nano", 0) == 0 ? 128 : 192) << c.name;
    const auto m = create_backbone(c.name);
    EXPECT_EQ(m->num_parameters(), xcit_closed_form_params(c.embed_dim, c.depth, c.num_heads, 4))
        << c.name;
    EXPECT_EQ(m->token_grid(28, 28), std::make_pair(int64_t{7}, int64_t{7})) << c.name;
    EXPECT_EQ(m->patch_size(), 4);
    EXPECT_EQ(patch_size_of(c.name, 16), 4);
  }
  auto m = create_backbone("xcit_nano_4_p4");
  torch::NoGradGuard no_grad;
  m->eval();
  EXPECT_EQ(m->forward(torch::randn({2, 3, 28, 28})).sizes(), (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(patch_size_of("xcit_nano_12_p8", 16), 8);
  EXPECT_EQ(patch_size_of("vit_small", 8), 8);
}

TEST(XCiTModel, FlopsMatchTheSpecTable) {
  const std::map<std::string, std::pair<double, double>> spec = {
      {"nano_12", {0.56, 2.18}},    {"tiny_12", {1.25, 4.86}},   {"small_12", {4.87, 18.92}},
      {"tiny_24", {2.35, 9.26}},    {"small_24", {9.15, 36.04}}, {"medium_24", {16.23, 63.93}},
      {"large_24", {36.09, 142.15}}};
  for (const XCiTConfig& c : xcit_variants()) {
    const std::string size = c.name.substr(5, c.name.rfind("_p") - 5);
    const double want = (c.patch_size == 16 ? spec.at(size).first : spec.at(size).second) * 1e9;
    EXPECT_NEAR(xcit_flops(c, 224, 224), want, 0.01 * want) << c.name;
    EXPECT_NEAR(xcit_flops(c, 224, 224), want, 0.006e9) << c.name;  // the table's rounding
  }
  const double m24_8_384 = xcit_flops(*find_xcit_variant("xcit_medium_24_p8"), 384, 384);
  EXPECT_NEAR(m24_8_384, 187.9e9, 0.05e9);
  EXPECT_DOUBLE_EQ(create_backbone("xcit_small_12_p16")->flops(224, 224),
                   xcit_flops(*find_xcit_variant("xcit_small_12_p16"), 224, 224));
}

TEST(XCiTModel, FlopsCountWhatTheForwardComputes) {
  // Tiny model at an odd size: FLOPs from shapes equal the sum of the fvcore rules applied
  // layer by layer here by hand (C=16, h=4, d=4, p16, 45x30 -> 23x15 -> 12x8 -> 6x4 -> 3x2).
  const XCiTConfig c = tiny_xcit_config(16, true);
  double want = 2 * 3 * 9 * 23 * 15 + 4 * 2 * 9 * 12 * 8 + 8 * 4 * 9 * 6 * 4 + 16 * 8 * 9 * 3 * 2;
  want += 2 * (2 * 23 * 15 + 4 * 12 * 8 + 8 * 6 * 4 + 16 * 3 * 2);  // eval BN
  const double N = 6, T = 7, C = 16;
  want += 64 * C * N;
  want += 2 * (15 * N * C + 3 * N * C * C + 2 * N * C * 4 + N * C * C + 20 * N * C + 8 * N * C * C);
  want += 2 * (5 * T * C + 3 * T * C * C + T * C + C * C + 5 * T * C + 8 * C * C);
  want += 5 * T * C;
  EXPECT_DOUBLE_EQ(xcit_flops(c, 45, 30), want);
}

TEST(XCiTModel, IntrospectionAgreesWithTheForwardPass) {
  auto m = tiny_model(16, true, torch::kDouble, 21);
  const Tensor img = torch::randn({2, 3, 64, 48}, torch::kDouble);
  torch::NoGradGuard no_grad;
  ProbeRequest all;
  all.blocks = {0, -1};
  all.patch_tokens = true;
  all.cls_attention_layer = 0;
  all.qk_block = 1;
  const Probe p = m->probe(img, all);
  EXPECT_TRUE(torch::allclose(p.feature, m->forward(img), 0, 1e-12));
  EXPECT_TRUE(torch::equal(p.blocks[1], p.patch_tokens));  // -1 is the last XCA block
  EXPECT_TRUE(torch::allclose(m->block_outputs(img, {0})[0], p.blocks[0], 0, 1e-12));
  EXPECT_TRUE(torch::allclose(m->cls_attention(img, 0), p.cls_attention, 0, 1e-12));
  EXPECT_FALSE(torch::allclose(m->cls_attention(img, -1), p.cls_attention, 0, 1e-6));
  // |q|, |k| of block 1 from its input, recomputed naively.
  const auto params = naive::params_of(*m);
  naive::XcaNorms want;
  naive::xca(naive::layer_norm(p.blocks[0], params.at("blocks.1.norm1.weight"),
                               params.at("blocks.1.norm1.bias"), 1e-6),
             params, "blocks.1.attn.", 4, &want);
  EXPECT_LE(naive::max_abs_diff(p.qk.q_raw, want.q_raw), 1e-10);
  EXPECT_LE(naive::max_abs_diff(p.qk.k_hat, want.k_hat), 1e-10);
  EXPECT_LE(naive::max_abs_diff(m->qk_norms(img, 1).q_hat, want.q_hat), 1e-10);
  EXPECT_EQ(p.qk.q_raw.sizes(), (std::vector<int64_t>{2, 4, 12}));
  const Tensor rows = p.cls_attention.sum(-1);
  EXPECT_TRUE(torch::allclose(rows, torch::ones_like(rows), 0, 1e-12));
  // CA attention of the last layer from a naive run of the two CA blocks.
  const int64_t B = 2;
  Tensor x = torch::cat({params.at("cls_token").expand({B, 1, 16}), p.patch_tokens}, 1);
  Tensor attn0, attn1;
  x = naive::class_attention_block(x, params, "cls_attn_blocks.0.", 4, true, &attn0);
  naive::class_attention_block(x, params, "cls_attn_blocks.1.", 4, true, &attn1);
  EXPECT_LE(naive::max_abs_diff(p.cls_attention, attn0), 1e-10);
  EXPECT_LE(naive::max_abs_diff(m->cls_attention(img, -1), attn1), 1e-10);
}

TEST(XCiTModel, BadIndicesAreUsageErrors) {
  auto m = tiny_model(16, true, torch::kFloat, 22);
  const Tensor img = torch::randn({1, 3, 32, 32});
  EXPECT_THROW(m->block_outputs(img, {2}), xdino::UsageError);
  EXPECT_THROW(m->block_outputs(img, {-3}), xdino::UsageError);
  EXPECT_THROW(m->cls_attention(img, 2), xdino::UsageError);
  EXPECT_THROW(m->qk_norms(img, 5), xdino::UsageError);
  EXPECT_THROW(create_backbone("xcit_huge_12_p16"), xdino::UsageError);
}

TEST(XCiTModel, TrainModeDropsPathsEvalIsDeterministic) {
  auto m = std::make_shared<XCiT>([] {
    XCiTConfig c = tiny_xcit_config(16, true);
    c.drop_path_rate = 0.5;
    return c;
  }());
  const Tensor img = torch::randn({4, 3, 32, 32});
  torch::NoGradGuard no_grad;
  m->eval();
  EXPECT_TRUE(torch::equal(m->forward(img), m->forward(img)));
  m->train();
  EXPECT_FALSE(torch::allclose(m->forward(img), m->forward(img)));
}

TEST(XCiTModel, Bfloat16AndAutocastRunForwardAndBackward) {
  if (!xdino::testing::cpu_bfloat16_runs())
    return;  // .ci/run's AVX2 emulation: its phase 1 runs it
  auto ref = tiny_model(8, true, torch::kFloat, 23);
  const Tensor img = torch::randn({2, 3, 40, 40});
  const Tensor want = [&] {
    torch::NoGradGuard no_grad;
    return ref->forward(img);
  }();
  ref->train();
  {
    xdino::compat::AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
    const Tensor y = ref->forward(img);
    y.to(torch::kFloat).pow(2).sum().backward();
  }
  for (const auto& p : ref->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
  ref->eval();
  {
    torch::NoGradGuard no_grad;
    xdino::compat::AutocastGuard autocast(c10::DeviceType::CPU, torch::kBFloat16);
    const Tensor y = ref->forward(img).to(torch::kFloat);
    EXPECT_LE((y - want).abs().max().item<double>(), 0.1 * want.abs().max().item<double>());
  }
  auto bf16 = tiny_model(8, true, torch::kFloat, 23);
  bf16->to(torch::kBFloat16);
  const Tensor y = bf16->forward(img.to(torch::kBFloat16));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_LE((y.to(torch::kFloat) - want).abs().max().item<double>(),
            0.1 * want.abs().max().item<double>());
  y.to(torch::kFloat).pow(2).sum().backward();
  for (const auto& p : bf16->parameters())
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
}
