// kernels/cuda's LayerNorm, alone and after a LayerScale residual, against torch's
// (docs/tiers.md, "A kernel"): a table of shapes and dtype pairs, forward and backward against
// autograd through the op path, float64 central differences, and an XCA block on each path. The
// CUDA cases skip, naming why, without a card; the CPU cases check that kFused falls back to
// torch's LayerNorm bit for bit off CUDA.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "core/compat.h"
#include "models/layers.h"
#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"
#include "tests/support/require.h"
#ifdef XDINO_WITH_CUDA_KERNELS
#include "kernels/cuda/layer_norm_function.h"
#endif

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;
namespace naive = xdino::testing::naive;

// The inputs of one case: rows of width C around `offset`, spread `scale` (a large offset over
// a small spread is where a one-pass variance loses its digits).
struct Case {
  std::vector<int64_t> shape;
  double offset = 0.0, scale = 1.0;
};

const std::vector<Case> kCases = {
    {{2, 196, 384}},             // XCiT-S12/16's global crop tokens
    {{3, 36, 128}},              // nano width, a local crop's 6 x 6 tokens
    {{5, 768}},                  // large width
    {{7, 100}},                  // not a multiple of the warp
    {{9, 1}},                    // a single channel: every output is the bias
    {{1, 3, 33}, 1000.0, 1e-2},  // offset far above the spread
    {{6, 64}, 0.0, 0.0},         // constant rows: variance 0, rstd = eps^-1/2
};

#ifdef XDINO_WITH_CUDA_KERNELS
struct DtypePair {
  torch::ScalarType in, out;
  double floor;  // NMSE any path reaches by rounding to `in`/`out` alone
};

// bfloat16 keeps 8 significant bits (a rounded value's squared relative error averages
// 2^-18), float16 11 bits (2^-24); float32 sums differ from the truth in their last bits.
const std::vector<DtypePair> kDtypes = {
    {torch::kFloat, torch::kFloat, 1e-12}, {torch::kFloat, torch::kBFloat16, 3e-5},
    {torch::kFloat, torch::kHalf, 1e-6},   {torch::kBFloat16, torch::kBFloat16, 3e-5},
    {torch::kHalf, torch::kHalf, 1e-6},    {torch::kDouble, torch::kDouble, 1e-24},
};

std::string describe(const Case& c, const DtypePair& d) {
  return "shape " + c10::str(c10::IntArrayRef(c.shape)) + ", offset " + std::to_string(c.offset) +
         ", " + c10::toString(d.in) + " -> " + c10::toString(d.out);
}

// The kernel against the truth (at::layer_norm in float64 on the same rounded inputs), bounded
// by torch's own path at the kernel's precision: no worse than 10x torch's error, or the
// rounding floor. Large offsets cost a float32 mean its last digits on both paths alike.
TEST(KernelLayerNorm, ForwardAndBackwardMatchTorch) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(0);
  const torch::Device cuda(torch::kCUDA);
  enum class Path { kKernel, kTorch, kTruth };
  for (const auto& c : kCases) {
    for (const auto& d : kDtypes) {
      SCOPED_TRACE(describe(c, d));
      const int64_t C = c.shape.back();
      const auto acc = d.in == torch::kDouble ? torch::kDouble : torch::kFloat;
      const Tensor x0 = (torch::randn(c.shape, torch::kDouble) * c.scale + c.offset).to(d.in);
      const Tensor w0 = torch::randn({C}, torch::kDouble).to(acc);
      const Tensor b0 = torch::randn({C}, torch::kDouble).to(acc);
      const Tensor dy = torch::randn(c.shape, torch::kDouble).to(d.out).to(cuda);
      ASSERT_TRUE(xdino::kernels::layer_norm_applies(x0.to(cuda), w0.to(cuda), b0.to(cuda)));

      auto run = [&](Path path) {
        const auto as = path == Path::kTruth ? torch::kDouble : acc;
        Tensor x =
            x0.to(cuda).to(path == Path::kTruth ? torch::kDouble : d.in).requires_grad_(true);
        Tensor w = w0.to(cuda).to(as).requires_grad_(true),
               b = b0.to(cuda).to(as).requires_grad_(true);
        Tensor y;
        if (path == Path::kKernel) {
          y = xdino::kernels::layer_norm(x, w, b, 1e-6, d.out);
          EXPECT_EQ(y.scalar_type(), d.out);
        } else {
          y = at::layer_norm(x.to(as), {C}, w, b, 1e-6);
          if (path == Path::kTorch) y = y.to(d.out);
        }
        (y.to(as) * dy.to(as)).sum().backward();
        if (path == Path::kKernel) {
          EXPECT_EQ(x.grad().scalar_type(), d.in);
        }
        return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
      };
      const auto kernel = run(Path::kKernel), torch_path = run(Path::kTorch),
                 truth = run(Path::kTruth);
      const char* names[] = {"y", "dx", "dweight", "dbias"};
      for (size_t i = 0; i < kernel.size(); ++i) {
        const double bound = std::max(d.floor, 10 * normalised_mse(torch_path[i], truth[i]));
        EXPECT_LE(normalised_mse(kernel[i], truth[i]), bound) << names[i];
      }
    }
  }
}

// The residual variant on the same table: y = addcmul(x, branch, gamma * factor) and its
// LayerNorm, against the op path (the truth again in float64), with and without a
// stochastic-depth factor. x is float32 (float64 in the float64 row); the branch has the
// pair's input dtype, as the XCA or LPI output under autocast has.
TEST(KernelLayerNorm, ResidualVariantMatchesTorch) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(5);
  const torch::Device cuda(torch::kCUDA);
  enum class Path { kKernel, kTorch, kTruth };
  for (const auto& c : kCases) {
    if (c.shape.size() < 2) continue;
    for (const auto& d : kDtypes) {
      for (const bool drop : {false, true}) {
        SCOPED_TRACE(describe(c, d) + (drop ? ", stochastic depth" : ""));
        const int64_t C = c.shape.back(), B = c.shape.front();
        const auto acc = d.in == torch::kDouble ? torch::kDouble : torch::kFloat;
        const Tensor x0 = (torch::randn(c.shape, torch::kDouble) * c.scale + c.offset).to(acc);
        const Tensor branch0 = torch::randn(c.shape, torch::kDouble).to(d.in);
        const Tensor gamma0 = torch::rand({C}, torch::kDouble).to(acc);
        const Tensor w0 = torch::randn({C}, torch::kDouble).to(acc);
        const Tensor b0 = torch::randn({C}, torch::kDouble).to(acc);
        // As drop_path_factor gives it: 0 or 1/keep per sample, (B, 1, ..., 1).
        std::vector<int64_t> factor_shape(c.shape.size(), 1);
        factor_shape[0] = B;
        const Tensor factor0 =
            drop ? (torch::arange(B) % 2).to(torch::kDouble).div(0.9).view(factor_shape).to(acc)
                 : Tensor();
        const Tensor dn = torch::randn(c.shape, torch::kDouble).to(d.out).to(cuda);
        const Tensor dy = torch::randn(c.shape, torch::kDouble).to(acc).to(cuda);

        auto run = [&](Path path) {
          const auto as = path == Path::kTruth ? torch::kDouble : acc;
          auto leaf = [&](const Tensor& t, torch::ScalarType type) {
            return t.to(cuda).to(type).requires_grad_(true);
          };
          Tensor x = leaf(x0, as), gamma = leaf(gamma0, as), w = leaf(w0, as), b = leaf(b0, as);
          Tensor branch = leaf(branch0, path == Path::kTruth ? torch::kDouble : d.in);
          const Tensor factor = drop ? factor0.to(cuda).to(as) : Tensor();
          Tensor y, n;
          if (path == Path::kKernel) {
            EXPECT_TRUE(xdino::kernels::residual_layer_norm_applies(x, branch, gamma, w, b));
            std::tie(y, n) =
                xdino::kernels::residual_layer_norm(x, branch, gamma, factor, w, b, 1e-6, d.out);
            EXPECT_EQ(n.scalar_type(), d.out);
          } else {
            y = torch::addcmul(x, branch, drop ? gamma * factor : gamma);
            n = at::layer_norm(y, {C}, w, b, 1e-6);
            if (path == Path::kTorch) n = n.to(d.out);
          }
          ((n.to(as) * dn.to(as)).sum() + (y * dy.to(as)).sum()).backward();
          return std::vector<Tensor>{y,        n,       x.grad(), branch.grad(), gamma.grad(),
                                     w.grad(), b.grad()};
        };
        const auto kernel = run(Path::kKernel), torch_path = run(Path::kTorch),
                   truth = run(Path::kTruth);
        const char* names[] = {"y", "n", "dx", "dbranch", "dgamma", "dweight", "dbias"};
        for (size_t i = 0; i < kernel.size(); ++i) {
          const double bound = std::max(d.floor, 10 * normalised_mse(torch_path[i], truth[i]));
          EXPECT_LE(normalised_mse(kernel[i], truth[i]), bound) << names[i];
        }
      }
    }
  }
}

TEST(KernelLayerNorm, GradientsMatchFiniteDifferencesInFloat64) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(1);
  const auto on_cuda = torch::TensorOptions().dtype(torch::kDouble).device(torch::kCUDA);
  const Tensor x = torch::randn({3, 4, 37}, on_cuda).requires_grad_(true);
  const Tensor w = torch::randn({37}, on_cuda).requires_grad_(true);
  const Tensor b = torch::randn({37}, on_cuda).requires_grad_(true);
  const Tensor r = torch::randn({3, 4, 37}, on_cuda);  // a loss that weighs every output
  xdino::testing::expect_gradients_match(
      [&] { return (xdino::kernels::layer_norm(x, w, b, 1e-6, torch::kDouble) * r).sum(); },
      {{"x", x}, {"weight", w}, {"bias", b}}, {1e-6, 1e-7, 11});
}

TEST(KernelLayerNorm, ResidualGradientsMatchFiniteDifferencesInFloat64) {
  XDINO_SKIP_WITHOUT_CUDA();
  torch::manual_seed(6);
  const auto on_cuda = torch::TensorOptions().dtype(torch::kDouble).device(torch::kCUDA);
  auto leaf = [&](std::vector<int64_t> shape) {
    return torch::randn(shape, on_cuda).requires_grad_(true);
  };
  const Tensor x = leaf({3, 4, 37}), branch = leaf({3, 4, 37}), gamma = leaf({37}), w = leaf({37}),
               b = leaf({37});
  const Tensor factor = torch::tensor({1.25, 0.0, 1.25}, on_cuda).view({3, 1, 1});
  const Tensor rn = torch::randn({3, 4, 37}, on_cuda), ry = torch::randn({3, 4, 37}, on_cuda);
  xdino::testing::expect_gradients_match(
      [&] {
        const auto [y, n] = xdino::kernels::residual_layer_norm(x, branch, gamma, factor, w, b,
                                                                1e-6, torch::kDouble);
        return (n * rn).sum() + (y * ry).sum();
      },
      {{"x", x}, {"branch", branch}, {"gamma", gamma}, {"weight", w}, {"bias", b}},
      {1e-6, 1e-7, 11});
}

TEST(KernelLayerNorm, RejectsWhatItDoesNotTake) {
  XDINO_SKIP_WITHOUT_CUDA();
  const auto on_cuda = torch::TensorOptions().device(torch::kCUDA);
  const Tensor x = torch::randn({4, 8}, on_cuda), w = torch::ones({8}, on_cuda),
               b = torch::zeros({8}, on_cuda);
  EXPECT_TRUE(xdino::kernels::layer_norm_applies(x, w, b));
  EXPECT_FALSE(xdino::kernels::layer_norm_applies(x.t(), w, b)) << "not contiguous";
  EXPECT_FALSE(xdino::kernels::layer_norm_applies(x, torch::ones({7}, on_cuda), b)) << "width";
  EXPECT_FALSE(xdino::kernels::layer_norm_applies(x.cpu(), w.cpu(), b.cpu())) << "CPU";
  EXPECT_FALSE(xdino::kernels::layer_norm_applies(x.to(torch::kInt), w, b)) << "integers";
  EXPECT_THROW(xdino::kernels::layer_norm(x.to(torch::kDouble), w, b, 1e-6, torch::kFloat),
               std::exception);
  const Tensor half = torch::randn({4, 8}, on_cuda.dtype(torch::kHalf));
  EXPECT_TRUE(xdino::kernels::residual_layer_norm_applies(x.view({2, 2, 8}), half.view({2, 2, 8}),
                                                          w, w, b));
  EXPECT_FALSE(xdino::kernels::residual_layer_norm_applies(half, x, w, w, b)) << "half residual";
  EXPECT_FALSE(xdino::kernels::residual_layer_norm_applies(x, x.t().contiguous().t(), w, w, b))
      << "branch not contiguous";
  EXPECT_FALSE(xdino::kernels::residual_layer_norm_applies(x, x.view({32}), w, w, b)) << "shape";
}
#endif

// Two XCA blocks with the same seeded, non-trivial weights (LayerNorm weights and biases,
// gammas), on the op path and on kFused, in training mode: stochastic depth at
// `drop_path_rate`, LPI's BatchNorm on the batch's statistics.
std::pair<XCABlock, XCABlock> block_pair(torch::Device device, double drop_path_rate) {
  const auto options = XCABlockOptions(64, 4).drop_path_rate(drop_path_rate);
  XCABlock ops =
      prepared(XCABlock(XCABlockOptions(options).kernels(LayerKernels::kOps)), torch::kFloat, 2);
  XCABlock fused =
      prepared(XCABlock(XCABlockOptions(options).kernels(LayerKernels::kFused)), torch::kFloat, 2);
  for (XCABlock* block : {&ops, &fused}) {
    (*block)->train();
    (*block)->to(device);
  }
  return {ops, fused};
}

// Off CUDA kFused is the op path: the block as the naive float64 reference computes it, and
// with stochastic depth the op path's own result, bit for bit (the same draws).
TEST(KernelLayerNorm, XcaBlockFallsBackToTorchOffCuda) {
  XCABlock block =
      prepared(XCABlock(XCABlockOptions(16, 4).kernels(LayerKernels::kFused)), torch::kDouble, 4);
  const Tensor x = torch::randn({2, 12, 16}, torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    expect_close(block(x, 4, 3), naive::xca_block(x, naive::params_of(*block), "", 4, 4, 3), 1e-6,
                 "kFused XCA block on the CPU against the naive block");
  }
  auto [ops, fused] = block_pair(torch::kCPU, 0.5);
  const Tensor x2 = torch::randn({4, 16, 64});
  torch::manual_seed(3);
  const Tensor y_ops = ops(x2, 4, 4);
  torch::manual_seed(3);  // the same stochastic-depth draws
  EXPECT_TRUE(torch::equal(y_ops, fused(x2, 4, 4)));
}

TEST(KernelLayerNorm, XcaBlockOnCudaMatchesTheOpPath) {
  XDINO_SKIP_WITHOUT_CUDA();
  const torch::Device cuda(torch::kCUDA);
  auto [ops, fused] = block_pair(cuda, 0.5);
  torch::manual_seed(4);
  const Tensor x0 = torch::randn({4, 16, 64}, torch::TensorOptions().device(cuda));
  const Tensor dy = torch::randn({4, 16, 64}, torch::TensorOptions().device(cuda));
  for (const bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "float32");
    auto run = [&](XCABlock& block) {
      block->zero_grad();
      const Tensor x = x0.clone().requires_grad_(true);
      Tensor y;
      {
        compat::AutocastGuard guard(torch::kCUDA, torch::kBFloat16, autocast);
        torch::manual_seed(5);  // the same stochastic-depth draws on both paths
        y = block(x, 4, 4);
      }
      (y.to(torch::kFloat) * dy).sum().backward();
      return std::vector<Tensor>{y,
                                 x.grad(),
                                 block->norm1->weight.grad(),
                                 block->norm3->bias.grad(),
                                 block->gamma1.grad(),
                                 block->mlp->fc1->weight.grad()};
    };
    const auto a = run(ops), b = run(fused);
    // float32: the kernels' sums in another order. bf16: both round the same float32 values,
    // at most one unit apart where a value sits on a rounding boundary.
    const double bound = autocast ? 1e-4 : 1e-10;
    const char* names[] = {
        "y", "dx", "norm1.weight grad", "norm3.bias grad", "gamma1 grad", "fc1.weight grad"};
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(normalised_mse(b[i], a[i]), bound) << names[i];
  }
}

}  // namespace
}  // namespace xdino::models
