#include "train/gradients.h"

#include "core/host_reads.h"

namespace xdino::train {

namespace {

// Python's `clip / t` is t.reciprocal() * clip. coef >= 1 multiplies by exactly 1, so
// clamping replaces the official host-side branch.
torch::Tensor clip_coefficient(const torch::Tensor& norm, double clip) {
  return ((norm + 1e-6).reciprocal() * clip).clamp_max(1.0);
}

}  // namespace

torch::Tensor clip_gradients(const NamedTensors& named, double clip, UpdatePath path) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& item : named)
    if (item.value().grad().defined()) grads.push_back(item.value().grad());
  if (grads.empty()) return torch::empty({0});
  if (path == UpdatePath::kPerTensor) {
    std::vector<torch::Tensor> norms;
    for (auto& grad : grads) {
      const auto norm = grad.norm(2);
      grad.mul_(clip_coefficient(norm, clip));  // a device tensor: no sync per parameter
      norms.push_back(norm.to(torch::kFloat));
    }
    return torch::stack(norms);
  }
  const auto norms = torch::stack(at::_foreach_norm(grads, 2));
  // One sync for all parameters; a float coefficient multiplies exactly as the 0-dim tensor
  // of the per-tensor path does.
  const auto coef = to_host(clip_coefficient(norms, clip).to(torch::kFloat)).contiguous();
  std::vector<c10::Scalar> scalars;
  scalars.reserve(grads.size());
  const float* c = coef.data_ptr<float>();
  for (size_t i = 0; i < grads.size(); ++i) scalars.emplace_back(static_cast<double>(c[i]));
  at::_foreach_mul_(grads, scalars);
  return norms.to(torch::kFloat);
}

}  // namespace xdino::train
