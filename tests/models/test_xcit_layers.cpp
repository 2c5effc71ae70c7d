// XCiT layers against naive float64 references written from the official semantics (tests/support/
// naive_xcit.cpp), finite-difference gradients, and the stochastic-depth rule.
#include <gtest/gtest.h>

#include "core/check.h"
#include "core/compat.h"
#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_nn.h"
#include "tests/support/naive_xcit.h"

namespace naive = xdino::testing::naive;
using namespace xdino::models;
using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::prepared;

namespace {

struct Precision {
  torch::Dtype dtype;
  double tol;
};
// The tolerances the project promises: 1e-6 in float64, 1e-4 in float32 (relative to the
// reference's magnitude when that exceeds 1).
const Precision kPrecisions[] = {{torch::kDouble, 1e-6}, {torch::kFloat, 1e-4}};

}  // namespace

TEST(XCA, MatchesNaiveInFloat64AndFloat32) {
  for (const auto& [dtype, tol] : kPrecisions) {
    XCA xca = prepared(XCA(16, 4), dtype, 1);
    const Tensor x = torch::randn({2, 12, 16}, dtype);
    naive::XcaNorms want_norms;
    const Tensor want = naive::xca(x, naive::params_of(*xca), "", 4, &want_norms);
    QKNorms norms;
    torch::NoGradGuard no_grad;
    expect_close(xca(x, &norms), want, tol, "XCA output");
    expect_close(norms.q_raw, want_norms.q_raw, tol, "|q|");
    expect_close(norms.k_raw, want_norms.k_raw, tol, "|k|");
    expect_close(norms.q_hat, want_norms.q_hat, tol, "|q^|");
    expect_close(norms.k_hat, want_norms.k_hat, tol, "|k^|");
  }
}

TEST(XCA, NormalisedQueryNormsSumToHeadDim) {
  // Each channel of q^ is a unit vector over the tokens, so sum_n |q^_n|^2 = d per head.
  XCA xca = prepared(XCA(24, 3), torch::kDouble, 2);
  QKNorms norms;
  torch::NoGradGuard no_grad;
  xca(torch::randn({2, 20, 24}, torch::kDouble), &norms);
  const Tensor sums = norms.q_hat.pow(2).sum(-1);
  EXPECT_TRUE(torch::allclose(sums, torch::full_like(sums, 8.0), 0, 1e-10)) << sums;
  const Tensor ksums = norms.k_hat.pow(2).sum(-1);
  EXPECT_TRUE(torch::allclose(ksums, torch::full_like(ksums, 8.0), 0, 1e-10)) << ksums;
  // ... while the raw norms are not normalised at all.
  EXPECT_GT((norms.q_raw.pow(2).sum(-1) - 8.0).abs().max().item<double>(), 1e-3);
}

TEST(XCA, ZeroChannelHasFiniteGradientsLikeFNormalize) {
  // A channel whose query is zero on every token (possible with one-token local crops) is
  // normalised to 0 by F.normalize's max(|q|, 1e-12); its gradient must stay finite too.
  // sqrt'(0) is infinite, so a norm taken as sqrt(sum q^2) and clamped afterwards returned NaN
  // here and, through the optimizer, turned every weight into NaN mid-run.
  for (const auto& [dtype, tol] : kPrecisions) {
    XCA xca = prepared(XCA(8, 2), dtype, 3);
    {
      torch::NoGradGuard no_grad;
      xca->qkv->weight[1].zero_();  // query channel 1 of head 0
      xca->qkv->bias[1].zero_();
    }
    const Tensor x = torch::randn({2, 1, 8}, dtype).requires_grad_(true);
    const Tensor out = xca(x, nullptr);
    expect_close(out.detach(), naive::xca(x.detach(), naive::params_of(*xca), "", 2, nullptr), tol,
                 "XCA output with a zero channel");
    out.square().sum().backward();
    EXPECT_TRUE(x.grad().isfinite().all().item<bool>()) << x.grad();
    for (const auto& p : xca->named_parameters())
      EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>()) << p.key();
  }
}

// XCA through scaled_dot_product_attention (LibTorch 2.1+) against the op path and the naive
// reference: the same function, forward and backward, and a finite-difference check of its
// own backward; with LibTorch 1.13, the request fails with one line naming what it needs.
TEST(XCA, SdpaPathEqualsOpPathForwardAndBackward) {
  if (!xdino::compat::kHaveSdpa) {
    XCA xca = prepared(XCA(16, 4, XcaAttention::kSdpa), torch::kFloat, 1);
    try {
      xca(torch::randn({2, 12, 16}));
      ADD_FAILURE() << "kSdpa ran on a LibTorch without scaled_dot_product_attention";
    } catch (const xdino::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("LibTorch 2.1"), std::string::npos) << e.what();
    }
    return;
  }
  for (const auto& [dtype, tol] : kPrecisions) {
    SCOPED_TRACE(c10::toString(dtype));
    XCA ops = prepared(XCA(16, 4, XcaAttention::kOps), dtype, 1);
    XCA sdpa = prepared(XCA(16, 4, XcaAttention::kSdpa), dtype, 1);  // the same weights
    torch::manual_seed(3);
    const Tensor x = torch::randn({2, 12, 16}, dtype);
    EXPECT_TRUE(sdpa->uses_sdpa());
    EXPECT_FALSE(ops->uses_sdpa());
    {
      torch::NoGradGuard no_grad;
      expect_close(sdpa(x), naive::xca(x, naive::params_of(*ops), "", 4), tol, "SDPA vs naive");
    }
    const Tensor r = torch::randn({2, 12, 16}, dtype);
    const Tensor xa = x.clone().requires_grad_(true), xb = x.clone().requires_grad_(true);
    (ops(xa) * r).sum().backward();
    (sdpa(xb) * r).sum().backward();
    expect_close(xb.grad(), xa.grad(), tol, "input gradient");
    for (const char* name : {"temperature", "qkv.weight", "qkv.bias", "proj.weight"})
      expect_close(sdpa->named_parameters()[name].grad(), ops->named_parameters()[name].grad(), tol,
                   name);
  }
  // Its own backward, by finite differences (float64: the math backend).
  XCA sdpa = prepared(XCA(8, 2, XcaAttention::kSdpa), torch::kDouble, 5);
  const Tensor x = torch::randn({2, 6, 8}, torch::kDouble).requires_grad_(true);
  const Tensor r = torch::randn({2, 6, 8}, torch::kDouble);
  xdino::testing::NamedTensors checked = xdino::testing::trainable_parameters(*sdpa);
  checked.emplace_back("input", x);
  xdino::testing::expect_gradients_match([&] { return (sdpa(x) * r).sum(); }, checked);
}

TEST(XCA, AutoTakesTheOpPathAndNormsTakeTheOpPath) {
  XCA xca = prepared(XCA(16, 4), torch::kFloat, 1);  // kAuto
  EXPECT_FALSE(xca->uses_sdpa());
  XCA asked = prepared(XCA(16, 4, XcaAttention::kSdpa), torch::kFloat, 1);
  EXPECT_TRUE(asked->uses_sdpa());
  // Asked for the norms, even kSdpa computes through the ops that produce them.
  XCA sdpa = prepared(XCA(16, 4, XcaAttention::kSdpa), torch::kDouble, 1);
  const Tensor x = torch::randn({2, 12, 16}, torch::kDouble);
  QKNorms norms;
  torch::NoGradGuard no_grad;
  expect_close(sdpa(x, &norms), naive::xca(x, naive::params_of(*sdpa), "", 4), 1e-6, "XCA");
  EXPECT_TRUE(norms.q_hat.defined());
}

TEST(LPI, MatchesNaiveInFloat64AndFloat32) {
  for (const auto& [dtype, tol] : kPrecisions) {
    LPI lpi = prepared(LPI(8), dtype, 3);
    const Tensor x = torch::randn({2, 15, 8}, dtype);  // 3 x 5 grid: rows and columns differ
    torch::NoGradGuard no_grad;
    expect_close(lpi(x, 3, 5), naive::lpi(x, naive::params_of(*lpi), "", 3, 5), tol, "LPI");
  }
}

TEST(XCABlock, MatchesNaiveInFloat64AndFloat32) {
  for (const auto& [dtype, tol] : kPrecisions) {
    XCABlock block = prepared(XCABlock(XCABlockOptions(16, 4)), dtype, 4);
    const Tensor x = torch::randn({2, 12, 16}, dtype);
    torch::NoGradGuard no_grad;
    expect_close(block(x, 4, 3), naive::xca_block(x, naive::params_of(*block), "", 4, 4, 3), tol,
                 "XCA block");
  }
}

TEST(ClassAttentionBlock, MatchesNaiveWithOfficialQuirks) {
  for (bool tokens_norm : {true, false}) {
    for (const auto& [dtype, tol] : kPrecisions) {
      ClassAttentionBlock block =
          prepared(ClassAttentionBlock(ClassAttentionBlockOptions(16, 4).tokens_norm(tokens_norm)),
                   dtype, 5);
      const Tensor x = torch::randn({2, 7, 16}, dtype);
      Tensor attn, want_attn;
      const Tensor want =
          naive::class_attention_block(x, naive::params_of(*block), "", 4, tokens_norm, &want_attn);
      torch::NoGradGuard no_grad;
      const Tensor got = block(x, &attn);
      const std::string what = std::string("tokens_norm=") + (tokens_norm ? "true" : "false");
      expect_close(got, want, tol, "CA block " + what);
      expect_close(attn, want_attn, tol, "CA attention " + what);
      const Tensor rows = attn.sum(-1);
      EXPECT_TRUE(torch::allclose(rows, torch::ones_like(rows), 0, 10 * tol)) << what;
    }
  }
}

TEST(ClassAttentionBlock, PatchRowsAreDoubledNormalisedResidual) {
  // Spec section 9 spelled out for one token: out_n = 2 * norm2(x_n + gamma1 * norm1(x_n)).
  ClassAttentionBlock block = prepared(
      ClassAttentionBlock(ClassAttentionBlockOptions(8, 2).tokens_norm(true)), torch::kDouble, 6);
  const Tensor x = torch::randn({1, 4, 8}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const Tensor out = block(x);
  const auto p = naive::params_of(*block);
  const Tensor xn = x.select(1, 2);
  const Tensor u = naive::layer_norm(xn, p.at("norm1.weight"), p.at("norm1.bias"), 1e-6);
  const Tensor z =
      naive::layer_norm(xn + p.at("gamma1") * u, p.at("norm2.weight"), p.at("norm2.bias"), 1e-6);
  EXPECT_LE(naive::max_abs_diff(out.select(1, 2), 2 * z), 1e-12);
}

TEST(FourierPositionalEncoding, FeaturesMatchTheSpecFormula) {
  // float64 for a float64 projection; the official float32 sequence otherwise.
  for (const auto& [dtype, tol] : kPrecisions) {
    const Tensor f = FourierPositionalEncodingImpl::features(3, 5, dtype, torch::kCPU);
    expect_close(f, naive::fourier_features(3, 5), tol, "Fourier features");
  }
  // First token, channel 0 (y, sin) and channel 33 (x, cos) by hand.
  const Tensor f = FourierPositionalEncodingImpl::features(4, 6, torch::kDouble, torch::kCPU);
  const double two_pi = 2 * std::acos(-1.0);
  EXPECT_NEAR(f[0][0].item<double>(), std::sin(two_pi / (4 + 1e-6)), 1e-12);
  EXPECT_NEAR(f[0][33].item<double>(), std::cos(two_pi / (6 + 1e-6)), 1e-12);
  EXPECT_NEAR(f[7][2].item<double>(), std::sin(2 * two_pi / (4 + 1e-6) / std::pow(1e4, 2 / 32.)),
              1e-12);  // token 7 = row 1, col 1
}

TEST(FourierPositionalEncoding, ProjectionMatchesNaive) {
  for (const auto& [dtype, tol] : kPrecisions) {
    FourierPositionalEncoding pe = prepared(FourierPositionalEncoding(16), dtype, 7);
    torch::NoGradGuard no_grad;
    expect_close(pe(5, 3), naive::positional_encoding(naive::params_of(*pe), "", 5, 3), tol,
                 "positional encoding");
  }
}

TEST(ConvPatchEmbed, MatchesNaiveAndRoundsUpPerStage) {
  for (int64_t patch : {16, 8}) {
    for (const auto& [dtype, tol] : kPrecisions) {
      ConvPatchEmbed embed = prepared(ConvPatchEmbed(patch, 32), dtype, 8);
      const Tensor img = torch::randn({2, 3, 37, 50}, dtype);  // not multiples of the patch
      auto want =
          naive::conv_patch_embed(img, naive::params_of(*embed), "proj.", patch == 16 ? 4 : 3);
      torch::NoGradGuard no_grad;
      auto [tokens, grid] = embed(img);
      expect_close(tokens, want.first, tol, "patch embedding p" + std::to_string(patch));
      EXPECT_EQ(grid, want.second);
      EXPECT_EQ(grid, ConvPatchEmbedImpl::grid(37, 50, patch));
    }
  }
  // ceil at every stage: 100 -> 50 -> 25 -> 13 -> 7 (docs/architecture.md, "XCiT").
  using Grid = std::pair<int64_t, int64_t>;
  EXPECT_EQ(ConvPatchEmbedImpl::grid(100, 224, 16), Grid(7, 14));
  EXPECT_EQ(ConvPatchEmbedImpl::grid(480, 97, 8), Grid(60, 13));
}

TEST(ConvPatchEmbed, RejectsOtherPatchSizes) {
  // 16 and 8 are the official stems, 4 ours (docs/architecture.md, "Small-image XCiT").
  EXPECT_THROW(ConvPatchEmbed(2, 32), xdino::UsageError);
  EXPECT_THROW(ConvPatchEmbed(32, 32), xdino::UsageError);
  EXPECT_THROW(ConvPatchEmbed(12, 32), xdino::UsageError);
  EXPECT_EQ(ConvPatchEmbed(4, 32)->convs.size(), 2u);
}

TEST(XCABlock, GradientsMatchFiniteDifferences) {
  // float64, train mode (BN on batch statistics), loss = <block(x), R>.
  XCABlock block = prepared(XCABlock(XCABlockOptions(8, 2)), torch::kDouble, 9);
  block->train();
  const Tensor x = torch::randn({2, 6, 8}, torch::kDouble).requires_grad_(true);
  const Tensor r = torch::randn({2, 6, 8}, torch::kDouble);
  xdino::testing::NamedTensors checked = xdino::testing::trainable_parameters(
      *block, {"attn.temperature", "attn.qkv.weight", "attn.proj.bias", "gamma1", "gamma3",
               "local_mp.conv1.weight", "local_mp.bn.weight", "norm2.weight", "mlp.fc1.weight"});
  checked.emplace_back("input", x);
  xdino::testing::expect_gradients_match([&] { return (block(x, 2, 3) * r).sum(); }, checked);
}

TEST(ClassAttentionBlock, GradientsMatchFiniteDifferences) {
  for (const bool tokens_norm : {true, false}) {
    ClassAttentionBlock block = prepared(
        ClassAttentionBlock(ClassAttentionBlockOptions(8, 2).eta(0.7).tokens_norm(tokens_norm)),
        torch::kDouble, 12);
    const Tensor x = torch::randn({2, 5, 8}, torch::kDouble).requires_grad_(true);
    const Tensor r = torch::randn({2, 5, 8}, torch::kDouble);
    xdino::testing::NamedTensors checked = xdino::testing::trainable_parameters(*block);
    checked.emplace_back("input", x);
    SCOPED_TRACE(tokens_norm ? "tokens_norm" : "CLS norm only");
    xdino::testing::expect_gradients_match([&] { return (block(x) * r).sum(); }, checked);
  }
}

TEST(ConvPatchEmbed, GradientsMatchFiniteDifferencesThroughBatchNorm) {
  // Train mode: every BN normalises with the batch statistics, which depend on the
  // parameters being probed; patch 8 = three conv units.
  ConvPatchEmbed embed = prepared(ConvPatchEmbed(8, 16), torch::kDouble, 13);
  embed->train();
  const Tensor images = torch::randn({2, 3, 16, 16}, torch::kDouble).requires_grad_(true);
  const Tensor r = torch::randn({2, 4, 16}, torch::kDouble);
  xdino::testing::NamedTensors checked = xdino::testing::trainable_parameters(*embed);
  checked.emplace_back("images", images);
  xdino::testing::expect_gradients_match([&] { return (embed(images).first * r).sum(); }, checked,
                                         {/*eps=*/1e-6, /*tolerance=*/1e-5});
}

TEST(DropPath, PerSampleMaskWithTheSpecRate) {
  torch::manual_seed(10);
  const int64_t B = 20000;
  const double rate = 0.3;
  const Tensor x = torch::zeros({B, 3, 4});
  const Tensor y = torch::ones({B, 3, 4});
  const Tensor gamma = torch::full({4}, 2.0);
  const Tensor out = residual_drop_path(x, y, gamma, rate, /*training=*/true);
  // Every sample is either dropped entirely or scaled by gamma / keep entirely.
  const Tensor per_sample = out.amax({1, 2}), per_sample_min = out.amin({1, 2});
  EXPECT_TRUE(torch::equal(per_sample, per_sample_min));
  const Tensor dropped = per_sample == 0;
  const Tensor kept = (per_sample - 2.0 / 0.7).abs() < 1e-5;
  EXPECT_TRUE((dropped | kept).all().item<bool>());
  const double frac = dropped.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(frac, rate, 4 * std::sqrt(rate * (1 - rate) / B));  // 4 sigma
  EXPECT_NEAR(out.mean().item<double>(), 2.0, 0.02);              // unbiased in expectation
}

TEST(DropPath, IdentityInEvalModeAndAtRateZero) {
  const Tensor x = torch::randn({5, 3, 4}), y = torch::randn({5, 3, 4});
  const Tensor gamma = torch::randn({4});
  const Tensor want = x + gamma * y;
  EXPECT_TRUE(torch::allclose(residual_drop_path(x, y, gamma, 0.5, false), want));
  EXPECT_TRUE(torch::allclose(residual_drop_path(x, y, gamma, 0.0, true), want));
  EXPECT_FALSE(drop_path_factor(x, 0.5, false).defined());
}

TEST(XCABlock, StochasticDepthOnlyInTrainMode) {
  XCABlock block =
      prepared(XCABlock(XCABlockOptions(8, 2).drop_path_rate(0.5)), torch::kDouble, 11);
  XCABlock plain = prepared(XCABlock(XCABlockOptions(8, 2)), torch::kDouble, 11);  // same weights
  const Tensor x = torch::randn({64, 6, 8}, torch::kDouble);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(block(x, 2, 3), plain(x, 2, 3)));  // eval: identity
  block->train();
  plain->train();
  torch::manual_seed(12);
  const Tensor a = block(x, 2, 3);
  const Tensor b = block(x, 2, 3);
  EXPECT_FALSE(torch::allclose(a, b));  // fresh masks per call
  // Samples whose three branches were all dropped come out unchanged.
  int64_t untouched = 0;
  for (int64_t i = 0; i < 64; ++i) untouched += torch::allclose(a[i], x[i]) ? 1 : 0;
  EXPECT_GT(untouched, 0);  // expected 64 / 8 = 8
  EXPECT_LT(untouched, 24);
}
