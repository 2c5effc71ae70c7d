// XCA's differentiable per-channel token norm, for models/ (docs/tiers.md, "A kernel"): one
// autograd op whose forward and backward run kernels/cuda's kernels on a CUDA device of a build
// with them and kernels/reference's ATen ops elsewhere, with the same inputs, saved tensors
// and gradients on both (the op path is models::token_norm).
//
// Contract:
//  - token_norm_applies(t, acc): true when token_norm below takes t: on the CPU, or on a CUDA
//    device in a build with kernels/cuda; 1 to 4 dimensions, float32/float64/float16/bfloat16,
//    any strides, a non-empty last dimension, and `acc` its accumulation type (float64 for
//    float64 t, float32 otherwise). Callers fall back to models::token_norm otherwise.
//  - token_norm(t) equals models::token_norm(t, acc) within float rounding: |t|_2 over the
//    last dimension, max(|t|, 1e-12), (..., 1) in acc, gradient 0 for an all-zero vector.
//    Differentiable once; holds t, n and a bool per row for the backward, whose gradient comes
//    back in t's dtype.
#pragma once

#include <ATen/core/Tensor.h>

namespace xdino::kernels {

bool token_norm_applies(const at::Tensor& t, at::ScalarType acc);

at::Tensor token_norm(const at::Tensor& t);

}  // namespace xdino::kernels
