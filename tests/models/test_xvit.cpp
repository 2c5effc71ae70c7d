// X-ViT (models/xvit.h): XNorm attention against float64 loops computing Q(K^T V) and
// (Q K^T) V, a block against naive references, finite-difference gradients, shapes at p16/p8
// and non-square sizes, attention FLOPs linear in N, the documented variant table, state-dict
// round trip, and (full build only) a `dino train --arch xvit_tiny` smoke run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "models/registry.h"
#include "models/weights.h"
#include "models/xvit.h"
#include "tests/support/grad_check.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_nn.h"
#include "tests/support/naive_xcit.h"
#ifdef XDINO_TEST_XVIT_CLI
#include "core/atomic_file.h"
#include "eval/report.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#endif

namespace naive = xdino::testing::naive;
using namespace xdino::models;
using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::prepared;

namespace {

// XNorm attention with scalar loops, float64, from the paper's definition. `associate_left`:
// compute (Q^ D K^T) V with an N x N matrix instead of Q^ (D K^T V) with a d x d one, where
// D = diag(1 / |row i of K^T V|): the same product, grouped the other way.
Tensor naive_xnorm(const Tensor& x_in, const naive::Params& p, const std::string& prefix,
                   int64_t heads, bool associate_left) {
  const Tensor x = naive::f64(x_in);
  const Tensor qkv = naive::linear(x, p.at(prefix + "qkv.weight"), p.at(prefix + "qkv.bias"));
  const Tensor gamma = p.at(prefix + "gamma");
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), d = C / heads;
  Tensor out = torch::zeros({B, N, C}, torch::kDouble);
  auto acc = qkv.accessor<double, 3>();
  auto o = out.accessor<double, 3>();
  const auto q = [&](int64_t b, int64_t n, int64_t hd, int64_t i) { return acc[b][n][hd * d + i]; };
  const auto k = [&](int64_t b, int64_t n, int64_t hd, int64_t i) {
    return acc[b][n][C + hd * d + i];
  };
  const auto v = [&](int64_t b, int64_t n, int64_t hd, int64_t i) {
    return acc[b][n][2 * C + hd * d + i];
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hd = 0; hd < heads; ++hd) {
      const double g2 = std::pow(gamma[hd].item<double>(), 2);
      // Row norms of M = K^T V.
      std::vector<double> m(d * d, 0.0), inv_row(d, 0.0);
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j)
          for (int64_t n = 0; n < N; ++n) m[i * d + j] += k(b, n, hd, i) * v(b, n, hd, j);
      for (int64_t i = 0; i < d; ++i) {
        double s = 0;
        for (int64_t j = 0; j < d; ++j) s += m[i * d + j] * m[i * d + j];
        inv_row[i] = 1.0 / std::sqrt(s);
      }
      for (int64_t n = 0; n < N; ++n) {
        double qs = 0;
        for (int64_t i = 0; i < d; ++i) qs += q(b, n, hd, i) * q(b, n, hd, i);
        const double inv_q = 1.0 / std::sqrt(qs);
        if (associate_left) {
          // a_nm = sum_i q^_ni k_mi / |M_i|, then out_n = sum_m a_nm v_m.
          for (int64_t mm = 0; mm < N; ++mm) {
            double a = 0;
            for (int64_t i = 0; i < d; ++i)
              a += q(b, n, hd, i) * inv_q * k(b, mm, hd, i) * inv_row[i];
            for (int64_t j = 0; j < d; ++j) o[b][n][hd * d + j] += g2 * a * v(b, mm, hd, j);
          }
        } else {
          for (int64_t j = 0; j < d; ++j) {
            double s = 0;
            for (int64_t i = 0; i < d; ++i) s += q(b, n, hd, i) * inv_q * m[i * d + j] * inv_row[i];
            o[b][n][hd * d + j] = g2 * s;
          }
        }
      }
    }
  }
  return naive::linear(out, p.at(prefix + "proj.weight"), p.at(prefix + "proj.bias"));
}

Tensor naive_affine(const Tensor& y, const naive::Params& p, const std::string& prefix) {
  return y * p.at(prefix + "alpha") + p.at(prefix + "beta");
}

Tensor naive_block(const Tensor& x, const naive::Params& p, int64_t heads, int64_t rows,
                   int64_t cols) {
  const auto ln = [&](const Tensor& t, const std::string& name) {
    return naive::layer_norm(t, p.at(name + ".weight"), p.at(name + ".bias"), 1e-6);
  };
  Tensor y = naive::f64(x);
  y = y + naive_affine(naive_xnorm(ln(y, "norm1"), p, "attn.", heads, false), p, "affine1.");
  y = y + naive_affine(naive::lpi(ln(y, "norm2"), p, "local_mp.", rows, cols), p, "affine2.");
  return y + naive_affine(naive::mlp(ln(y, "norm3"), p, "mlp."), p, "affine3.");
}

XViTConfig tiny_xvit_config(int64_t patch) {
  XViTConfig c;
  c.name = "xvit_test";
  c.patch_size = patch;
  c.embed_dim = 32;
  c.depth = 2;
  c.num_heads = 4;
  return c;
}

}  // namespace

TEST(XNormAttention, MatchesLoopsBothAssociationsInFloat64AndFloat32) {
  for (const auto& [dtype, tol] :
       {std::pair{torch::kDouble, 1e-9}, std::pair{torch::kFloat, 1e-4}}) {
    XNormAttention attn = prepared(XNormAttention(XNormAttentionOptions(24, 3)), dtype, 1);
    const Tensor x = torch::randn({2, 11, 24}, dtype);
    const naive::Params p = naive::params_of(*attn);
    const Tensor right = naive_xnorm(x, p, "", 3, /*associate_left=*/false);  // Q (K^T V)
    const Tensor left = naive_xnorm(x, p, "", 3, /*associate_left=*/true);    // (Q K^T) V
    // Associativity: the two groupings agree to rounding.
    EXPECT_LE(naive::max_abs_diff(left, right),
              1e-12 * std::max(1.0, right.abs().max().item<double>()));
    torch::NoGradGuard no_grad;
    QKNorms norms;
    const Tensor got = attn(x, &norms);
    expect_close(got, right, tol, "XNorm output vs Q(K^T V) loops");
    expect_close(got, left, tol, "XNorm output vs (QK^T)V loops");
    // |q^_n| = 1 (each query normalised over its own channels), |q_n| and |k_n| raw.
    EXPECT_EQ(norms.q_hat.sizes(), (std::vector<int64_t>{2, 3, 11}));
    expect_close(norms.q_hat, torch::ones({2, 3, 11}, torch::kDouble), tol, "|q^|");
    const Tensor qkv = naive::linear(naive::f64(x), p.at("qkv.weight"), p.at("qkv.bias"));
    const Tensor q = qkv.narrow(2, 0, 24).view({2, 11, 3, 8}).permute({0, 2, 1, 3});
    const Tensor k = qkv.narrow(2, 24, 24).view({2, 11, 3, 8}).permute({0, 2, 1, 3});
    expect_close(norms.q_raw, q.square().sum(-1).sqrt(), tol, "|q|");
    expect_close(norms.k_raw, k.square().sum(-1).sqrt(), tol, "|k|");
    EXPECT_FALSE(norms.k_hat.defined());
  }
}

TEST(XNormAttention, LinearInTokensNoSoftmaxScaleInvariantInputs) {
  // Without softmax the output is invariant to scaling q (and to scaling k or v, through
  // the row normalisation of K^T V): a property of XNorm that softmax attention lacks.
  XNormAttention attn = prepared(XNormAttention(XNormAttentionOptions(16, 2)), torch::kDouble, 3);
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({1, 9, 16}, torch::kDouble);
  const Tensor base = attn(x);
  attn->qkv->weight.narrow(0, 0, 16).mul_(7.0);
  attn->qkv->bias.narrow(0, 0, 16).mul_(7.0);
  attn->qkv->weight.narrow(0, 16, 16).mul_(0.1);
  attn->qkv->bias.narrow(0, 16, 16).mul_(0.1);
  expect_close(attn(x), base, 1e-10, "scaled q and k");
}

TEST(XNormAttention, AllZeroQueryHasFiniteGradients) {
  // A zero query (and a zero K^T V) normalises to 0; the gradient must stay finite (the
  // NaN bug of sqrt(sum x^2).clamp_min(eps) would give 0 * inf here).
  XNormAttention attn(XNormAttentionOptions(8, 2));
  attn->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    attn->qkv->weight.narrow(0, 0, 16).zero_();  // q and k projections
    attn->qkv->bias.narrow(0, 0, 16).zero_();
  }
  const Tensor x = torch::randn({2, 5, 8}, torch::kDouble).requires_grad_(true);
  const Tensor y = attn(x);
  EXPECT_TRUE(y.isfinite().all().item<bool>());
  y.sum().backward();
  EXPECT_TRUE(x.grad().isfinite().all().item<bool>()) << x.grad();
  for (const auto& p : attn->named_parameters())
    EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>()) << p.key();
}

TEST(XViTBlock, MatchesNaiveReference) {
  for (const auto& [dtype, tol] :
       {std::pair{torch::kDouble, 1e-9}, std::pair{torch::kFloat, 1e-4}}) {
    XViTBlock block = prepared(XViTBlock(XViTBlockOptions(16, 4)), dtype, 4);
    const Tensor x = torch::randn({2, 12, 16}, dtype);
    const Tensor want = naive_block(x, naive::params_of(*block), 4, 3, 4);
    torch::NoGradGuard no_grad;
    expect_close(block(x, 3, 4), want, tol, "X-ViT block");
  }
}

TEST(XViTBlock, GradientsMatchFiniteDifferences) {
  // float64, train mode (BN on batch statistics), loss = <block(x), R>.
  XViTBlock block = prepared(XViTBlock(XViTBlockOptions(8, 2)), torch::kDouble, 9);
  block->train();
  const Tensor x = torch::randn({2, 6, 8}, torch::kDouble).requires_grad_(true);
  const Tensor r = torch::randn({2, 6, 8}, torch::kDouble);
  const auto loss = [&] { return (block(x, 2, 3) * r).sum(); };
  std::vector<std::pair<std::string, Tensor>> checked = {{"input", x}};
  for (const char* name :
       {"attn.gamma", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "affine1.alpha",
        "affine1.beta", "norm1.weight", "affine2.alpha", "local_mp.conv1.weight",
        "local_mp.bn.weight", "norm3.weight", "mlp.fc1.weight", "affine3.beta"})
    checked.emplace_back(name, block->named_parameters()[name]);
  xdino::testing::expect_gradients_match(loss, checked);
}

TEST(XViTClassAttentionBlock, UpdatesOnlyClsAndGradientsMatch) {
  XViTClassAttentionBlock block =
      prepared(XViTClassAttentionBlock(XViTBlockOptions(8, 2)), torch::kDouble, 5);
  const Tensor x = torch::randn({2, 7, 8}, torch::kDouble).requires_grad_(true);
  Tensor attention;
  const Tensor y = block(x, &attention);
  EXPECT_TRUE(torch::equal(y.narrow(1, 1, 6), x.narrow(1, 1, 6)));
  EXPECT_EQ(attention.sizes(), (std::vector<int64_t>{2, 2, 7}));
  expect_close(attention.sum(-1), torch::ones({2, 2}, torch::kDouble), 1e-12, "softmax rows");
  const Tensor r = torch::randn({2, 7, 8}, torch::kDouble);
  xdino::testing::expect_gradients_match([&] { return (block(x) * r).sum(); },
                                         {{"input", x},
                                          {"affine1.alpha", block->affine1->alpha},
                                          {"attn.qkv.weight", block->attn->qkv->weight},
                                          {"mlp.fc2.bias", block->mlp->fc2->bias}});
}

TEST(XViT, ShapesAtP16AndP8AndNonSquareSizes) {
  for (int64_t patch : {16, 8}) {
    XViT model(tiny_xvit_config(patch));
    model.eval();
    torch::NoGradGuard no_grad;
    for (const auto& [H, W] : {std::pair{64, 96}, std::pair{50, 70}}) {
      const Tensor images = torch::randn({2, 3, H, W});
      const auto [rows, cols] = model.token_grid(H, W);
      EXPECT_EQ(rows, (H + patch - 1) / patch);
      EXPECT_EQ(cols, (W + patch - 1) / patch);
      const int64_t N = rows * cols;
      EXPECT_EQ(model.forward(images).sizes(), (std::vector<int64_t>{2, 32}));
      EXPECT_EQ(model.patch_tokens(images).sizes(), (std::vector<int64_t>{2, N, 32}));
      const Tensor attn = model.cls_attention(images, -1);
      EXPECT_EQ(attn.sizes(), (std::vector<int64_t>{2, 4, N + 1}));
      expect_close(attn.sum(-1), torch::ones({2, 4}), 1e-5, "class attention rows");
      const QKNorms norms = model.qk_norms(images, 0);
      EXPECT_EQ(norms.q_hat.sizes(), (std::vector<int64_t>{2, 4, N}));
      EXPECT_EQ(norms.q_raw.sizes(), (std::vector<int64_t>{2, 4, N}));
      const auto outs = model.block_outputs(images, {0, -1});
      ASSERT_EQ(outs.size(), 2u);
      EXPECT_EQ(outs[1].sizes(), (std::vector<int64_t>{2, N, 32}));
    }
    EXPECT_THROW(model.cls_attention(torch::randn({1, 3, 32, 32}), 2), xdino::UsageError);
    EXPECT_THROW(model.qk_norms(torch::randn({1, 3, 32, 32}), 5), xdino::UsageError);
  }
}

TEST(XViT, BadConfigurationsThrow) {
  XViTConfig c = tiny_xvit_config(16);
  c.patch_size = 2;
  EXPECT_THROW(XViT{c}, xdino::UsageError);
  c = tiny_xvit_config(16);
  c.num_heads = 5;
  EXPECT_THROW(XViT{c}, xdino::UsageError);
  c = tiny_xvit_config(16);
  c.depth = 0;
  EXPECT_THROW(XViT{c}, xdino::UsageError);
}

TEST(XViT, AttentionFlopsExactlyLinearInTokens) {
  // Four token counts (7x7, 14x14, 24x24, 48x48 grids): FLOPs / N is the same number, and
  // equals the per-token cost 4C^2 + 2Cd (qkv + proj + the two d x d products per head).
  const int64_t C = 384, h = 8, d = C / h;
  const double per_token = 4.0 * C * C + 2.0 * C * d;
  for (int64_t n : {49, 196, 576, 2304})
    EXPECT_EQ(xnorm_attention_flops(n, C, h), per_token * static_cast<double>(n)) << n;
  // And the whole model's FLOPs grow exactly linearly in N apart from the class attention,
  // whose single query is linear too: second differences vanish over equally spaced sizes.
  const XViTConfig s = *find_xvit_variant("xvit_small");
  const double f1 = xvit_flops(s, 256, 256), f2 = xvit_flops(s, 512, 256),
               f3 = xvit_flops(s, 768, 256);
  EXPECT_NEAR((f3 - f2) - (f2 - f1), 0.0, 1e-6 * f1);
}

TEST(XViT, VariantsMatchTheDocumentedTable) {
  struct Row {
    const char* name;
    int64_t dim, depth, heads, params;
    double gflops_224, gflops_384;
  };
  // The table of models/xvit.h (exact parameter counts; FLOPs to the printed digits).
  const Row rows[] = {{"xvit_tiny", 192, 20, 4, 10135976, 1.97, 5.79},
                      {"xvit_small", 384, 9, 8, 20525688, 3.74, 11.00},
                      {"xvit_medium", 384, 18, 8, 36599616, 6.95, 20.43},
                      {"xvit_base", 480, 20, 10, 62651780, 11.91, 34.99}};
  for (const Row& r : rows) {
    const auto model = create_backbone(r.name);
    EXPECT_EQ(model->embed_dim(), r.dim) << r.name;
    EXPECT_EQ(model->num_blocks(), r.depth) << r.name;
    EXPECT_EQ(model->num_heads(), r.heads) << r.name;
    EXPECT_EQ(model->num_parameters(), r.params) << r.name;
    EXPECT_NEAR(model->flops(224, 224) / 1e9, r.gflops_224, 0.005) << r.name;
    EXPECT_NEAR(model->flops(384, 384) / 1e9, r.gflops_384, 0.005) << r.name;
    // Within 5% of the paper's parameters and FLOPs.
    const XViTPublished pub = *xvit_published(r.name);
    EXPECT_NEAR(static_cast<double>(r.params) / 1e6 / pub.params_m, 1.0, 0.05) << r.name;
    EXPECT_NEAR(model->flops(224, 224) / 1e9 / pub.gflops_224, 1.0, 0.05) << r.name;
    if (pub.gflops_384) {
      EXPECT_NEAR(model->flops(384, 384) / 1e9 / *pub.gflops_384, 1.0, 0.05) << r.name;
    }
    const auto p8 = create_backbone(std::string(r.name) + "_p8");
    EXPECT_EQ(p8->patch_size(), 8);
  }
}

TEST(XViT, StateDictRoundTripByName) {
  const auto a = create_backbone("xvit_tiny");
  const auto b = create_backbone("xvit_tiny");
  const StateDict state = state_dict(*a);
  EXPECT_TRUE(state.contains("blocks.0.attn.gamma"));
  EXPECT_TRUE(state.contains("blocks.19.affine3.alpha"));
  EXPECT_TRUE(state.contains("cls_attn_blocks.1.affine2.beta"));
  const StateDict round = from_ivalue(to_ivalue(state));
  const LoadReport report = load_state_dict(*b, round, /*strict=*/true);
  EXPECT_EQ(report.loaded, static_cast<int64_t>(state.size()));
  a->eval();
  b->eval();
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({1, 3, 48, 64});
  EXPECT_TRUE(torch::equal(a->forward(x), b->forward(x)));
  // A checkpoint of another family does not load.
  const auto xcit = create_backbone("xcit_tiny_12_p16");
  EXPECT_THROW(load_state_dict(*xcit, state, true), xdino::Error);
}

#ifdef XDINO_TEST_XVIT_CLI
TEST(XViTCli, DinoTrainSmoke) {
  namespace fs = std::filesystem;
  const fs::path data = xdino::testing::fresh_dir("xvit_data");
  const fs::path out = xdino::testing::fresh_dir("xvit_out");
  xdino::testing::write_random_idx(data, 16);
  namespace cli = xdino::testing::cli;
  const auto r =
      xdino::testing::run_process(cli::concat({{xdino::testing::dino_binary()},
                                               cli::train(data, out, "xvit_tiny"),
                                               {"--out_dim", "32"},
                                               cli::multi_crop(32, 16, 1),
                                               {"--batch_size_per_gpu", "8"},
                                               cli::epochs(1, 0),
                                               {"--num_workers", "1", "--device", "cpu"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "checkpoint.pth"));
  EXPECT_NE(xdino::read_file(out / "config.ini").find("arch = xvit_tiny"), std::string::npos);
  const std::string log = xdino::read_file(out / "log.txt");
  EXPECT_NE(log.find("train_loss"), std::string::npos) << log;
  EXPECT_EQ(log.find("nan"), std::string::npos) << log;
  // The student checkpoint loads back into a fresh xvit_tiny by name.
  const auto model = create_backbone("xvit_tiny");
  EXPECT_NO_THROW(load_pretrained(*model, out / "checkpoint.pth", "student"));
  fs::remove_all(data);
  fs::remove_all(out);
}

TEST(XViTCli, InfoPrintsTheChosenTable) {
  const auto r = xdino::testing::run_process(
      {xdino::testing::dino_binary(), "info", "--arch", "xvit_small", "--image_size", "224"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("parameters: 20525688 (20.526M)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOPs: 3.74 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x-vit config: depth 9, 8 heads of 48 channels"), std::string::npos)
      << r.out;
  for (const char* name : {"xvit_tiny ", "xvit_small ", "xvit_medium ", "xvit_base "})
    EXPECT_NE(r.out.find(std::string("x-vit table: ") + name), std::string::npos) << name;
  EXPECT_NE(r.out.find("paper 20.5"), std::string::npos) << r.out;
}

TEST(XViTCli, VisualizeWritesClassAttentionAndQueryNormMaps) {
  namespace fs = std::filesystem;
  const fs::path out = xdino::testing::fresh_dir("xvit_visualize");
  const std::string image = xdino::testing::test_data_dir() + "/augment/photo_a.png";
  const auto r = xdino::testing::run_process({xdino::testing::dino_binary(), "visualize", "--arch",
                                              "xvit_tiny", "--image_path", image, "--image_size",
                                              "48", "64", "--output_dir", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"overview.png", "attn-head0.png", "attn-head3.png", "attn.npy", "qnorm-layer19-head3.png",
        "qnorm.npy", "qnorm-raw-layer19-head0.png", "knorm-raw-layer19-head3.png", "knorm_raw.npy"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  // XNorm has no normalised keys: no |k^| maps.
  EXPECT_FALSE(fs::exists(out / "knorm-layer19-head0.png"));
  EXPECT_FALSE(fs::exists(out / "knorm.npy"));
  fs::remove_all(out);
}

TEST(XViTCli, ReportNamesTheFamily) {
  EXPECT_EQ(xdino::eval::display_model_name("xvit_small", 16, 224), "X-ViT-S/16");
  EXPECT_EQ(xdino::eval::display_model_name("xvit_base_p8", 8, 224), "X-ViT-B/8");
  EXPECT_EQ(xdino::eval::display_model_name("xvit_tiny", 16, 384), "X-ViT-T/16\u2191384");
  EXPECT_EQ(xdino::eval::display_model_name("xcit_small_12_p16", 16, 224), "XCiT-S12/16");
}
#endif
