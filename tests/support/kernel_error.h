// How far a kernel's output is from its reference, as llama.cpp's test-backend-ops measures it
// (docs/tiers.md, "A kernel"), in float64 on the CPU whatever the inputs' dtype and device.
//
// Contract:
//  - normalised_mse(got, want): sum((got - want)^2) / sum(want^2); a reference of all zeros
//    divides by 1 instead, so the error is then the plain sum of squares.
//  - scaled_error(got, want, scale): sum((got - want)^2) / max(sum(want^2), sum(scale^2)).
//    `scale` (want's shape, or one that broadcasts to it) is the magnitude of the terms the
//    output is computed from before they cancel: LayerNorm's dx is rstd * (g - mean(g) -
//    x_hat * mean(g * x_hat)), so its scale is rstd * |g|. Rounding errors are relative to
//    those terms, not to their sum, so where the sum cancels to (nearly) zero (a single
//    channel: dx is exactly 0) the error stays relative to what was rounded, and a bound that
//    a correct kernel meets still fails a wrong one.
//  - kernel_devices(): every device whose backend of the fused ops this build has: the CPU
//    (the ATen reference) always, a CUDA device where there is one and kernels/cuda is built.
//  - accumulation(t): float64 for float64, float32 for every other float dtype.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "kernels/layer_norm.h"

namespace xdino::testing {

inline double normalised_mse(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor g = got.to(torch::kDouble).cpu(), w = want.to(torch::kDouble).cpu();
  const double denominator = w.square().sum().item<double>();
  return (g - w).square().sum().item<double>() / (denominator > 0 ? denominator : 1.0);
}

inline double scaled_error(const torch::Tensor& got, const torch::Tensor& want,
                           const torch::Tensor& scale) {
  const torch::Tensor g = got.to(torch::kDouble).cpu(), w = want.to(torch::kDouble).cpu();
  const torch::Tensor s = scale.to(torch::kDouble).cpu().expand_as(w);
  const double denominator =
      std::max(w.square().sum().item<double>(), s.square().sum().item<double>());
  return (g - w).square().sum().item<double>() / (denominator > 0 ? denominator : 1.0);
}

inline std::vector<torch::Device> kernel_devices() {
  std::vector<torch::Device> out{torch::kCPU};
  if (torch::cuda::is_available() && xdino::kernels::cuda_kernels_built())
    out.emplace_back(torch::kCUDA);
  return out;
}

inline torch::ScalarType accumulation(torch::ScalarType t) {
  return t == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace xdino::testing
