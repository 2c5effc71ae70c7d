// The backbones on a CUDA device against the CPU: the same weights, built from the same seed,
// their features (eval mode) in every precision a run takes and their gradients in fp32, each
// difference bounded. Every case needs a CUDA device and skips, naming why, where there is none
// (XDINO_SKIP_WITHOUT_CUDA, tests/support/require.h). CI builds this file against LibTorch 2.15
// + CUDA on every submission, so it compiles there although it runs only on a GPU machine.
//
// Bounds, relative to the largest CPU value: fp32 without TF32 1e-4 (cuBLAS/cuDNN sum in another
// order); TF32 1e-2 (10 mantissa bits); fp16 autocast 1e-2, bf16 autocast 5e-2 (7 mantissa bits;
// the CPU bf16 test in test_xcit_model allows 0.1 against fp32).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/compat.h"
#include "models/registry.h"
#include "tests/support/cuda_precision.h"
#include "tests/support/require.h"

using xdino::compat::AutocastGuard;
using xdino::models::create_backbone;
using xdino::testing::Tf32Scope;

namespace {

struct Mode {
  const char* name;
  bool tf32;
  bool autocast;
  at::ScalarType dtype;
  double bound;
};

// The eval-mode feature of `arch` (same weights on both devices) on the CPU in fp32 and on CUDA
// in every mode, each within its bound.
void expect_forward_matches_cpu(const std::string& arch, int64_t image_size) {
  torch::manual_seed(0);
  auto cpu = create_backbone(arch);
  torch::manual_seed(0);
  auto gpu = create_backbone(arch);
  cpu->eval();
  gpu->eval();
  gpu->to(torch::kCUDA);
  const auto images = torch::randn({4, 3, image_size, image_size});
  torch::NoGradGuard no_grad;
  const auto want = cpu->forward(images);
  const double scale = want.abs().max().item<double>();
  const Mode modes[] = {{"fp32", false, false, at::kFloat, 1e-4},
                        {"tf32", true, false, at::kFloat, 1e-2},
                        {"fp16 autocast", false, true, at::kHalf, 1e-2},
                        {"bf16 autocast", false, true, at::kBFloat16, 5e-2}};
  for (const Mode& m : modes) {
    Tf32Scope tf32(m.tf32);
    AutocastGuard autocast(c10::DeviceType::CUDA, m.dtype, m.autocast);
    const auto got = gpu->forward(images.to(torch::kCUDA)).to(torch::kCPU, torch::kFloat);
    ASSERT_EQ(got.sizes(), want.sizes()) << arch << " " << m.name;
    const double err = (got - want).abs().max().item<double>() / scale;
    EXPECT_LE(err, m.bound) << arch << " " << m.name << ": max |CUDA - CPU| / max |CPU|";
  }
}

}  // namespace

TEST(CudaModels, XcitForwardMatchesCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  expect_forward_matches_cpu("xcit_nano_4_p4", 28);
  expect_forward_matches_cpu("xcit_nano_12_p16", 64);
}

TEST(CudaModels, XvitForwardMatchesCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  expect_forward_matches_cpu("xvit_tiny", 64);
}

// Backward through the same network: the gradients of a fixed loss on both devices, fp32
// without TF32, within 1e-3 of each parameter's largest CPU gradient (a longer chain of sums
// in another order than the forward). The loss is a fixed random projection of the features:
// their sum of squares would not do, as the final LayerNorm makes it nearly constant, and its
// gradients would be rounding noise (so they were, on an H200, 2026-11-26).
TEST(CudaModels, XcitGradientsMatchCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  Tf32Scope tf32(false);
  torch::manual_seed(0);
  auto cpu = create_backbone("xcit_nano_4_p4");
  torch::manual_seed(0);
  auto gpu = create_backbone("xcit_nano_4_p4");
  gpu->to(torch::kCUDA);
  const auto images = torch::randn({4, 3, 28, 28});
  const auto out = cpu->forward(images);
  const auto projection = torch::randn(out.sizes());
  (out * projection).sum().backward();
  (gpu->forward(images.to(torch::kCUDA)) * projection.to(torch::kCUDA)).sum().backward();
  double worst = 0;
  std::string where;
  const auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
  for (const auto& item : pc) {
    const auto want = item.value().grad();
    const auto got = pg[item.key()].grad().to(torch::kCPU);
    const double scale = std::max(want.abs().max().item<double>(), 1e-12);
    const double err = (got - want).abs().max().item<double>() / scale;
    EXPECT_LE(err, 1e-3) << item.key();
    if (err > worst) {
      worst = err;
      where = item.key();
    }
  }
  std::printf("gradients: largest relative difference %.3g (%s)\n", worst, where.c_str());
}
