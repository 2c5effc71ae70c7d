// The fused LayerNorms' autograd ops (kernels/layer_norm.h), alone and after a LayerScale
// residual, on every device of this build: on the CPU the ATen reference backend (every build,
// so CI runs the ops' plumbing) and, for the residual variant's float32 and float64 pairs,
// kernels/cpu's kernel where the CPU has AVX2 (test_kernel_residual_norm.cpp has the rest of
// its tests); the CUDA kernels on a card (docs/tiers.md, "A kernel").
//  - a table of shapes (XCiT's, odd widths, one channel, a large offset over a small spread,
//    constant rows, the teacher's: eval mode, no stochastic depth) and every dtype pair,
//    forward and backward, against float64 truth, bounded by torch's own error at the same
//    precision (tests/support/kernel_error.h, scaled_error: a truth of zero, as dx of one
//    channel, keeps the error relative to what was rounded; the truth of an offset row is
//    computed on the row less its offset, as LayerNorm is unchanged by it);
//  - two wrong arithmetics (a one-pass variance, a dx without its mean(g * x_hat) term) fail
//    those bounds: a bound a correct kernel meets still catches a wrong one;
//  - the optional factor absent three ways (none, an undefined tensor, eval mode), and every
//    input with requires_grad on and off: only what asked gets a gradient, each the same;
//  - float64 central differences of both ops;
//  - a whole XCiT forward and backward with kFused against kOps, training (stochastic depth)
//    and in eval mode, in float32 and under bfloat16 autocast.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "core/compat.h"
#include "kernels/layer_norm.h"
#include "models/layers.h"
#include "models/registry.h"
#include "models/xcit_layers.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"
#include "tests/support/require.h"
#include "tests/support/xcit_paths.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::accumulation;
using xdino::testing::prepared;
using xdino::testing::scaled_error;
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
    {{9, 1}},                    // a single channel: every output is the bias, dx exactly 0
    {{1, 3, 33}, 1000.0, 1e-2},  // offset far above the spread
    {{6, 64}, 0.0, 0.0},         // constant rows: variance 0, rstd = eps^-1/2
};

struct DtypePair {
  torch::ScalarType in, out;
  double floor;  // the error any path reaches by rounding to `in`/`out` alone
};

// bfloat16 keeps 8 significant bits (a rounded value's squared relative error averages
// 2^-18), float16 11 bits (2^-24); float32 sums differ from the truth in their last bits.
const std::vector<DtypePair> kDtypes = {
    {torch::kFloat, torch::kFloat, 1e-12}, {torch::kFloat, torch::kBFloat16, 3e-5},
    {torch::kFloat, torch::kHalf, 1e-6},   {torch::kBFloat16, torch::kBFloat16, 3e-5},
    {torch::kHalf, torch::kHalf, 1e-6},    {torch::kDouble, torch::kDouble, 1e-26},
};

std::string describe(const Case& c, const DtypePair& d, torch::Device device) {
  return "shape " + c10::str(c10::IntArrayRef(c.shape)) + ", offset " + std::to_string(c.offset) +
         ", " + c10::toString(d.in) + " -> " + c10::toString(d.out) + " on " + device.str();
}

// The path an output comes from.
enum class Path {
  kFused,     // kernels::layer_norm / residual_layer_norm
  kTorch,     // at::layer_norm at the fused op's precision
  kTruth,     // float64 on the conditioned input
  kOnePass,   // wrong: variance as E[x^2] - E[x]^2 in the accumulation type
  kNoMeanGx,  // wrong: dx without the x_hat * mean(g * x_hat) term
};

// LayerNorm of rows in float64 or `acc` by explicit ops, for the two wrong paths: the same as
// at::layer_norm but for the one defect each is named after.
Tensor wrong_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Path path) {
  const Tensor mean = x.mean(-1, true);
  const Tensor var = path == Path::kOnePass
                         ? (x.square().mean(-1, true) - mean.square()).clamp_min(0)
                         : (x - mean).square().mean(-1, true);
  const Tensor rstd = (var + 1e-6).rsqrt();
  if (path != Path::kNoMeanGx) return (x - mean) * rstd * w + b;
  // Its backward drops the term: x_hat * mean(g * x_hat) is what flows through rstd.
  return (x - mean) * rstd.detach() * w + b;
}

// One LayerNorm case on one path: {y, dx, dweight, dbias}.
std::vector<Tensor> layer_norm_outputs(const Case& c, const DtypePair& d, torch::Device device,
                                       const Tensor& x0, const Tensor& w0, const Tensor& b0,
                                       const Tensor& dy, Path path) {
  const auto acc = accumulation(d.in);
  const auto as = path == Path::kTruth ? torch::kDouble : acc;
  Tensor x = path == Path::kTruth ? (x0.to(torch::kDouble) - c.offset) : x0.to(d.in);
  x = x.to(device).detach().requires_grad_(true);
  Tensor w = w0.to(device, as).detach().requires_grad_(true);
  Tensor b = b0.to(device, as).detach().requires_grad_(true);
  Tensor y;
  if (path == Path::kFused) {
    EXPECT_TRUE(kernels::layer_norm_applies(x, w, b));
    y = kernels::layer_norm(x, w, b, 1e-6, d.out);
    EXPECT_EQ(y.scalar_type(), d.out);
  } else if (path == Path::kTorch || path == Path::kTruth) {
    y = at::layer_norm(x.to(as), {c.shape.back()}, w, b, 1e-6);
    if (path == Path::kTorch) y = y.to(d.out);
  } else {
    y = wrong_layer_norm(x.to(as), w, b, path).to(d.out);
  }
  (y.to(as) * dy.to(device, as)).sum().backward();
  if (path == Path::kFused) {
    EXPECT_EQ(x.grad().scalar_type(), d.in);
    EXPECT_EQ(w.grad().scalar_type(), acc);
  }
  return {y, x.grad(), w.grad(), b.grad()};
}

// The scales of {y, dx, dweight, dbias} (kernel_error.h), from the float64 truth's terms.
std::vector<Tensor> layer_norm_scales(const Case& c, const Tensor& x0, const Tensor& w0,
                                      const Tensor& b0, const Tensor& dy) {
  const Tensor x = x0.to(torch::kDouble) - c.offset;
  const Tensor mean = x.mean(-1, true);
  const Tensor rstd = ((x - mean).square().mean(-1, true) + 1e-6).rsqrt();
  // x_hat's own scale: what its subtraction x - mean starts from (a row of one channel, or a
  // constant row, cancels it to zero in exact arithmetic, not in a rounded one).
  const Tensor x_hat = (x.abs() + mean.abs()) * rstd;
  const Tensor g = dy.to(torch::kDouble);
  const Tensor w = w0.to(torch::kDouble), b = b0.to(torch::kDouble);
  const auto rows = [&](const Tensor& t) { return t.reshape({-1, c.shape.back()}).sum(0); };
  return {(x_hat * w).abs() + b.abs(), rstd * (g * w).abs(), rows((g * x_hat).abs()),
          rows(g.abs())};
}

TEST(KernelLayerNorm, ForwardAndBackwardMatchTorchOnEveryDtypePair) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    torch::manual_seed(0);
    for (const auto& c : kCases) {
      for (const auto& d : kDtypes) {
        SCOPED_TRACE(describe(c, d, device));
        const int64_t C = c.shape.back();
        const auto acc = accumulation(d.in);
        // Inputs rounded to their dtype once: every path starts from the same values.
        const Tensor x0 = (torch::randn(c.shape, torch::kDouble) * c.scale + c.offset).to(d.in);
        const Tensor w0 = torch::randn({C}, torch::kDouble).to(acc);
        const Tensor b0 = torch::randn({C}, torch::kDouble).to(acc);
        const Tensor dy = torch::randn(c.shape, torch::kDouble).to(d.out);
        const auto run = [&](Path p) {
          return layer_norm_outputs(c, d, device, x0, w0, b0, dy, p);
        };
        const auto fused = run(Path::kFused), torch_path = run(Path::kTorch),
                   truth = run(Path::kTruth);
        const auto scales = layer_norm_scales(c, x0, w0, b0, dy);
        const char* names[] = {"y", "dx", "dweight", "dbias"};
        for (size_t i = 0; i < fused.size(); ++i) {
          const double bound =
              std::max(d.floor, 10 * scaled_error(torch_path[i], truth[i], scales[i]));
          EXPECT_LE(scaled_error(fused[i], truth[i], scales[i]), bound) << names[i];
        }
      }
    }
  }
}

// The bounds above are not met by any arithmetic: a one-pass variance fails them where a large
// offset cancels its digits, and a dx without its mean(g * x_hat) term fails them everywhere.
TEST(KernelLayerNorm, WrongArithmeticFailsTheBounds) {
  torch::manual_seed(7);
  const DtypePair d{torch::kFloat, torch::kFloat, 1e-12};
  struct Wrong {
    Path path;
    Case c;
    size_t output;  // the one it must fail: 0 y, 1 dx
  };
  for (const Wrong& wrong :
       {Wrong{Path::kOnePass, {{1, 3, 33}, 1000.0, 1e-2}, 0},
        Wrong{Path::kNoMeanGx, {{3, 36, 128}}, 1}, Wrong{Path::kNoMeanGx, {{2, 196, 384}}, 1}}) {
    const Case& c = wrong.c;
    SCOPED_TRACE(describe(c, d, torch::kCPU));
    const int64_t C = c.shape.back();
    const Tensor x0 = (torch::randn(c.shape, torch::kDouble) * c.scale + c.offset).to(d.in);
    const Tensor w0 = torch::randn({C}, torch::kDouble).to(torch::kFloat);
    const Tensor b0 = torch::randn({C}, torch::kDouble).to(torch::kFloat);
    const Tensor dy = torch::randn(c.shape, torch::kDouble).to(d.out);
    const auto run = [&](Path p) {
      return layer_norm_outputs(c, d, torch::kCPU, x0, w0, b0, dy, p);
    };
    const auto got = run(wrong.path), torch_path = run(Path::kTorch), truth = run(Path::kTruth);
    const auto scales = layer_norm_scales(c, x0, w0, b0, dy);
    const size_t i = wrong.output;
    const double bound = std::max(d.floor, 10 * scaled_error(torch_path[i], truth[i], scales[i]));
    EXPECT_GT(scaled_error(got[i], truth[i], scales[i]), 100 * bound);
  }
}

// The residual variant on the same table: y = addcmul(x, branch, gamma * factor) and its
// LayerNorm, with and without a stochastic-depth factor. x is float32 (float64 in the float64
// row); the branch has the pair's input dtype, as the XCA or LPI output under autocast has.
TEST(KernelLayerNorm, ResidualVariantMatchesTorchOnEveryDtypePair) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    torch::manual_seed(5);
    for (const auto& c : kCases) {
      if (c.shape.size() < 2) continue;
      for (const auto& d : kDtypes) {
        for (const bool drop : {false, true}) {
          SCOPED_TRACE(describe(c, d, device) + (drop ? ", stochastic depth" : ""));
          const int64_t C = c.shape.back(), B = c.shape.front();
          const auto acc = accumulation(d.in);
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
          const Tensor dn = torch::randn(c.shape, torch::kDouble).to(d.out);
          const Tensor dy = torch::randn(c.shape, torch::kDouble).to(acc);

          auto run = [&](Path path) {
            const auto as = path == Path::kTruth ? torch::kDouble : acc;
            auto leaf = [&](const Tensor& t, torch::ScalarType type) {
              return t.to(device, type).detach().requires_grad_(true);
            };
            // The truth normalises the residual less its offset (unchanged LayerNorm) and
            // adds the offset back to y alone.
            Tensor x = leaf(path == Path::kTruth ? x0.to(torch::kDouble) - c.offset : x0, as);
            Tensor gamma = leaf(gamma0, as), w = leaf(w0, as), b = leaf(b0, as);
            Tensor branch = leaf(branch0, path == Path::kTruth ? torch::kDouble : d.in);
            const Tensor factor = drop ? factor0.to(device, as) : Tensor();
            Tensor y, n;
            if (path == Path::kFused) {
              EXPECT_TRUE(kernels::residual_layer_norm_applies(x, branch, gamma, w, b));
              std::tie(y, n) = kernels::residual_layer_norm(
                  x, branch, gamma, drop ? c10::optional<Tensor>(factor) : c10::nullopt, w, b, 1e-6,
                  d.out);
              EXPECT_EQ(n.scalar_type(), d.out);
              EXPECT_EQ(y.scalar_type(), acc);
            } else {
              y = torch::addcmul(x, branch, drop ? gamma * factor : gamma);
              n = at::layer_norm(y, {C}, w, b, 1e-6);
              if (path == Path::kTorch) n = n.to(d.out);
            }
            ((n.to(as) * dn.to(device, as)).sum() + (y * dy.to(device, as)).sum()).backward();
            if (path == Path::kTruth) y = y + c.offset;
            return std::vector<Tensor>{y,        n,       x.grad(), branch.grad(), gamma.grad(),
                                       w.grad(), b.grad()};
          };
          const auto fused = run(Path::kFused), torch_path = run(Path::kTorch),
                     truth = run(Path::kTruth);
          // The scales of each output (kernel_error.h), from the float64 truth's terms.
          const Tensor keep = drop ? factor0.to(torch::kDouble) : torch::ones({1}, torch::kDouble);
          const Tensor g = gamma0.to(torch::kDouble) * keep;
          const Tensor through = branch0.to(torch::kDouble) * g;
          const Tensor yc = x0.to(torch::kDouble) - c.offset + through;
          const Tensor mean = yc.mean(-1, true);
          const Tensor rstd = ((yc - mean).square().mean(-1, true) + 1e-6).rsqrt();
          const Tensor y_hat = (yc.abs() + mean.abs()) * rstd;  // its scale, as above
          const Tensor wd = w0.to(torch::kDouble), dnd = dn.to(torch::kDouble);
          const Tensor s_dx = dy.to(torch::kDouble).abs() + rstd * (dnd * wd).abs();
          const auto rows = [&](const Tensor& t) { return t.reshape({-1, C}).sum(0); };
          const std::vector<Tensor> scales = {
              x0.to(torch::kDouble).abs() + through.abs(),
              (y_hat * wd).abs() + b0.to(torch::kDouble).abs(),
              s_dx,
              s_dx * g.abs(),
              rows(s_dx * (branch0.to(torch::kDouble) * keep).abs()),
              rows((dnd * y_hat).abs()),
              rows(dnd.abs())};
          const char* names[] = {"y", "n", "dx", "dbranch", "dgamma", "dweight", "dbias"};
          for (size_t i = 0; i < fused.size(); ++i) {
            const double bound =
                std::max(d.floor, 10 * scaled_error(torch_path[i], truth[i], scales[i]));
            EXPECT_LE(scaled_error(fused[i], truth[i], scales[i]), bound) << names[i];
          }
        }
      }
    }
  }
}

// An absent factor, however it is absent, is the factor 1: no factor, an undefined tensor (what
// drop_path_factor gives in eval mode and at rate 0: the teacher's every step), and a factor
// of ones give the same outputs and gradients. Function::apply once refused the undefined
// tensor before forward ran ("tensor does not have a device"), on any device.
TEST(KernelLayerNorm, AnAbsentFactorIsOneHoweverItIsAbsent) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(11);
    const auto on = torch::TensorOptions().device(device);
    const Tensor x0 = torch::randn({3, 5, 16}, on), branch0 = torch::randn({3, 5, 16}, on);
    const Tensor gamma0 = torch::rand({16}, on), w0 = torch::randn({16}, on),
                 b0 = torch::randn({16}, on);
    const Tensor dn = torch::randn({3, 5, 16}, on), dy = torch::randn({3, 5, 16}, on);
    const auto run = [&](const c10::optional<Tensor>& factor) {
      std::vector<Tensor> leaves;
      for (const Tensor& t : {x0, branch0, gamma0, w0, b0})
        leaves.push_back(t.clone().requires_grad_(true));
      const auto [y, n] = kernels::residual_layer_norm(leaves[0], leaves[1], leaves[2], factor,
                                                       leaves[3], leaves[4], 1e-6, torch::kFloat);
      ((n * dn).sum() + (y * dy).sum()).backward();
      std::vector<Tensor> out{y.detach(), n.detach()};
      for (const Tensor& l : leaves) out.push_back(l.grad());
      return out;
    };
    const auto none = run(c10::nullopt), undefined = run(Tensor()),
               ones = run(torch::ones({3, 1, 1}, on));
    for (size_t i = 0; i < none.size(); ++i) {
      EXPECT_TRUE(torch::equal(none[i], undefined[i])) << i;
      EXPECT_TRUE(torch::allclose(none[i], ones[i], 1e-6, 1e-6)) << i;
    }
    // And in a block's own call, eval mode and rate 0 both go through the fused op.
    auto norm = torch::nn::LayerNorm(torch::nn::LayerNormOptions({16}).eps(1e-6));
    norm->to(device);
    for (const auto& [rate, training] : {std::pair{0.0, true}, std::pair{0.5, false}}) {
      const auto [y, n] =
          residual_then_norm(x0, branch0, gamma0, rate, training, norm, LayerKernels::kFused);
      ASSERT_TRUE(n.grad_fn()) << "the fused op ran";
      EXPECT_NE(n.grad_fn()->name().find("ResidualLayerNormFunction"), std::string::npos)
          << n.grad_fn()->name();
      EXPECT_TRUE(torch::allclose(y, torch::addcmul(x0, branch0, gamma0), 1e-6, 1e-6));
    }
  }
}

// Every input with requires_grad on and off, in every combination: only the inputs that ask
// get a gradient, each the one they get when all ask; under NoGradGuard, no graph at all.
TEST(KernelLayerNorm, EachInputGetsAGradientOnlyWhenItAsks) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(12);
    const auto on = torch::TensorOptions().device(device);
    const std::vector<Tensor> plain = {torch::randn({4, 6, 8}, on), torch::randn({8}, on),
                                       torch::randn({8}, on)};
    const std::vector<Tensor> residual = {torch::randn({4, 6, 8}, on), torch::randn({4, 6, 8}, on),
                                          torch::rand({8}, on), torch::randn({8}, on),
                                          torch::randn({8}, on)};
    const Tensor r = torch::randn({4, 6, 8}, on),
                 factor = torch::tensor({1.25, 0.0, 1.25, 1.25}, on).view({4, 1, 1});
    const auto run = [&](const std::vector<Tensor>& inputs, unsigned mask, bool fused_residual) {
      std::vector<Tensor> leaves;
      for (size_t i = 0; i < inputs.size(); ++i)
        leaves.push_back(inputs[i].clone().requires_grad_(((mask >> i) & 1) != 0));
      Tensor loss;
      if (fused_residual) {
        const auto [y, n] = kernels::residual_layer_norm(leaves[0], leaves[1], leaves[2], factor,
                                                         leaves[3], leaves[4], 1e-6, torch::kFloat);
        loss = (n * r).sum() + (y * r).sum();
      } else {
        loss =
            (kernels::layer_norm(leaves[0], leaves[1], leaves[2], 1e-6, torch::kFloat) * r).sum();
      }
      if (mask != 0) loss.backward();
      EXPECT_EQ(loss.requires_grad(), mask != 0);
      std::vector<Tensor> grads;
      for (const Tensor& l : leaves) grads.push_back(l.grad());
      return grads;
    };
    for (const bool fused_residual : {false, true}) {
      const auto& inputs = fused_residual ? residual : plain;
      const unsigned all = (1u << inputs.size()) - 1;
      const auto reference = run(inputs, all, fused_residual);
      for (unsigned mask = 0; mask <= all; ++mask) {
        SCOPED_TRACE((fused_residual ? "residual, mask " : "plain, mask ") + std::to_string(mask));
        const auto grads = run(inputs, mask, fused_residual);
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (((mask >> i) & 1) == 0) {
            EXPECT_FALSE(grads[i].defined()) << "input " << i;
          } else {
            ASSERT_TRUE(grads[i].defined()) << "input " << i;
            EXPECT_TRUE(torch::allclose(grads[i], reference[i], 1e-6, 1e-6)) << "input " << i;
          }
        }
      }
    }
    torch::NoGradGuard no_grad;
    std::vector<Tensor> leaves;
    for (const Tensor& t : residual) leaves.push_back(t.clone().requires_grad_(true));
    const auto [y, n] = kernels::residual_layer_norm(leaves[0], leaves[1], leaves[2], c10::nullopt,
                                                     leaves[3], leaves[4], 1e-6, torch::kFloat);
    EXPECT_FALSE(n.requires_grad());
    EXPECT_FALSE(
        kernels::layer_norm(leaves[0], leaves[3], leaves[4], 1e-6, torch::kFloat).requires_grad());
  }
}

TEST(KernelLayerNorm, GradientsMatchFiniteDifferencesInFloat64) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    torch::manual_seed(1);
    const auto on = torch::TensorOptions().dtype(torch::kDouble).device(device);
    auto leaf = [&](std::vector<int64_t> shape) {
      return torch::randn(shape, on).requires_grad_(true);
    };
    const Tensor x = leaf({3, 4, 37}), w = leaf({37}), b = leaf({37});
    const Tensor r = torch::randn({3, 4, 37}, on);  // a loss that weighs every output
    xdino::testing::expect_gradients_match(
        [&] { return (kernels::layer_norm(x, w, b, 1e-6, torch::kDouble) * r).sum(); },
        {{"x", x}, {"weight", w}, {"bias", b}}, {1e-6, 1e-7, 11});
    const Tensor branch = leaf({3, 4, 37}), gamma = leaf({37});
    const Tensor factor = torch::tensor({1.25, 0.0, 1.25}, on).view({3, 1, 1});
    const Tensor rn = torch::randn({3, 4, 37}, on), ry = torch::randn({3, 4, 37}, on);
    for (const bool drop : {false, true}) {
      SCOPED_TRACE(drop ? "with a factor" : "without a factor");
      xdino::testing::expect_gradients_match(
          [&] {
            const auto [y, n] = kernels::residual_layer_norm(
                x, branch, gamma, drop ? c10::optional<Tensor>(factor) : c10::nullopt, w, b, 1e-6,
                torch::kDouble);
            return (n * rn).sum() + (y * ry).sum();
          },
          {{"x", x}, {"branch", branch}, {"gamma", gamma}, {"weight", w}, {"bias", b}},
          {1e-6, 1e-7, 11});
    }
  }
}

TEST(KernelLayerNorm, RejectsWhatItDoesNotTake) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    SCOPED_TRACE(device.str());
    const auto on = torch::TensorOptions().device(device);
    const Tensor x = torch::randn({4, 8}, on), w = torch::ones({8}, on), b = torch::zeros({8}, on);
    EXPECT_TRUE(kernels::layer_norm_applies(x, w, b));
    EXPECT_FALSE(kernels::layer_norm_applies(x.t(), w, b)) << "not contiguous";
    EXPECT_FALSE(kernels::layer_norm_applies(x, torch::ones({7}, on), b)) << "width";
    EXPECT_FALSE(kernels::layer_norm_applies(x.to(torch::kInt), w, b)) << "integers";
    EXPECT_FALSE(kernels::layer_norm_applies(Tensor(), w, b)) << "undefined";
    EXPECT_THROW(kernels::layer_norm(x.to(torch::kDouble), w, b, 1e-6, torch::kFloat),
                 std::exception);
    const Tensor half = torch::randn({4, 8}, on.dtype(torch::kHalf));
    EXPECT_TRUE(
        kernels::residual_layer_norm_applies(x.view({2, 2, 8}), half.view({2, 2, 8}), w, w, b));
    EXPECT_FALSE(kernels::residual_layer_norm_applies(half, x, w, w, b)) << "half residual";
    EXPECT_FALSE(kernels::residual_layer_norm_applies(x, x.t().contiguous().t(), w, w, b))
        << "branch not contiguous";
    EXPECT_FALSE(kernels::residual_layer_norm_applies(x, x.view({32}), w, w, b)) << "shape";
  }
  if (!kernels::cuda_kernels_built() && torch::cuda::is_available()) {
    const Tensor x = torch::randn({4, 8}, torch::kCUDA);
    EXPECT_FALSE(kernels::layer_norm_applies(x, torch::ones({8}, torch::kCUDA),
                                             torch::zeros({8}, torch::kCUDA)))
        << "a CUDA tensor in a build without the kernels";
  }
}

// XCiT whole, kFused against kOps: the same seeded weights and draws, forward and backward,
// training with stochastic depth (the student) and in eval mode (the teacher), in float32 and
// under autocast (bfloat16: the CPU's, float16's on a card too).
TEST(KernelLayerNorm, AWholeXcitWithFusedNormsMatchesTheOpPath) {
  for (const torch::Device device : xdino::testing::kernel_devices()) {
    for (const bool training : {true, false}) {
      for (const bool autocast : {false, true}) {
        if (autocast && device.is_cpu() && !xdino::testing::cpu_bfloat16_runs()) continue;
        SCOPED_TRACE(device.str() + (training ? ", training" : ", eval") +
                     (autocast ? ", bf16 autocast" : ", float32"));
        xdino::testing::XcitRun run;
        run.device = device;
        run.img_size = 32;
        run.training = training;
        run.bf16_autocast = autocast;
        const auto a = xdino::testing::xcit_on_path(LayerKernels::kOps, run);
        const auto b = xdino::testing::xcit_on_path(LayerKernels::kFused, run);
        ASSERT_EQ(a.size(), b.size());
        // float32: sums in another order; bf16: both round the same float32 values, at most one
        // unit apart where a value sits on a rounding boundary.
        const double bound = autocast ? 1e-3 : 1e-9;
        for (size_t i = 0; i < a.size(); ++i) {
          if (!a[i].defined()) continue;
          EXPECT_LE(xdino::testing::normalised_mse(b[i], a[i]), bound) << "output " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace xdino::models
