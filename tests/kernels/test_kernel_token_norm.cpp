// The fused token norm's autograd op (kernels/token_norm.h) against models::token_norm, its op
// path, on every device of this build: the ATen reference backend on the CPU (every build), the
// CUDA kernel on a card (docs/tiers.md, "A kernel"). XCA's own strided views of a qkv output
// and odd shapes, in every dtype, forward and backward; the all-zero vector; float64 central
// differences; requires_grad off; and an XCA module on each path.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "core/compat.h"
#include "kernels/layer_norm.h"
#include "kernels/token_norm.h"
#include "models/xcit_layers.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::accumulation;
using xdino::testing::expect_close;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;
namespace naive = xdino::testing::naive;

// q of XCA's op path: (B, h, d, N) from a (B, N, 3C) qkv output, tokens 3C apart.
Tensor xca_view(const Tensor& qkv, int64_t heads) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.view({B, N, 3, heads, C / heads}).unbind(2)[0].permute({0, 2, 3, 1});
}

TEST(KernelTokenNorm, MatchesTheOpPathOnXcaViewsAndOddShapes) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    torch::manual_seed(0);
    // A buffer and the view of it whose token norms are taken: XCA's strided q views of a qkv
    // output, and plain shapes. Gradients are compared on the buffer.
    struct Input {
      std::string name;
      Tensor buffer;
      std::function<Tensor(const Tensor&)> view;
    };
    const auto whole = [](const Tensor& t) { return t; };
    const std::vector<Input> inputs = {
        {"XCiT-S12 global crop", torch::randn({2, 196, 3 * 384}),
         [](const Tensor& t) { return xca_view(t, 8); }},
        {"XCiT-N12 local crop", torch::randn({3, 36, 3 * 128}),
         [](const Tensor& t) { return xca_view(t, 4); }},
        {"contiguous (B, h, d, N)", torch::randn({2, 3, 5, 7}), whole},
        {"3-d", torch::randn({4, 6, 33}), whole},
        {"1-d", torch::randn({65}), whole},
        {"one token", torch::randn({2, 3, 4, 1}), whole},
        {"all-zero rows", torch::randn({2, 4, 9}) * (torch::arange(4) % 2).view({1, 4, 1}), whole},
    };
    // float16/bfloat16: t itself is rounded alike on both paths; the sums are float32 on both.
    const std::vector<std::pair<torch::ScalarType, double>> dtypes = {{torch::kFloat, 1e-12},
                                                                      {torch::kDouble, 1e-24},
                                                                      {torch::kHalf, 1e-6},
                                                                      {torch::kBFloat16, 3e-5}};
    for (const auto& input : inputs) {
      for (const auto& [dtype, bound] : dtypes) {
        SCOPED_TRACE(input.name + ", " + c10::toString(dtype) + " on " + device.str());
        const Tensor buffer = input.buffer.to(device, dtype);
        const auto acc = accumulation(dtype);
        ASSERT_TRUE(kernels::token_norm_applies(input.view(buffer), acc));
        const Tensor dn = torch::randn(input.view(buffer).sum(-1, true).sizes(),
                                       torch::TensorOptions().dtype(acc).device(device));
        auto run = [&](bool fused) {
          const Tensor leaf = buffer.clone().requires_grad_(true);
          const Tensor t = input.view(leaf);
          const Tensor n = fused ? kernels::token_norm(t) : token_norm(t, acc);
          EXPECT_EQ(n.scalar_type(), acc);
          (n * dn).sum().backward();
          EXPECT_EQ(leaf.grad().scalar_type(), dtype);
          return std::vector<Tensor>{n, leaf.grad()};
        };
        const auto fused = run(true), ops = run(false);
        EXPECT_LE(normalised_mse(fused[0], ops[0]), bound) << "n";
        EXPECT_LE(normalised_mse(fused[1], ops[1]), bound) << "dt";
        EXPECT_TRUE(fused[1].isfinite().all().item<bool>());
      }
    }
  }
}

TEST(KernelTokenNorm, StridedInputZeroVectorAndNoGradient) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(1);
    const auto on = torch::TensorOptions().dtype(torch::kDouble).device(device);
    // The view itself, not a copy: the gradient must land in the qkv buffer's q part only.
    const Tensor qkv = torch::randn({2, 10, 3 * 12}, on).requires_grad_(true);
    const Tensor q = xca_view(qkv, 3);
    const Tensor n = kernels::token_norm(q);
    EXPECT_TRUE(torch::allclose(n, q.norm(2, {-1}, true), 1e-12, 0));
    n.sum().backward();
    const Tensor parts = qkv.grad().view({2, 10, 3, 12});
    EXPECT_TRUE(torch::allclose(parts.select(2, 0).permute({0, 2, 1}).reshape({2, 3, 4, 10}),
                                q.detach() / q.detach().norm(2, {-1}, true), 1e-12, 0));
    EXPECT_EQ(parts.select(2, 1).abs().max().item<double>(), 0.0);
    EXPECT_EQ(parts.select(2, 2).abs().max().item<double>(), 0.0);
    const Tensor zero = torch::zeros({1, 5}, on).requires_grad_(true);
    const Tensor nz = kernels::token_norm(zero);
    EXPECT_EQ(nz.item<double>(), 1e-12);
    nz.sum().backward();
    EXPECT_EQ(zero.grad().abs().max().item<double>(), 0.0);
    // No requires_grad, or no grad mode: the norm alone, no graph.
    EXPECT_FALSE(kernels::token_norm(torch::randn({3, 4}, on)).requires_grad());
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(kernels::token_norm(qkv.view({2, 10, 36})).requires_grad());
  }
}

TEST(KernelTokenNorm, GradientMatchesFiniteDifferencesInFloat64) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(2);
    const auto on = torch::TensorOptions().dtype(torch::kDouble).device(device);
    const Tensor qkv = torch::randn({2, 9, 3 * 8}, on).requires_grad_(true);
    const Tensor w = torch::randn({2, 2, 4, 1}, on);
    xdino::testing::GradCheckOptions o;
    o.entries_per_tensor = 40;
    o.tolerance = 1e-7;
    xdino::testing::expect_gradients_match(
        [&] { return (kernels::token_norm(xca_view(qkv, 2)) * w).sum(); }, {{"qkv", qkv}}, o);
  }
}

// XCA on the op path and on kFused: the naive float64 XCA on the CPU, and each other within
// rounding in every dtype, on both attention paths, forward and backward.
TEST(KernelTokenNorm, XcaOnEachPathMatchesTheOpPath) {
  {
    XCA fused = prepared(XCA(32, 4, XcaAttention::kOps, LayerKernels::kFused), torch::kDouble, 3);
    torch::NoGradGuard no_grad;
    const Tensor x = torch::randn({2, 9, 32}, torch::kDouble);
    expect_close(fused(x), naive::xca(x, naive::params_of(*fused), "", 4), 1e-6,
                 "kFused XCA against the naive XCA");
  }
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    torch::manual_seed(4);
#if XDINO_TORCH_AT_LEAST(2, 1)
    const std::vector<XcaAttention> paths = {XcaAttention::kOps, XcaAttention::kSdpa};
#else
    const std::vector<XcaAttention> paths = {XcaAttention::kOps};  // no SDPA before 2.1
#endif
    for (const auto path : paths) {
      for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
        if (device.is_cpu() && dtype == torch::kHalf) continue;  // CPU matmuls lack float16
        if (device.is_cpu() && dtype == torch::kBFloat16 && !xdino::testing::cpu_bfloat16_runs())
          continue;
        SCOPED_TRACE(std::string(path == XcaAttention::kOps ? "ops" : "sdpa") + ", " +
                     c10::toString(dtype) + " on " + device.str());
        // The same seeded weights (a temperature away from 1 among them).
        XCA ops = prepared(XCA(64, 4, path, LayerKernels::kOps), torch::kFloat, 5);
        XCA fused = prepared(XCA(64, 4, path, LayerKernels::kFused), torch::kFloat, 5);
        ops->to(device, dtype);
        fused->to(device, dtype);
        const auto on = torch::TensorOptions().device(device);
        const Tensor x0 = torch::randn({2, 49, 64}, on).to(dtype);
        const Tensor dy = torch::randn({2, 49, 64}, on).to(dtype);
        auto run = [&](XCA& m) {
          m->zero_grad();
          const Tensor x = x0.clone().requires_grad_(true);
          const Tensor y = m(x);
          (y.to(torch::kFloat) * dy.to(torch::kFloat)).sum().backward();
          return std::vector<Tensor>{y, x.grad(), m->temperature.grad(), m->qkv->weight.grad()};
        };
        const auto a = run(ops), b = run(fused);
        const double bound = dtype == torch::kFloat ? 1e-10 : dtype == torch::kHalf ? 1e-5 : 1e-4;
        const char* names[] = {"y", "dx", "temperature grad", "qkv.weight grad"};
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_LE(normalised_mse(b[i], a[i]), bound) << names[i];
      }
    }
  }
}

}  // namespace
}  // namespace xdino::models
