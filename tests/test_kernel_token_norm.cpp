// kernels/cuda's token norm against models::token_norm, its op path (docs/tiers.md, "A kernel"):
// XCA's own strided views of a qkv output and odd shapes, in every dtype, forward and backward,
// the all-zero vector, float64 central differences, and an XCA module on each path. The CUDA
// cases skip, naming why, without a card; off CUDA, kFused must be the op path bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"
#include "tests/support/require.h"
#ifdef XDINO_WITH_CUDA_KERNELS
#include "kernels/cuda/token_norm_function.h"
#endif

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;
namespace naive = xdino::testing::naive;

#ifdef XDINO_WITH_CUDA_KERNELS
// Only the kernel's own cases use these two; the build without kernels has just the XCA case.
torch::ScalarType accumulation(torch::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// q of XCA's op path: (B, h, d, N) from a (B, N, 3C) qkv output, tokens 3C apart.
Tensor xca_view(const Tensor& qkv, int64_t heads) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.view({B, N, 3, heads, C / heads}).unbind(2)[0].permute({0, 2, 3, 1});
}

TEST(KernelTokenNorm, MatchesTheOpPathOnXcaViewsAndOddShapes) {
  XDINO_SKIP_WITHOUT_CUDA();
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
      SCOPED_TRACE(input.name + ", " + c10::toString(dtype));
      const Tensor buffer = input.buffer.to(dtype).to(torch::kCUDA);
      const auto acc = accumulation(dtype);
      ASSERT_TRUE(xdino::kernels::token_norm_applies(input.view(buffer), acc));
      const Tensor dn = torch::randn(input.view(buffer).sum(-1, true).sizes(),
                                     torch::TensorOptions().dtype(acc).device(torch::kCUDA));
      auto run = [&](bool kernel) {
        const Tensor leaf = buffer.clone().requires_grad_(true);
        const Tensor t = input.view(leaf);
        const Tensor n = kernel ? xdino::kernels::token_norm(t) : token_norm(t, acc);
        EXPECT_EQ(n.scalar_type(), acc);
        (n * dn).sum().backward();
        EXPECT_EQ(leaf.grad().scalar_type(), dtype);
        return std::vector<Tensor>{n, leaf.grad()};
      };
      const auto kernel = run(true), ops = run(false);
      EXPECT_LE(normalised_mse(kernel[0], ops[0]), bound) << "n";
      EXPECT_LE(normalised_mse(kernel[1], ops[1]), bound) << "dt";
      EXPECT_TRUE(kernel[1].isfinite().all().item<bool>());
    }
  }
}

TEST(KernelTokenNorm, StridedInputAndZeroVector) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(1);
  const auto on_cuda = torch::TensorOptions().dtype(torch::kDouble).device(torch::kCUDA);
  // The view itself, not a copy: the gradient must land in the qkv buffer's q part only.
  const Tensor qkv = torch::randn({2, 10, 3 * 12}, on_cuda).requires_grad_(true);
  const Tensor q = xca_view(qkv, 3);
  const Tensor n = xdino::kernels::token_norm(q);
  EXPECT_TRUE(torch::allclose(n, q.norm(2, {-1}, true), 1e-12, 0));
  n.sum().backward();
  const Tensor parts = qkv.grad().view({2, 10, 3, 12});
  EXPECT_TRUE(torch::allclose(parts.select(2, 0).permute({0, 2, 1}).reshape({2, 3, 4, 10}),
                              q.detach() / q.detach().norm(2, {-1}, true), 1e-12, 0));
  EXPECT_EQ(parts.select(2, 1).abs().max().item<double>(), 0.0);
  EXPECT_EQ(parts.select(2, 2).abs().max().item<double>(), 0.0);
  const Tensor zero = torch::zeros({1, 5}, on_cuda).requires_grad_(true);
  const Tensor nz = xdino::kernels::token_norm(zero);
  EXPECT_EQ(nz.item<double>(), 1e-12);
  nz.sum().backward();
  EXPECT_EQ(zero.grad().abs().max().item<double>(), 0.0);
}

TEST(KernelTokenNorm, GradientMatchesFiniteDifferencesInFloat64) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(2);
  const auto on_cuda = torch::TensorOptions().dtype(torch::kDouble).device(torch::kCUDA);
  const Tensor qkv = torch::randn({2, 9, 3 * 8}, on_cuda).requires_grad_(true);
  const Tensor w = torch::randn({2, 2, 4, 1}, on_cuda);
  xdino::testing::GradCheckOptions o;
  o.entries_per_tensor = 40;
  o.tolerance = 1e-7;
  xdino::testing::expect_gradients_match(
      [&] { return (xdino::kernels::token_norm(xca_view(qkv, 2)) * w).sum(); }, {{"qkv", qkv}}, o);
}
#endif

// Off CUDA kFused is the op path: XCA as the naive float64 reference computes it, and the op
// path's own result bit for bit.
TEST(KernelTokenNorm, XcaOffCudaIsTheOpPath) {
  XCA ops = prepared(XCA(32, 4, XcaAttention::kOps, LayerKernels::kOps), torch::kDouble, 3);
  XCA fused = prepared(XCA(32, 4, XcaAttention::kOps, LayerKernels::kFused), torch::kDouble, 3);
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({2, 9, 32}, torch::kDouble);
  expect_close(fused(x), naive::xca(x, naive::params_of(*fused), "", 4), 1e-6,
               "kFused XCA on the CPU against the naive XCA");
  EXPECT_TRUE(torch::equal(ops(x), fused(x)));
}

TEST(KernelTokenNorm, XcaOnCudaMatchesTheOpPath) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(4);
  const torch::Device cuda(torch::kCUDA);
  for (const auto path : {XcaAttention::kOps, XcaAttention::kSdpa}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      SCOPED_TRACE(std::string(path == XcaAttention::kOps ? "ops" : "sdpa") + ", " +
                   c10::toString(dtype));
      // The same seeded weights (a temperature away from 1 among them).
      XCA ops = prepared(XCA(64, 4, path, LayerKernels::kOps), torch::kFloat, 5);
      XCA fused = prepared(XCA(64, 4, path, LayerKernels::kFused), torch::kFloat, 5);
      ops->to(cuda, dtype);
      fused->to(cuda, dtype);
      const Tensor x0 = torch::randn({2, 49, 64}, torch::TensorOptions().device(cuda)).to(dtype);
      const Tensor dy = torch::randn({2, 49, 64}, torch::TensorOptions().device(cuda)).to(dtype);
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

}  // namespace
}  // namespace xdino::models
