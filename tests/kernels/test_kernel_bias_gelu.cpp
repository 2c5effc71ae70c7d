// A Linear's bias + GELU as one op (kernels/bias_gelu.h), on the ISA this CPU runs (.ci/run's
// AVX2 phase runs it again with ATEN_CPU_CAPABILITY=avx2), against a float64 truth written
// element by element with std::erf and std::exp: widths that fill whole vectors and ones that
// leave tails, rows across the gradient's row blocks, values far into both tails of erf,
// forward and backward in float32 and float64, float32 held to a few times torch's own error,
// central differences in float64, the bias gradient independent of the thread count, what it
// refuses, and the MLP on kOps and kAuto (in a dtype the kernel refuses, bit for bit).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/compat.h"
#include "kernels/bias_gelu.h"
#include "kernels/cpu/isa.h"
#include "models/layers.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;

// {gelu(u), gelu'(u)} of u = h + bias, element by element in float64 from the definitions.
std::pair<Tensor, Tensor> bias_gelu_truth(const Tensor& h, const Tensor& bias) {
  const Tensor u = (h.to(torch::kDouble) + bias.to(torch::kDouble)).contiguous();
  Tensor y = torch::empty_like(u), slope = torch::empty_like(u);
  const double* up = u.data_ptr<double>();
  double* yp = y.data_ptr<double>();
  double* sp = slope.data_ptr<double>();
  for (int64_t i = 0; i < u.numel(); ++i) {
    const double cdf = 0.5 * std::erfc(-up[i] / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * up[i] * up[i]) / std::sqrt(2.0 * M_PI);
    yp[i] = up[i] * cdf;
    sp[i] = cdf + up[i] * pdf;
  }
  return {y, slope};
}

double max_abs(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

struct GeluCase {
  std::string name;
  std::vector<int64_t> shape;
};

const std::vector<GeluCase> kGeluCases = {
    {"main job's MLP, one replica's rows (XCiT-N4/4)", {2432, 512}},
    {"tails: 17 wide, 130 rows across three row blocks", {130, 17}},
    {"one row of 5", {1, 5}},
    {"(B, N, C) of 33", {3, 7, 33}},
};

class KernelBiasGelu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cpu_isa() == kernels::Isa::kNone)
      GTEST_SKIP() << "this CPU (or ATEN_CPU_CAPABILITY=default) runs no AVX2: the MLP takes "
                      "torch's GELU, which the other model tests cover";
    std::printf("bias + GELU kernel: %s\n", kernels::isa_name(kernels::cpu_isa()));
  }
};

TEST_F(KernelBiasGelu, MatchesTheTruthForwardAndBackward) {
  for (const GeluCase& c : kGeluCases) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(c.name + ", " + c10::toString(dtype));
      torch::manual_seed(11);
      const auto on = torch::TensorOptions().dtype(dtype);
      // Spread over [-8, 8] and beyond: both flat tails of erf and the clamp at |u / sqrt 2| = 4.
      const Tensor h0 = torch::randn(c.shape, on) * 3;
      const Tensor b0 = torch::randn({c.shape.back()}, on);
      const Tensor dout = torch::randn(c.shape, on);
      ASSERT_TRUE(kernels::bias_gelu_applies(h0, b0));
      const Tensor h = h0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
      const Tensor y = kernels::bias_gelu(h, b);
      (y * dout).sum().backward();
      const auto [want_y, slope] = bias_gelu_truth(h0, b0);
      const Tensor want_dh = dout.to(torch::kDouble) * slope;
      const Tensor want_db = want_dh.reshape({-1, c.shape.back()}).sum(0);
      EXPECT_EQ(y.scalar_type(), dtype);
      const double bound = dtype == torch::kFloat ? 1e-12 : 1e-28;
      EXPECT_LE(normalised_mse(y, want_y), bound) << "y";
      EXPECT_LE(normalised_mse(h.grad(), want_dh), bound) << "dh";
      EXPECT_LE(normalised_mse(b.grad(), want_db), bound) << "dbias";
      if (dtype != torch::kFloat) continue;
      // torch's own float32 GELU and its gradient from the same inputs: ours within 4 times its
      // largest error (its erf is within an ulp; ours a few, scaled by u / 2).
      const Tensor th = h0.clone().requires_grad_(true), tb = b0.clone().requires_grad_(true);
      const Tensor ty = torch::gelu(th + tb);
      (ty * dout).sum().backward();
      const double floor = 1e-7;  // where torch's error is 0 in the worst place
      EXPECT_LE(max_abs(y, want_y), 4 * std::max(max_abs(ty, want_y), floor)) << "y";
      EXPECT_LE(max_abs(h.grad(), want_dh), 4 * std::max(max_abs(th.grad(), want_dh), floor))
          << "dh";
    }
  }
}

// A wrong arithmetic fails the bounds above: the tanh GELU forward, the backward without the
// density term.
TEST_F(KernelBiasGelu, TheBoundsSeeAWrongGelu) {
  torch::manual_seed(12);
  const Tensor h = torch::randn({64, 48}) * 3, b = torch::randn({48}),
               dout = torch::randn({64, 48});
  const auto [want_y, slope] = bias_gelu_truth(h, b);
  EXPECT_GT(normalised_mse(torch::gelu(h + b, "tanh"), want_y), 1e-12);
  const Tensor u = (h + b).to(torch::kDouble);
  const Tensor cdf_only = dout.to(torch::kDouble) * 0.5 * (1 + torch::erf(u / std::sqrt(2.0)));
  EXPECT_GT(normalised_mse(cdf_only, dout.to(torch::kDouble) * slope), 1e-12);
}

TEST_F(KernelBiasGelu, GradientMatchesFiniteDifferencesInFloat64) {
  torch::manual_seed(13);
  const auto on = torch::TensorOptions().dtype(torch::kDouble);
  const Tensor h = (torch::randn({70, 13}, on) * 2).requires_grad_(true);
  const Tensor b = torch::randn({13}, on).requires_grad_(true);
  const Tensor w = torch::randn({70, 13}, on);
  xdino::testing::GradCheckOptions o;
  o.entries_per_tensor = 40;
  o.tolerance = 1e-7;
  xdino::testing::expect_gradients_match([&] { return (kernels::bias_gelu(h, b) * w).sum(); },
                                         {{"h", h}, {"bias", b}}, o);
}

// The bias gradient is summed over fixed row blocks in a fixed order: the same bits on one
// thread and on two (the replicas and the digest rely on a step not following the core count).
TEST_F(KernelBiasGelu, TheBiasGradientDoesNotFollowTheThreadCount) {
  torch::manual_seed(14);
  const Tensor h0 = torch::randn({1000, 96}), b0 = torch::randn({96}),
               dout = torch::randn({1000, 96});
  const int threads_before = at::get_num_threads();
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    const Tensor h = h0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    const Tensor y = kernels::bias_gelu(h, b);
    (y * dout).sum().backward();
    return std::vector<Tensor>{y, h.grad(), b.grad()};
  };
  const auto one = run(1), two = run(2);
  at::set_num_threads(threads_before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

TEST_F(KernelBiasGelu, RefusesWhatItDoesNotTakeAndComputesOnlyAskedGradients) {
  const Tensor h = torch::randn({6, 8}), b = torch::randn({8});
  EXPECT_TRUE(kernels::bias_gelu_applies(h, b));
  EXPECT_FALSE(kernels::bias_gelu_applies(torch::randn({8, 6}).t(), b));  // not contiguous
  EXPECT_FALSE(kernels::bias_gelu_applies(h.to(torch::kBFloat16), b));    // autocast's dtype
  EXPECT_FALSE(kernels::bias_gelu_applies(h, b.to(torch::kDouble)));      // mixed dtypes
  EXPECT_FALSE(kernels::bias_gelu_applies(h, torch::randn({6})));         // wrong width
  EXPECT_FALSE(kernels::bias_gelu_applies(h, torch::randn({1, 8})));      // not 1-D
  EXPECT_FALSE(kernels::bias_gelu_applies(torch::randn({6, 0}), torch::randn({0})));  // empty
  // Asked of a Linear's input before its product: x (6, 4), weight (8, 4), bias (8).
  const Tensor x = torch::randn({6, 4}), w = torch::randn({8, 4});
  EXPECT_TRUE(kernels::bias_gelu_takes_linear(x, w, b));
  EXPECT_TRUE(kernels::bias_gelu_takes_linear(torch::randn({4, 6}).t(), w, b));  // any layout
  EXPECT_FALSE(kernels::bias_gelu_takes_linear(x.to(torch::kBFloat16), w.to(torch::kBFloat16),
                                               b.to(torch::kBFloat16)));
  EXPECT_FALSE(kernels::bias_gelu_takes_linear(x, w.to(torch::kDouble), b));  // mixed dtypes
  EXPECT_FALSE(kernels::bias_gelu_takes_linear(x, w.t(), b));                 // wrong width
  EXPECT_FALSE(kernels::bias_gelu_takes_linear(x, w, torch::randn({7})));
  EXPECT_FALSE(kernels::bias_gelu_takes_linear(x, w, Tensor()));  // a Linear without bias
  try {
    (void)kernels::bias_gelu(h.to(torch::kBFloat16), b);
    ADD_FAILURE() << "a bfloat16 h was taken";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU bias + GELU"), std::string::npos) << e.what();
  }
  const Tensor bq = b.clone().requires_grad_(true);
  kernels::bias_gelu(h, bq).sum().backward();
  EXPECT_TRUE(bq.grad().defined());
  EXPECT_FALSE(kernels::bias_gelu(h, b).requires_grad());
}

// The MLP on kAuto (fc1's product, then the kernel) against kOps (torch's Linear and GELU),
// forward and backward; under autocast kAuto keeps torch's path.
TEST_F(KernelBiasGelu, MlpModulesOnEachPathAgree) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    Mlp mlp = prepared(Mlp(64, 256), dtype, 15);
    const Tensor x0 = torch::randn({2, 49, 64}).to(dtype), dy = torch::randn({2, 49, 64}).to(dtype);
    auto run = [&](LayerKernels kernels) {
      mlp->zero_grad();
      const Tensor x = x0.clone().requires_grad_(true);
      const Tensor y = mlp(x, kernels);
      (y * dy).sum().backward();
      return std::vector<Tensor>{y, x.grad(), mlp->fc1->weight.grad(), mlp->fc1->bias.grad(),
                                 mlp->fc2->weight.grad()};
    };
    const auto a = run(LayerKernels::kOps), b = run(LayerKernels::kAuto);
    const double bound = dtype == torch::kFloat ? 1e-11 : 1e-26;
    const char* names[] = {"y", "dx", "fc1.weight grad", "fc1.bias grad", "fc2.weight grad"};
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(normalised_mse(b[i], a[i]), bound) << names[i];
  }
  // The bfloat16 product is oneDNN's, which .ci/run's AVX2 phase caps (cpu_bfloat16.h).
  if (!xdino::testing::cpu_bfloat16_runs()) {
    std::printf(
        "left out: the MLP in bfloat16 and under bfloat16 autocast (no bfloat16 "
        "product here)\n");
    return;
  }
  // A dtype the kernel does not take: kAuto is torch's Linear + GELU op for op (fc1 is not
  // split from its bias, whose separate add would round differently), bit for bit.
  {
    Mlp bf16 = prepared(Mlp(16, 64), torch::kBFloat16, 17);
    const Tensor xb = torch::randn({5, 16}).to(torch::kBFloat16);
    EXPECT_TRUE(torch::equal(bf16(xb, LayerKernels::kAuto), bf16(xb, LayerKernels::kOps)))
        << "kAuto on a bfloat16 MLP must be torch's path";
  }
  Mlp mlp = prepared(Mlp(16, 64), torch::kFloat, 16);
  const Tensor x = torch::randn({3, 16});
  Tensor ops, aut;
  {
    compat::AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
    ops = mlp(x, LayerKernels::kOps);
    aut = mlp(x, LayerKernels::kAuto);
  }
  EXPECT_EQ(aut.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(ops, aut)) << "kAuto under autocast must be torch's path";
}

}  // namespace
}  // namespace xdino::models
