// LayerNorm over the last dimension, alone or after XCiT's LayerScale residual, as CUDA kernels
// that read the input once and write the output directly in the dtype the next matrix product takes
// (docs/tiers.md, "A kernel").
//
// Why: under autocast LibTorch runs layer_norm in float32, writes a float32 result, and the
// next Linear or convolution casts it to bfloat16/float16 in a kernel of its own; backward does
// the reverse cast before layer_norm_backward. On an H100 the XCiT-S12/16 step spends 18% of its
// kernel time in norms and 22% in casts and copies (bench/results/gpu.md, "The step alone").
// Here the forward reads x and writes y once, and the backward takes the low-precision
// gradient as it comes.
//
// Contract (plain functions; the autograd op is kernels/layer_norm.h; kernels/reference/norms.h
// has the same functions in ATen ops):
//  - x: CUDA, contiguous, float32/float64/bfloat16/float16, (..., C) with C >= 1.
//  - weight, bias: (C,), contiguous, on x's device, any float dtype (read in the
//    accumulation type: float64 for float64 input, float32 otherwise).
//  - layer_norm_forward returns {y, mean, rstd}: y of x's shape in `out_dtype`; mean and
//    rstd (rows,) in the accumulation type, rstd = 1 / sqrt(var + eps), var biased, as
//    at::native_layer_norm computes them.
//  - layer_norm_backward(dy, x, weight, mean, rstd) returns {dx, dweight, dbias}: dx in x's
//    dtype, dweight and dbias in weight's dtype. dy: y's shape, any float dtype, contiguous.
//  - residual_layer_norm_forward(x, branch, gamma, factor, weight, bias, eps, out_dtype) first
//    forms the residual y = x + branch * gamma * factor[sample] (XCiT's LayerScale, and
//    stochastic depth when `factor`, (B,) or (B, 1, 1), is defined), then normalises it as
//    above: returns {y, n, mean, rstd}, y in x's dtype, n in out_dtype. x: float32 or float64
//    (B, ..., C); branch: x's shape, float32/float16/bfloat16 (float64 with float64 x); gamma
//    (C,). Its backward takes dn (n's gradient, any float dtype) and dy (y's, x's dtype) and
//    returns {dx, dbranch, dgamma, dweight, dbias}, each in its input's dtype.
//  - Throws xdino::Error (core/check.h) on a device, layout, shape or dtype it does not take;
//    callers ask layer_norm_applies / residual_layer_norm_applies first
//    (kernels/layer_norm.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace xdino::kernels::cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& x,
                                                                  const at::Tensor& weight,
                                                                  const at::Tensor& bias,
                                                                  double eps,
                                                                  at::ScalarType out_dtype);

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& dy,
                                                                   const at::Tensor& x,
                                                                   const at::Tensor& weight,
                                                                   const at::Tensor& mean,
                                                                   const at::Tensor& rstd);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& weight, const at::Tensor& bias, double eps,
    at::ScalarType out_dtype);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight,
    const at::Tensor& mean, const at::Tensor& rstd);

}  // namespace xdino::kernels::cuda
