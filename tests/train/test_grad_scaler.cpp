// Dynamic loss scaling with torch.cuda.amp.GradScaler's rules (docs/dino.md), on CPU tensors and,
// where there is a card, on CUDA tensors under fp16 autocast; and the precision plan (--device /
// --precision / --use_fp16).
#include <gtest/gtest.h>

#include <limits>

#include "core/check.h"
#include "core/compat.h"
#include "tests/support/require.h"
#include "train/grad_scaler.h"
#include "train/precision.h"

using xdino::train::GradScaler;
using xdino::train::GradScalerOptions;
using xdino::train::make_sgd;
using xdino::train::Optimizer;
using xdino::train::ParamGroup;
using xdino::train::resolve_precision;
using xdino::train::SGDOptions;

namespace {

struct OneWeight {
  torch::Tensor w = torch::ones({2}, torch::requires_grad());
  std::unique_ptr<Optimizer> opt;
  OneWeight() {
    ParamGroup g;
    g.params = {w};
    g.names = {"w"};
    g.lr = 0.5;
    opt = make_sgd({g}, SGDOptions{0.0, 0.0, false});
  }
};

}  // namespace

TEST(GradScaler, ScalesUnscalesAndSteps) {
  OneWeight s;
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  const auto loss = (s.w * torch::tensor({1.0f, 2.0f})).sum();
  scaler.scale(loss).backward();
  EXPECT_NEAR(s.w.grad()[1].item<double>(), 2.0 * 65536, 1e-3);
  EXPECT_TRUE(scaler.step(*s.opt));
  EXPECT_NEAR(s.w[0].item<double>(), 1.0 - 0.5 * 1.0, 1e-6);
  EXPECT_NEAR(s.w[1].item<double>(), 1.0 - 0.5 * 2.0, 1e-6);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, NonFiniteGradSkipsStepAndBacksOff) {
  OneWeight s;
  GradScaler scaler;
  s.w.mutable_grad() = torch::tensor({std::numeric_limits<float>::infinity(), 1.0f});
  scaler.unscale(*s.opt);
  scaler.unscale(*s.opt);  // second call in the same step is a no-op
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_FALSE(scaler.step(*s.opt));
  EXPECT_TRUE(torch::equal(s.w, torch::ones({2})));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_FALSE(scaler.found_inf());
}

// A step captured as a CUDA graph multiplies by the tensor it saw at capture: update() and a
// resume must rewrite that tensor, not replace it.
TEST(GradScaler, RewritesTheScaleTensorInPlace) {
  OneWeight s;
  GradScaler scaler;
  EXPECT_FALSE(scaler.scale_tensor().defined());
  const torch::Tensor loss = (s.w * 3).sum();
  EXPECT_EQ(scaler.scale(loss).item<double>(), 6.0 * 65536);
  const torch::Tensor captured = scaler.scale_tensor();
  s.w.mutable_grad() = torch::tensor({std::numeric_limits<float>::quiet_NaN(), 1.0f});
  scaler.unscale(*s.opt);
  scaler.update();  // backs off
  EXPECT_EQ(captured.item<double>(), 32768.0);
  GradScaler resumed;
  resumed.scale(loss);
  const torch::Tensor resumed_captured = resumed.scale_tensor();
  resumed.load_state_dict(scaler.state_dict());
  EXPECT_EQ(resumed_captured.item<double>(), 32768.0);
  EXPECT_EQ(resumed.scale(loss).item<double>(), 6.0 * 32768);
  EXPECT_TRUE(resumed.scale_tensor().is_same(resumed_captured));
}

TEST(GradScaler, GrowsAfterIntervalAndRoundTripsState) {
  OneWeight s;
  GradScalerOptions o;
  o.growth_interval = 3;
  GradScaler scaler(o);
  for (int i = 0; i < 3; ++i) {
    s.w.mutable_grad() = torch::ones({2});
    scaler.step(*s.opt);
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  s.w.mutable_grad() = torch::ones({2});
  scaler.step(*s.opt);
  scaler.update();

  const auto sd = scaler.state_dict().toGenericDict();
  std::vector<std::string> keys;
  for (const auto& e : sd) keys.push_back(e.key().toStringRef());
  EXPECT_EQ(keys, (std::vector<std::string>{"scale", "growth_factor", "backoff_factor",
                                            "growth_interval", "_growth_tracker"}));
  GradScaler other;
  other.load_state_dict(sd);
  EXPECT_EQ(other.get_scale(), 131072.0);
  EXPECT_EQ(other.growth_tracker(), 1);
}

TEST(Precision, PlansFollowTheFlags) {
  const auto cpu = resolve_precision("cpu", "auto", true);
  EXPECT_TRUE(cpu.device.is_cpu());
  EXPECT_FALSE(cpu.autocast);  // use_fp16 is a CUDA feature
  EXPECT_FALSE(cpu.loss_scaling);
  const auto bf16 = resolve_precision("cpu", "bf16", false);
  EXPECT_TRUE(bf16.autocast);
  EXPECT_EQ(bf16.autocast_dtype, torch::kBFloat16);
  EXPECT_FALSE(bf16.loss_scaling);
  EXPECT_THROW(resolve_precision("cpu", "fp16", true), xdino::UsageError);
  EXPECT_THROW(resolve_precision("cpu", "half", true), xdino::UsageError);
  EXPECT_THROW(resolve_precision("tpu", "auto", true), xdino::UsageError);
  if (xdino::compat::cuda_available()) {
    const auto gpu = resolve_precision("auto", "auto", true);
    EXPECT_TRUE(gpu.device.is_cuda() && gpu.loss_scaling && gpu.autocast_dtype == torch::kHalf);
  } else {
    EXPECT_THROW(resolve_precision("cuda", "auto", true), xdino::UsageError);
    EXPECT_TRUE(resolve_precision("auto", "auto", true).device.is_cpu());
  }
}

// torch.cuda.amp.GradScaler's rule on CUDA tensors: a non-finite gradient skips the step and
// halves the scale; the weight is untouched.
TEST(GradScaler, SkipsAnOverflowAndBacksOffOnCuda) {
  XDINO_SKIP_WITHOUT_CUDA();
  auto w = torch::ones({3}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  xdino::train::ParamGroup g;
  g.params = {w};
  g.names = {"w"};
  g.lr = 0.5;
  auto opt = xdino::train::make_sgd({g}, xdino::train::SGDOptions{0.0, 0.0, false});
  xdino::train::GradScaler scaler;
  {
    xdino::compat::AutocastGuard autocast(c10::DeviceType::CUDA, at::kHalf);
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
