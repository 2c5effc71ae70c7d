// Finite-difference gradient checks for the trainable modules, one helper for every test.
//
// Contract: expect_gradients_match(loss, tensors, options) runs loss().backward() once, then
// for a spread of entries of each named tensor (every entry when it has few) compares the
// autograd gradient with the central difference (loss(t + eps) - loss(t - eps)) / (2 eps),
// failing the current test (gtest EXPECT) with the tensor's name and index when they differ
// by more than tolerance * max(1, |difference|). Run in float64: eps and tolerance are per
// case because a kink (ReLU, a clamp) or BatchNorm's batch statistics need looser ones. The
// loss must be deterministic (no dropout or stochastic depth) and return a scalar; `tensors`
// must require grad and are restored exactly after each probe.
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

struct GradCheckOptions {
  double eps = 1e-6;
  double tolerance = 1e-6;
  int64_t entries_per_tensor = 7;  // probed entries are spread evenly over the tensor
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The module's parameters that require grad, by name (optionally only those listed).
inline NamedTensors trainable_parameters(const torch::nn::Module& module,
                                         const std::vector<std::string>& only = {}) {
  NamedTensors out;
  for (const auto& p : module.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), p.key()) == only.end()) continue;
    out.emplace_back(p.key(), p.value());
  }
  return out;
}

inline void expect_gradients_match(const std::function<torch::Tensor()>& loss,
                                   const NamedTensors& tensors, const GradCheckOptions& o = {}) {
  for (const auto& [name, t] : tensors) {
    ASSERT_EQ(t.scalar_type(), torch::kDouble) << name << ": gradient checks run in float64";
    ASSERT_TRUE(t.requires_grad()) << name;
    if (t.grad().defined()) t.mutable_grad().zero_();
  }
  loss().backward();
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(t.grad().defined()) << name << " got no gradient";
    const torch::Tensor grad = t.grad().clone().view({-1});
    torch::Tensor flat = t.view({-1});
    const int64_t step = std::max<int64_t>(1, flat.numel() / o.entries_per_tensor);
    for (int64_t i = 0; i < flat.numel(); i += step) {
      const double v = flat[i].item<double>();
      flat[i] = v + o.eps;
      const double up = loss().item<double>();
      flat[i] = v - o.eps;
      const double down = loss().item<double>();
      flat[i] = v;
      const double fd = (up - down) / (2 * o.eps);
      EXPECT_NEAR(grad[i].item<double>(), fd, o.tolerance * std::max(1.0, std::abs(fd)))
          << name << "[" << i << "]";
    }
  }
}

}  // namespace xdino::testing
