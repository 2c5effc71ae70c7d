// Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's semantics and
// defaults (docs/dino.md, "Schedules and optimiser").
//
// Contract:
//  - scale(loss) = loss * scale (fp32). Backward of it yields gradients times the scale. The
//    scale is a 0-dim tensor on the loss's device that update() and load_state_dict() rewrite
//    in place, so a step captured as a CUDA graph (train/cuda_graph.h) reads each step's.
//  - unscale(opt) multiplies every defined grad of the optimiser's parameters by 1/scale
//    (computed in double, applied in fp32) and records whether any of them holds inf/NaN.
//    At most once per step; step() calls it if the caller did not. It walks the grads as the
//    optimiser's update_path() says: on CUDA torch's fused check-and-unscale kernel unless
//    kPerTensor; on the CPU a loop of per-tensor ops (kPerTensor) or two multi-tensor ops
//    (max-abs of every grad, checked before scaling as torch's kernel checks, then one
//    multiply); all give bit-identical grads and the same verdict.
//  - step(opt) runs opt.step() unless a non-finite grad was recorded; returns whether it did.
//  - update(): a recorded non-finite grad multiplies the scale by backoff_factor (0.5) and
//    resets the growth tracker; otherwise after growth_interval (2000) consecutive good steps
//    the scale is multiplied by growth_factor (2). Then the per-step record is cleared.
//  - state_dict() is GradScaler.state_dict(): {scale, growth_factor, backoff_factor,
//    growth_interval, _growth_tracker}; load_state_dict() reads it back (missing keys throw
//    xdino::Error).
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include "train/optim.h"

namespace xdino::train {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  torch::Tensor scale(const torch::Tensor& loss);
  void unscale(Optimizer& optimizer);
  bool step(Optimizer& optimizer);
  void update();

  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }
  // The tensor scale() multiplies by (undefined before the first scale()).
  const torch::Tensor& scale_tensor() const { return scale_tensor_; }

  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);

 private:
  GradScalerOptions o_;
  float scale_;  // fp32, as torch keeps it
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false;
  bool found_inf_ = false;
  torch::Tensor scale_tensor_;  // scale_ on the loss's device, once scale() has run
  void scale_changed();
};

}  // namespace xdino::train
