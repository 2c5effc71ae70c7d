// The differentiable token norm of token_norm.h, for models/ (docs/tiers.md, "A kernel").
//
// Contract:
//  - token_norm_applies(t, acc): true when token_norm below takes t: on a CUDA device, 1 to 4
//    dimensions, float32/float64/float16/bfloat16, a non-empty last dimension, and `acc` its
//    accumulation type (float64 for float64 t, float32 otherwise). Callers fall back to
//    models::token_norm otherwise.
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
