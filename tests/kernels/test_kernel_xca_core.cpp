// XCA's attention core as one op (kernels/xca_core.h), against XCA's op path and a float64
// truth written from the formula, on the ISA this CPU runs (kernels/cpu/isa.h; .ci/run's
// AVX2 phase runs this test again with ATEN_CPU_CAPABILITY=avx2): head widths that fill whole
// vectors and ones that leave tails (d = 5, 12), one token and many, an all-zero channel,
// forward and backward in float32 and float64, central differences in float64, the inputs it
// refuses, and XCA modules on kOps and kAuto.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/isa.h"
#include "kernels/xca_core.h"
#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;
namespace naive = xdino::testing::naive;

// The formula, in float64 ATen ops and another order than both paths: q and k normalised first
// (F.normalize), then the products.
Tensor xca_truth(const Tensor& qkv, const Tensor& temperature, int64_t heads) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3, d = C / heads;
  const Tensor parts = qkv.to(torch::kDouble).view({B, N, 3, heads, d}).permute({2, 0, 3, 4, 1});
  const auto normalise = [](const Tensor& t) {
    return t / t.square().sum(-1, true).clamp_min(1e-24).sqrt();
  };
  const Tensor attn =
      torch::softmax(torch::matmul(normalise(parts[0]), normalise(parts[1]).transpose(-2, -1)) *
                         temperature.to(torch::kDouble).view({1, heads, 1, 1}),
                     -1);
  return torch::matmul(attn, parts[2]).permute({0, 3, 1, 2}).reshape({B, N, C});
}

struct XcaCase {
  std::string name;
  int64_t batch, tokens, heads, head_dim;
};

const std::vector<XcaCase> kXcaCases = {
    {"main job, global crop (XCiT-N4/4)", 3, 49, 4, 32},
    {"main job, local crop", 4, 9, 4, 32},
    {"XCiT-S12 head width", 2, 16, 2, 48},
    {"one token", 2, 1, 3, 8},
    {"tails: d = 12", 2, 7, 2, 12},
    {"odd: d = 5", 3, 6, 3, 5},
};

class KernelXcaCore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cpu_isa() == kernels::Isa::kNone)
      GTEST_SKIP() << "this CPU (or ATEN_CPU_CAPABILITY=default) runs no AVX2: XCA takes its op "
                      "path, which the other XCA tests cover";
    std::printf("XCA core kernel: %s\n", kernels::isa_name(kernels::cpu_isa()));
  }
};

TEST_F(KernelXcaCore, MatchesTheTruthForwardAndBackward) {
  for (const XcaCase& c : kXcaCases) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(c.name + ", " + c10::toString(dtype));
      torch::manual_seed(7);
      const auto on = torch::TensorOptions().dtype(dtype);
      const Tensor qkv0 = torch::randn({c.batch, c.tokens, 3 * c.heads * c.head_dim}, on);
      const Tensor t0 = torch::rand({c.heads, 1, 1}, on) + 0.5;
      const Tensor dout = torch::randn({c.batch, c.tokens, c.heads * c.head_dim}, on);
      ASSERT_TRUE(kernels::xca_core_applies(qkv0, t0, c.heads));
      auto run = [&](bool kernel) {
        const Tensor qkv = qkv0.to(kernel ? dtype : torch::kDouble).clone().requires_grad_(true);
        const Tensor t = t0.to(kernel ? dtype : torch::kDouble).clone().requires_grad_(true);
        const Tensor out = kernel ? kernels::xca_core(qkv, t, c.heads) : xca_truth(qkv, t, c.heads);
        (out * dout.to(out.scalar_type())).sum().backward();
        return std::vector<Tensor>{out, qkv.grad(), t.grad()};
      };
      const auto got = run(true), want = run(false);
      EXPECT_EQ(got[0].scalar_type(), dtype);
      // Bounds: float32 rounding of sums over N and d (~1e-7 relative, squared); float64's.
      const double bound = dtype == torch::kFloat ? 1e-11 : 1e-26;
      const char* names[] = {"out", "dqkv", "dtemperature"};
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(normalised_mse(got[i], want[i]), bound) << names[i];
    }
  }
}

// A wrong arithmetic fails the bounds above: the softmax's backward without its row term.
TEST_F(KernelXcaCore, TheBoundsSeeAMissingTerm) {
  torch::manual_seed(8);
  const Tensor qkv = torch::randn({2, 9, 3 * 64}).requires_grad_(true);
  const Tensor t = torch::ones({2, 1, 1});
  const Tensor dout = torch::randn({2, 9, 64});
  (kernels::xca_core(qkv, t, 2) * dout).sum().backward();
  // The truth with the softmax's Jacobian replaced by its diagonal.
  const Tensor q2 = qkv.detach().clone().requires_grad_(true);
  const int64_t B = 2, N = 9, C = 64, d = 32;
  const Tensor parts = q2.view({B, N, 3, 2, d}).permute({2, 0, 3, 4, 1});
  const auto normalise = [](const Tensor& x) { return x / x.square().sum(-1, true).sqrt(); };
  const Tensor logits = torch::matmul(normalise(parts[0]), normalise(parts[1]).transpose(-2, -1));
  const Tensor e = logits.exp();
  const Tensor attn = e / e.sum(-1, true).detach();  // drops the normaliser's gradient
  (torch::matmul(attn, parts[2]).permute({0, 3, 1, 2}).reshape({B, N, C}) * dout).sum().backward();
  EXPECT_GT(normalised_mse(qkv.grad(), q2.grad()), 1e-6);
}

TEST_F(KernelXcaCore, AZeroChannelGetsTheOpPathsGradient) {
  torch::manual_seed(9);
  Tensor qkv0 = torch::randn({2, 7, 3 * 16}, torch::kDouble);
  qkv0.select(2, 3).zero_();       // q's channel 3 of head 0, every token
  qkv0.select(2, 16 + 9).zero_();  // k's channel 9 of head 1
  const Tensor t = torch::full({2, 1, 1}, 1.7, torch::kDouble);
  const Tensor dout = torch::randn({2, 7, 16}, torch::kDouble);
  const Tensor a = qkv0.clone().requires_grad_(true), b = qkv0.clone().requires_grad_(true);
  (kernels::xca_core(a, t, 2) * dout).sum().backward();
  (xca_truth(b, t, 2) * dout).sum().backward();
  EXPECT_TRUE(a.grad().isfinite().all().item<bool>());
  EXPECT_LE(normalised_mse(a.grad(), b.grad()), 1e-24);
}

TEST_F(KernelXcaCore, GradientMatchesFiniteDifferencesInFloat64) {
  torch::manual_seed(10);
  const auto on = torch::TensorOptions().dtype(torch::kDouble);
  const Tensor qkv = torch::randn({2, 5, 3 * 12}, on).requires_grad_(true);
  const Tensor t = (torch::rand({3, 1, 1}, on) + 0.5).requires_grad_(true);
  const Tensor w = torch::randn({2, 5, 12}, on);
  xdino::testing::GradCheckOptions o;
  o.entries_per_tensor = 60;
  o.tolerance = 1e-7;
  xdino::testing::expect_gradients_match([&] { return (kernels::xca_core(qkv, t, 3) * w).sum(); },
                                         {{"qkv", qkv}, {"temperature", t}}, o);
}

TEST_F(KernelXcaCore, RefusesWhatItDoesNotTakeAndComputesOnlyAskedGradients) {
  const Tensor qkv = torch::randn({2, 5, 24});
  const Tensor t = torch::ones({2, 1, 1});
  EXPECT_TRUE(kernels::xca_core_applies(qkv, t, 2));
  EXPECT_FALSE(kernels::xca_core_applies(qkv.transpose(0, 1), t, 2));       // not contiguous
  EXPECT_FALSE(kernels::xca_core_applies(qkv.to(torch::kBFloat16), t, 2));  // autocast's dtype
  EXPECT_FALSE(kernels::xca_core_applies(qkv, t.to(torch::kDouble), 2));    // mixed dtypes
  EXPECT_FALSE(kernels::xca_core_applies(qkv, t, 3));                       // 24 = 3 x 8, 8 % 3
  EXPECT_FALSE(kernels::xca_core_applies(qkv, torch::ones({3, 1, 1}), 2));  // temperatures
  EXPECT_FALSE(kernels::xca_core_applies(qkv.view({10, 24}), t, 2));        // not (B, N, 3C)
  try {
    (void)kernels::xca_core(qkv.to(torch::kBFloat16), t, 2);
    ADD_FAILURE() << "a bfloat16 qkv was taken";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU XCA core"), std::string::npos) << e.what();
  }
  // Gradient only for what asked for one; no graph without requires_grad.
  const Tensor tq = torch::ones({2, 1, 1}).requires_grad_(true);
  (kernels::xca_core(qkv, tq, 2)).sum().backward();
  EXPECT_TRUE(tq.grad().defined());
  EXPECT_FALSE(kernels::xca_core(qkv, t, 2).requires_grad());
}

// XCA on kAuto (the kernel on the CPU) against kOps and the naive float64 XCA, forward and
// backward, with the temperature away from 1.
TEST_F(KernelXcaCore, XcaModulesOnEachPathAgree) {
  {
    XCA kernel = prepared(XCA(32, 4, XcaAttention::kOps, LayerKernels::kAuto), torch::kDouble, 3);
    torch::NoGradGuard no_grad;
    const Tensor x = torch::randn({2, 9, 32}, torch::kDouble);
    expect_close(kernel(x), naive::xca(x, naive::params_of(*kernel), "", 4), 1e-10,
                 "kAuto XCA against the naive XCA");
  }
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    XCA ops = prepared(XCA(64, 4, XcaAttention::kOps, LayerKernels::kOps), dtype, 5);
    XCA kernel = prepared(XCA(64, 4, XcaAttention::kOps, LayerKernels::kAuto), dtype, 5);
    const Tensor x0 = torch::randn({2, 49, 64}).to(dtype), dy = torch::randn({2, 49, 64}).to(dtype);
    auto run = [&](XCA& m) {
      m->zero_grad();
      const Tensor x = x0.clone().requires_grad_(true);
      (m(x) * dy).sum().backward();
      return std::vector<Tensor>{m(x0), x.grad(), m->temperature.grad(), m->qkv->weight.grad()};
    };
    const auto a = run(ops), b = run(kernel);
    const double bound = dtype == torch::kFloat ? 1e-10 : 1e-24;
    const char* names[] = {"y", "dx", "temperature grad", "qkv.weight grad"};
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(normalised_mse(b[i], a[i]), bound) << names[i];
  }
}

}  // namespace
}  // namespace xdino::models
