// The CUDA path against the CPU reference: the same network or update, built from the same
// seed, run on both devices, and the difference bounded. Every case needs a CUDA device and
// skips, naming why, where there is none (XDINO_SKIP_WITHOUT_CUDA, tests/support/require.h).
// CI builds this file against LibTorch 2.15 + CUDA on every submission, so it compiles there
// even though it runs only on a GPU machine.
//
// Bounds, relative to the largest CPU value: fp32 without TF32 1e-4 (cuBLAS/cuDNN sum in another
// order); TF32 1e-2 (10 mantissa bits); fp16 autocast 1e-2, bf16 autocast 5e-2 (7 mantissa bits;
// the CPU bf16 test in test_xcit_model allows 0.1 against fp32).
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <string>

#include "core/compat.h"
#include "models/registry.h"
#include "tests/support/require.h"
#include "train/grad_scaler.h"
#include "train/optim.h"

using xdino::compat::AutocastGuard;
using xdino::models::create_backbone;

namespace {

// The CUDA matmul and convolution precision for one scope, restored after it.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow)
      : cublas_(at::globalContext().allowTF32CuBLAS()),
        cudnn_(at::globalContext().allowTF32CuDNN()) {
    at::globalContext().setAllowTF32CuBLAS(allow);
    at::globalContext().setAllowTF32CuDNN(allow);
  }
  ~Tf32Scope() {
    at::globalContext().setAllowTF32CuBLAS(cublas_);
    at::globalContext().setAllowTF32CuDNN(cudnn_);
  }

 private:
  bool cublas_, cudnn_;
};

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

TEST(Cuda, XcitForwardMatchesCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  expect_forward_matches_cpu("xcit_nano_4_p4", 28);
  expect_forward_matches_cpu("xcit_nano_12_p16", 64);
}

TEST(Cuda, XvitForwardMatchesCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  expect_forward_matches_cpu("xvit_tiny", 64);
}

// Backward through the same network: the gradients of a fixed loss on both devices, fp32
// without TF32, within 1e-3 of each parameter's largest CPU gradient (a longer chain of sums
// in another order than the forward).
TEST(Cuda, XcitGradientsMatchCpu) {
  XDINO_SKIP_WITHOUT_CUDA();
  Tf32Scope tf32(false);
  torch::manual_seed(0);
  auto cpu = create_backbone("xcit_nano_4_p4");
  torch::manual_seed(0);
  auto gpu = create_backbone("xcit_nano_4_p4");
  gpu->to(torch::kCUDA);
  const auto images = torch::randn({4, 3, 28, 28});
  cpu->forward(images).pow(2).sum().backward();
  gpu->forward(images.to(torch::kCUDA)).pow(2).sum().backward();
  const auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
  for (const auto& item : pc) {
    const auto want = item.value().grad();
    const auto got = pg[item.key()].grad().to(torch::kCPU);
    const double scale = std::max(want.abs().max().item<double>(), 1e-12);
    EXPECT_LE((got - want).abs().max().item<double>() / scale, 1e-3) << item.key();
  }
}

// torch.cuda.amp.GradScaler's rule on CUDA tensors: a non-finite gradient skips the step and
// halves the scale; the weight is untouched.
TEST(Cuda, GradScalerSkipsAnOverflowAndBacksOff) {
  XDINO_SKIP_WITHOUT_CUDA();
  auto w = torch::ones({3}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  xdino::train::ParamGroup g;
  g.params = {w};
  g.names = {"w"};
  g.lr = 0.5;
  auto opt = xdino::train::make_sgd({g}, xdino::train::SGDOptions{0.0, 0.0, false});
  xdino::train::GradScaler scaler;
  {
    AutocastGuard autocast(c10::DeviceType::CUDA, at::kHalf);
    // The loss (fp32, as DINO's) is finite; its gradient reaches the fp16 product as the scale,
    // 65536, which overflows fp16's 65504.
    const auto loss = (w.to(at::kHalf) * 2.0).to(at::kFloat).sum();
    scaler.scale(loss).backward();
  }
  scaler.unscale(*opt);
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_FALSE(scaler.step(*opt));
  EXPECT_TRUE(torch::equal(w.to(torch::kCPU), torch::ones({3})));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  // The next, finite step goes through at the new scale.
  w.mutable_grad().zero_();
  scaler.scale(w.sum()).backward();
  EXPECT_TRUE(scaler.step(*opt));
  EXPECT_TRUE(torch::allclose(w.to(torch::kCPU), torch::full({3}, 0.5)));
}
