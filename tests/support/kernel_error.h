// How far a kernel's output is from its reference, as llama.cpp's test-backend-ops measures it
// (docs/tiers.md, "A kernel"): the normalised mean squared error, sum((got - want)^2) /
// sum(want^2), in float64 on the CPU whatever the inputs' dtype and device. A reference of all
// zeros divides by 1 instead, so the error is then the plain sum of squares.
#pragma once

#include <torch/torch.h>

namespace xdino::testing {

inline double normalised_mse(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor g = got.to(torch::kDouble).cpu(), w = want.to(torch::kDouble).cpu();
  const double denominator = w.square().sum().item<double>();
  return (g - w).square().sum().item<double>() / (denominator > 0 ? denominator : 1.0);
}

}  // namespace xdino::testing
