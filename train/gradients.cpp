#include "train/gradients.h"

namespace xdino::ssl {

torch::Tensor clip_gradients(const NamedTensors& named, double clip) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& item : named) {
    torch::Tensor grad = item.value().grad();
    if (!grad.defined()) continue;
    const auto norm = grad.norm(2);
    // Python's `clip / t` is t.reciprocal() * clip. coef >= 1 multiplies by exactly 1, so
    // clamping replaces the official host-side branch without a device sync per tensor.
    const auto coef = ((norm + 1e-6).reciprocal() * clip).clamp_max(1.0);
    grad.mul_(coef);
    norms.push_back(norm.to(torch::kFloat));
  }
  return norms.empty() ? torch::empty({0}) : torch::stack(norms);
}

void cancel_gradients_last_layer(int64_t epoch, const NamedTensors& named,
                                 int64_t freeze_last_layer) {
  if (epoch >= freeze_last_layer) return;
  for (const auto& item : named)
    if (item.key().find("last_layer") != std::string::npos) {
      torch::Tensor p = item.value();
      p.mutable_grad().reset();
    }
}

}  // namespace xdino::ssl
