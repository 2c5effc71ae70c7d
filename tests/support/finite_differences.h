// Autograd gradients against central finite differences, for float64 modules in tests.
//
// Contract: expect_gradients_match(loss, checked) runs loss().backward() once, then for a
// spread of about 7 entries of each checked tensor (a leaf that requires grad: the input or a
// parameter) compares its .grad() with (loss(x+eps) - loss(x-eps)) / 2 eps, to within
// tol * max(1, |fd|), reporting failures through GoogleTest with the tensor's name and index.
// The tensors are restored to their values afterwards.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace xdino::testing {

inline void expect_gradients_match(
    const std::function<torch::Tensor()>& loss,
    const std::vector<std::pair<std::string, torch::Tensor>>& checked, double eps = 1e-6,
    double tol = 1e-6) {
  loss().backward();
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : checked) {
    ASSERT_TRUE(t.grad().defined()) << name << " has no gradient";
    const torch::Tensor grad = t.grad().clone().view({-1});
    torch::Tensor flat = t.view({-1});
    const int64_t step = std::max<int64_t>(1, flat.numel() / 7);
    for (int64_t i = 0; i < flat.numel(); i += step) {
      const double v = flat[i].item<double>();
      flat[i] = v + eps;
      const double up = loss().item<double>();
      flat[i] = v - eps;
      const double down = loss().item<double>();
      flat[i] = v;
      const double fd = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[i].item<double>(), fd, tol * std::max(1.0, std::abs(fd)))
          << name << "[" << i << "]";
    }
  }
}

}  // namespace xdino::testing
