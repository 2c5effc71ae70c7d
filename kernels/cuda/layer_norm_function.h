// The differentiable LayerNorm of layer_norm.h, for models/ (docs/tiers.md, "A kernel").
//
// Contract:
//  - layer_norm_applies(x, weight, bias): true when layer_norm below takes these tensors: all
//    on one CUDA device, x contiguous in float32/float64/float16/bfloat16 with a non-empty last
//    dimension, weight and bias of that many entries. Callers fall back to torch's LayerNorm
//    otherwise.
//  - layer_norm(x, weight, bias, eps, out_dtype) equals
//    at::layer_norm(x.to(acc), {C}, weight, bias, eps).to(out_dtype) within float32 rounding
//    (acc: float64 for float64 x, else float32); out_dtype must be float64 for float64 x and
//    float32/float16/bfloat16 otherwise. Differentiable once in x, weight and bias: dx comes
//    back in x's dtype, the parameters' gradients in theirs. It holds x, mean and rstd for the
//    backward, as torch's LayerNorm does.
//  - residual_layer_norm_applies(x, branch, gamma, weight, bias): as above, and x float32 or
//    float64 with a branch of its shape (float32/float16/bfloat16, or float64 with float64 x),
//    gamma of C entries.
//  - residual_layer_norm(x, branch, gamma, factor, weight, bias, eps, out_dtype) returns
//    {y, n}: y = torch::addcmul(x, branch, gamma * factor) (factor: undefined, or the (B, 1, 1)
//    stochastic-depth factor of models/layers.h), n = layer_norm(y, weight, bias, eps,
//    out_dtype) from one pass over the row. Differentiable once in x, branch, gamma, weight and
//    bias (not in factor); holds y, branch, mean and rstd for the backward, whose one pass adds
//    y's gradient to what flows back from n.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace xdino::kernels {

bool layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, at::ScalarType out_dtype);

bool residual_layer_norm_applies(const at::Tensor& x, const at::Tensor& branch,
                                 const at::Tensor& gamma, const at::Tensor& weight,
                                 const at::Tensor& bias);

std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& branch,
                                                      const at::Tensor& gamma,
                                                      const at::Tensor& factor,
                                                      const at::Tensor& weight,
                                                      const at::Tensor& bias, double eps,
                                                      at::ScalarType out_dtype);

}  // namespace xdino::kernels
