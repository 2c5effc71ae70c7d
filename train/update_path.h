// How the per-step updates (optimiser, gradient clipping, loss-scaler unscale, teacher EMA)
// walk over the parameters. Every path computes torch's arithmetic; they differ in how many
// kernels they launch and how many passes they make over memory.
//
//  - kPerTensor: LibTorch ops, one parameter at a time: torch.optim's single-tensor code and
//    main_dino.py's loops. The reference that tests compare the others against. ~7 kernels
//    per parameter for AdamW: on a GPU, ~200 parameters make this launch-bound.
//  - kMultiTensor: LibTorch's multi-tensor `_foreach_*` ops over all parameters of a group at
//    once: torch.optim's `foreach=True` code. On CUDA a handful of launches per step; on the
//    CPU LibTorch runs them tensor by tensor, so the result is bit-identical to kPerTensor.
//  - kFusedCpu: one pass per tensor through kernels/cpu/fused_cpu.h (contiguous fp32 CPU tensors
//  only;
//    kPerTensor's element-wise arithmetic and order; AdamW within an ulp of it, as ATen's own
//    kernels contract multiply-adds).
//  - kAuto: kFusedCpu where every tensor qualifies, else kMultiTensor. The default.
//
// Contract: a plain enum read by train/optim.h (AdamW), train/gradients.h,
// train/grad_scaler.h and ssl/teacher.h. kAuto, kPerTensor and kMultiTensor work on every
// device and dtype; an explicit kFusedCpu on a tensor the fused kernel does not take (CUDA,
// non-fp32, non-contiguous) throws xdino::Error; where a consumer has no fused kernel
// (clipping, the scaler, SGD, LARS) it takes the multi-tensor or per-tensor path instead.
#pragma once

namespace xdino::train {

enum class UpdatePath { kAuto, kPerTensor, kMultiTensor, kFusedCpu };

}  // namespace xdino::train
