// The residual LayerNorm's CPU kernel (kernels/cpu/norms.h, run by kernels::residual_layer_norm
// on the CPU tensors it takes), on the ISA this CPU runs (.ci/run's AVX2 phase runs it again
// with ATEN_CPU_CAPABILITY=avx2). Its values against a float64 truth, bounded by torch's own
// error, and its central differences are test_kernel_layer_norm.cpp's, which now reach this
// kernel for every float32 and float64 pair; here:
//  - which tensors take the kernel, and that the op runs it (its outputs, bit for bit);
//  - against the reference backend (kernels/reference/norms.h) output by output: widths that
//    fill whole vectors and ones that leave tails, rows across the gradient's row blocks, a
//    stochastic-depth factor with dropped samples, a large offset over a small spread;
//  - the parameters' gradients on one thread and on two, bit for bit;
//  - a whole XCiT on kAuto against kOps, training and in eval mode, float32 and float64.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/norms.h"
#include "kernels/layer_norm.h"
#include "kernels/reference/norms.h"
#include "models/layers.h"
#include "tests/support/kernel_error.h"
#include "tests/support/xcit_paths.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::normalised_mse;

struct ResidualCase {
  std::string name;
  std::vector<int64_t> shape;
  double offset;
  bool drop;
};

const std::vector<ResidualCase> kResidualCases = {
    {"main job's block rows (16 images, 50 tokens, 128 wide)", {16, 50, 128}, 0, false},
    {"the same, stochastic depth", {16, 50, 128}, 0, true},
    {"tails: 37 wide, 3 x 43 rows across three row blocks", {3, 43, 37}, 0, true},
    {"one channel", {2, 3, 1}, 0, false},
    {"offset 1000 over a spread of 1", {4, 5, 24}, 1000, false},
};

// All the inputs of one case, in `dtype`.
struct ResidualInputs {
  Tensor x, branch, gamma, factor, weight, bias, dn, dy;
};

ResidualInputs inputs_for(const ResidualCase& c, torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t C = c.shape.back(), B = c.shape.front();
  auto make = [&](std::vector<int64_t> shape) {
    return torch::randn(shape, torch::kDouble).to(dtype);
  };
  ResidualInputs in;
  in.x = (torch::randn(c.shape, torch::kDouble) + c.offset).to(dtype);
  in.branch = make(c.shape);
  in.gamma = torch::rand({C}, torch::kDouble).to(dtype);
  in.weight = make({C});
  in.bias = make({C});
  if (c.drop) {  // as drop_path_factor gives it: 0 or 1/keep per sample
    std::vector<int64_t> factor_shape(c.shape.size(), 1);
    factor_shape[0] = B;
    in.factor = (torch::arange(B) % 2).to(torch::kDouble).div(0.9).view(factor_shape).to(dtype);
  }
  in.dn = make(c.shape);
  in.dy = make(c.shape);
  return in;
}

// {y, n, mean, rstd, dx, dbranch, dgamma, dweight, dbias} of one backend's plain functions.
template <typename Forward, typename Backward>
std::vector<Tensor> run_backend(const ResidualInputs& in, Forward forward, Backward backward) {
  const auto [y, n, mean, rstd] =
      forward(in.x, in.branch, in.gamma, in.factor, in.weight, in.bias, 1e-6, in.x.scalar_type());
  const auto [dx, dbranch, dgamma, dweight, dbias] =
      backward(in.dn, in.dy, y, in.branch, in.gamma, in.factor, in.weight, mean, rstd);
  return {y, n, mean, rstd, dx, dbranch, dgamma, dweight, dbias};
}

std::vector<Tensor> run_cpu(const ResidualInputs& in) {
  return run_backend(in, kernels::cpu::residual_layer_norm_forward,
                     kernels::cpu::residual_layer_norm_backward);
}

std::vector<Tensor> run_reference(const ResidualInputs& in) {
  return run_backend(in, kernels::reference::residual_layer_norm_forward,
                     kernels::reference::residual_layer_norm_backward);
}

const char* const kResidualNames[] = {"y",       "n",      "mean",    "rstd", "dx",
                                      "dbranch", "dgamma", "dweight", "dbias"};

class KernelResidualNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cpu_isa() == kernels::Isa::kNone)
      GTEST_SKIP() << "this CPU (or ATEN_CPU_CAPABILITY=default) runs no AVX2: the residual "
                      "LayerNorm takes the reference, which test_kernel_layer_norm covers";
    std::printf("residual LayerNorm kernel: %s\n", kernels::isa_name(kernels::cpu_isa()));
  }
};

TEST_F(KernelResidualNorm, TakesTheTensorsItRuns) {
  const Tensor x = torch::randn({2, 3, 8}), w = torch::randn({8}), b = torch::randn({8});
  const auto has = [](const Tensor& x, const Tensor& branch, const Tensor& gamma, const Tensor& w,
                      const Tensor& b, torch::ScalarType out) {
    return kernels::residual_layer_norm_has_cpu_kernel(x, branch, gamma, w, b, out);
  };
  EXPECT_TRUE(has(x, x, w, w, b, torch::kFloat));
  const Tensor xd = x.to(torch::kDouble), wd = w.to(torch::kDouble), bd = b.to(torch::kDouble);
  EXPECT_TRUE(has(xd, xd, wd, wd, bd, torch::kDouble));
  EXPECT_FALSE(has(x, x.to(torch::kBFloat16), w, w, b, torch::kFloat)) << "autocast's branch";
  EXPECT_FALSE(has(x, x, w, w, b, torch::kBFloat16)) << "autocast's output";
  EXPECT_FALSE(has(x, x, wd, w, b, torch::kFloat)) << "a float64 gamma";
  EXPECT_FALSE(has(x, x.transpose(0, 1).contiguous().transpose(0, 1), w, w, b, torch::kFloat))
      << "a strided branch";
  EXPECT_FALSE(has(x.view({48}), x.view({48}), torch::randn({48}), torch::randn({48}),
                   torch::randn({48}), torch::kFloat))
      << "one dimension";
  try {
    (void)kernels::cpu::residual_layer_norm_forward(x, x.to(torch::kBFloat16), w, Tensor(), w, b,
                                                    1e-6, torch::kFloat);
    ADD_FAILURE() << "a bfloat16 branch was taken";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU residual LayerNorm"), std::string::npos) << e.what();
  }
}

// The kernel's outputs against the reference backend's, which computes the same passes in ATen
// ops: equal up to float32 (float64) rounding in another summation order. (A kernel whose
// variance is taken about the row's first value, or whose dx lacks x_hat * mean(g * x_hat),
// fails these bounds and test_kernel_layer_norm's: both were tried.)
TEST_F(KernelResidualNorm, MatchesTheReferenceBackend) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& c : kResidualCases) {
      SCOPED_TRACE(c.name + ", " + c10::toString(dtype));
      const ResidualInputs in = inputs_for(c, dtype, 3);
      const auto got = run_cpu(in), want = run_reference(in);
      const double bound = dtype == torch::kFloat ? 1e-10 : 1e-24;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].scalar_type(), want[i].scalar_type()) << kResidualNames[i];
        EXPECT_EQ(got[i].sizes(), want[i].sizes()) << kResidualNames[i];
        EXPECT_LE(normalised_mse(got[i], want[i]), bound) << kResidualNames[i];
      }
    }
  }
}

// The op takes the kernel, not the reference, on these tensors: its outputs are the kernel's,
// bit for bit.
TEST_F(KernelResidualNorm, TheOpRunsTheKernel) {
  const ResidualInputs in = inputs_for(kResidualCases[2], torch::kFloat, 9);
  const auto [y, n] = kernels::residual_layer_norm(in.x, in.branch, in.gamma, in.factor, in.weight,
                                                   in.bias, 1e-6, torch::kFloat);
  const auto direct = run_cpu(in);
  EXPECT_TRUE(torch::equal(y, direct[0]));
  EXPECT_TRUE(torch::equal(n, direct[1]));
}

// The parameters' gradients are summed over fixed row blocks in a fixed order: the same bits
// on one thread and on two (the replicas and the digest rely on a step not following the core
// count).
TEST_F(KernelResidualNorm, TheGradientsDoNotFollowTheThreadCount) {
  const ResidualInputs in = inputs_for({"", {8, 97, 64}, 0, true}, torch::kFloat, 11);
  const int threads_before = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = run_cpu(in);
  at::set_num_threads(2);
  const auto two = run_cpu(in);
  at::set_num_threads(threads_before);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_TRUE(torch::equal(one[i], two[i])) << kResidualNames[i];
}

// XCiT whole on kAuto (the CPU kernels: XCA's core, bias + GELU, residual + LayerNorm) against
// kOps (torch's ops), the same seeded weights and stochastic-depth draws, forward and backward.
TEST_F(KernelResidualNorm, AWholeXcitOnKAutoMatchesTheOpPath) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const bool training : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (training ? ", training" : ", eval"));
      xdino::testing::XcitRun run;
      run.dtype = dtype;
      run.training = training;
      const auto a = xdino::testing::xcit_on_path(LayerKernels::kOps, run);
      const auto b = xdino::testing::xcit_on_path(LayerKernels::kAuto, run);
      ASSERT_EQ(a.size(), b.size());
      const double bound = dtype == torch::kFloat ? 1e-9 : 1e-22;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].defined()) continue;
        EXPECT_LE(normalised_mse(b[i], a[i]), bound) << "output " << i;
      }
    }
  }
}

}  // namespace
}  // namespace xdino::models
