// XCA's per-channel token norm, |t|_2 over the last dimension clamped as F.normalize clamps it,
// as one CUDA kernel each way (docs/tiers.md, "A kernel"; the op path is models::token_norm).
//
// Why: q and k are (B, h, d, N) views of the qkv output with the tokens 3C elements apart. The
// op path casts each to float32, squares and sums it (three kernels and two float32 copies per
// tensor), and its backward writes t * scale in float32 and casts that back. Here the forward
// reads t once, and the backward writes the gradient once, in t's dtype, in the qkv output's
// own order (channels fastest), so that both stay coalesced.
//
// Contract (plain functions; the autograd op is kernels/token_norm.h; kernels/reference/norms.h
// has the same functions in ATen ops):
//  - t: CUDA, 1 to 4 dimensions, any strides, float32/float64/float16/bfloat16, last dimension
//    N >= 1. Sums run in float64 for float64 t, float32 otherwise (the accumulation type).
//  - token_norm_forward(t) returns {n, passes}: n of t's shape with the last dimension 1, in
//    the accumulation type, n = sqrt(max(sum t^2, 1e-24)); passes (bool, n's shape) marks the
//    rows whose sum reached 1e-24, the only ones the clamp lets a gradient through.
//  - token_norm_backward(dn, t, n, passes) returns dt = t * dn / n where passes (0 elsewhere),
//    of t's shape and dtype, laid out with its last dimension slowest after the first.
//  - Throws xdino::Error (core/check.h) on what it does not take; callers ask
//    token_norm_applies first (kernels/token_norm.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace xdino::kernels::cuda {

std::pair<at::Tensor, at::Tensor> token_norm_forward(const at::Tensor& t);

at::Tensor token_norm_backward(const at::Tensor& dn, const at::Tensor& t, const at::Tensor& n,
                               const at::Tensor& passes);

}  // namespace xdino::kernels::cuda
