// Single-pass CPU kernels for the per-step updates that otherwise take several passes over
// every parameter (AdamW: 7 tensor ops; EMA: 3). With a 65536-wide DINO head (~25M
// parameters) the op-by-op versions cost ~0.5 s per step on a 2-core CPU, the fused ones a
// fraction of that (bench/results/training_step_cpu.md).
//
// Contract: each function returns false and touches nothing unless every tensor is a
// contiguous float32 CPU tensor of the same number of elements; the caller then uses the
// LibTorch ops. The arithmetic is torch's, element by element and in the same order, in
// float32 with the scalars rounded to float as ATen's CPU kernels round them. Without FMA:
// ATen's vectorised addcmul/addcdiv contract a multiply-add, so AdamW can differ from the
// op-by-op path in the last bit (tests/train/test_update_paths.cpp bounds it); the EMA is
// bit-identical.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

namespace xdino::kernels {

// True when every tensor is defined, contiguous, float32 and on the CPU: what the kernels
// below take (they also need equal sizes within one call).
bool fused_cpu_applies(at::ArrayRef<at::Tensor> tensors);

struct AdamWStep {
  double lr, weight_decay, beta1, beta2, eps;
  int64_t step;  // after increment (1 on the first update)
};

// p *= 1 - lr*wd; m = m*b1 + (1-b1)*g; v = v*b2 + (1-b2)*g*g;
// p += (-lr/(1-b1^t) * m) / (sqrt(v)/sqrt(1-b2^t) + eps).
bool fused_adamw(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v,
                 const AdamWStep& s);

// t = t*momentum + ((1-momentum)*s).
bool fused_ema(at::Tensor& t, const at::Tensor& s, double momentum);

}  // namespace xdino::kernels
