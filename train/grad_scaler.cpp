#include "train/grad_scaler.h"

#include <cmath>

#include "core/check.h"
#include "core/host_reads.h"
#include "core/ivalue.h"

namespace xdino::train {

GradScaler::GradScaler(GradScalerOptions o) : o_(o), scale_(static_cast<float>(o.init_scale)) {
  XDINO_CHECK_ARG(o.growth_factor > 1.0 && o.backoff_factor < 1.0 && o.growth_interval > 0,
                  "GradScaler needs growth_factor > 1, backoff_factor < 1, growth_interval > 0");
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) {
  if (!scale_tensor_.defined() || scale_tensor_.device() != loss.device())
    scale_tensor_ = torch::full({}, scale_, loss.options().dtype(torch::kFloat));
  return loss * scale_tensor_;
}

void GradScaler::scale_changed() {
  torch::NoGradGuard no_grad;
  if (scale_tensor_.defined()) scale_tensor_.fill_(scale_);
}

void GradScaler::unscale(Optimizer& optimizer) {
  if (unscaled_) return;
  unscaled_ = true;
  torch::NoGradGuard no_grad;
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  std::vector<torch::Tensor> grads;
  for (auto& g : optimizer.param_groups())
    for (auto& p : g.params)
      if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  const auto options = grads[0].options().dtype(torch::kFloat);
  auto found = torch::zeros({1}, options);
  const auto inv = torch::full({1}, inv_scale, options);
  if (optimizer.update_path() == UpdatePath::kPerTensor) {
    for (auto& g : grads) {
      found.logical_or_(g.isfinite().logical_not().any());
      g.mul_(inv);
    }
  } else if (grads[0].is_cuda()) {
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
  } else {
    // max |g| is inf or NaN exactly when g holds a non-finite value.
    const auto amax = torch::stack(at::_foreach_norm(grads, INFINITY));
    found.logical_or_(amax.isfinite().logical_not().any());
    at::_foreach_mul_(grads, static_cast<double>(inv_scale));
  }
  found_inf_ = to_host(found).item<float>() != 0.0f;
}

bool GradScaler::step(Optimizer& optimizer) {
  unscale(optimizer);
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (found_inf_) {
    scale_ = static_cast<float>(scale_ * o_.backoff_factor);
    growth_tracker_ = 0;
    scale_changed();
  } else if (++growth_tracker_ == o_.growth_interval) {
    scale_ = static_cast<float>(scale_ * o_.growth_factor);
    growth_tracker_ = 0;
    scale_changed();
  }
  unscaled_ = false;
  found_inf_ = false;
}

c10::IValue GradScaler::state_dict() const {
  auto d = make_dict();
  d.insert("scale", static_cast<double>(scale_));
  d.insert("growth_factor", o_.growth_factor);
  d.insert("backoff_factor", o_.backoff_factor);
  d.insert("growth_interval", o_.growth_interval);
  d.insert("_growth_tracker", growth_tracker_);
  return d;
}

void GradScaler::load_state_dict(const c10::IValue& state) {
  const auto d = as_dict(state, "fp16_scaler");
  const std::string what = "fp16_scaler state";
  scale_ = static_cast<float>(as_double(get(d, "scale", what), "scale"));
  o_.growth_factor = as_double(get(d, "growth_factor", what), "growth_factor");
  o_.backoff_factor = as_double(get(d, "backoff_factor", what), "backoff_factor");
  o_.growth_interval = as_int(get(d, "growth_interval", what), "growth_interval");
  growth_tracker_ = as_int(get(d, "_growth_tracker", what), "_growth_tracker");
  scale_changed();
}

}  // namespace xdino::train
