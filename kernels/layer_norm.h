// The differentiable fused LayerNorms, for models/ (docs/tiers.md, "A kernel"): one autograd op
// each, whose forward and backward run kernels/cuda's kernels on a CUDA device of a build with
// them, kernels/cpu's vectorised kernel on the CPU tensors it takes (the residual LayerNorm,
// kernels/cpu/norms.h), and kernels/reference's ATen ops on any other tensor. Inputs, optional
// arguments, saved tensors and returned gradients are the same on both, so the CPU build tests all
// of it but the kernels' arithmetic.
//
// Contract:
//  - layer_norm_applies(x, weight, bias): true when layer_norm below takes these tensors: all
//    on one device (CUDA only in a build with kernels/cuda), x contiguous in
//    float32/float64/float16/bfloat16 with a non-empty last dimension, weight and bias float
//    tensors of that many entries. Callers fall back to torch's LayerNorm otherwise.
//  - layer_norm(x, weight, bias, eps, out_dtype) equals
//    at::layer_norm(x.to(acc), {C}, weight, bias, eps).to(out_dtype) within the rounding of
//    acc (float64 for float64 x, else float32); out_dtype must be float64 for float64 x and
//    float32/float16/bfloat16 otherwise. Differentiable once in x, weight and bias, each
//    optional (requires_grad off: no gradient computed for it); dx comes back in x's dtype, the
//    parameters' gradients in theirs. It holds x, mean and rstd for the backward, as torch's
//    LayerNorm does.
//  - residual_layer_norm_applies(x, branch, gamma, weight, bias): as above, and x float32 or
//    float64 with a contiguous branch of its shape (float32/float16/bfloat16, or float64 with
//    float64 x), x of 2 or more dimensions, gamma of C entries.
//  - residual_layer_norm(x, branch, gamma, factor, weight, bias, eps, out_dtype) returns {y, n}:
//    y = torch::addcmul(x, branch, gamma * factor) and n = layer_norm(y, weight, bias, eps,
//    out_dtype) from one pass over each row. factor is absent (std::nullopt or an undefined
//    tensor: eval mode, or stochastic depth off) or the (B, 1, ..., 1) per-sample factor of
//    models/layers.h. Differentiable once in x, branch, gamma, weight and bias (not in
//    factor); holds y, branch, gamma, weight, mean, rstd and the factor for the backward, whose
//    one pass adds y's gradient to what flows back from n.
//  - residual_layer_norm_has_cpu_kernel(x, branch, gamma, weight, bias, out_dtype): whether
//    residual_layer_norm runs these (with any factor of x's dtype) by kernels/cpu's vectorised
//    kernel rather than the reference: CPU tensors, all float32 or all float64, out_dtype x's,
//    on an AVX2 or AVX-512 CPU (kernels/cpu/norms.h). Callers that would otherwise take
//    torch's ops on the CPU ask it (models/layers.h, kAuto).
//  - cuda_kernels_built(): whether this build has kernels/cuda (a CUDA LibTorch).
//  - Throws xdino::Error on what the backends refuse (callers ask *_applies first).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <utility>

namespace xdino::kernels {

bool cuda_kernels_built();

bool layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, at::ScalarType out_dtype);

bool residual_layer_norm_has_cpu_kernel(const at::Tensor& x, const at::Tensor& branch,
                                        const at::Tensor& gamma, const at::Tensor& weight,
                                        const at::Tensor& bias, at::ScalarType out_dtype);

bool residual_layer_norm_applies(const at::Tensor& x, const at::Tensor& branch,
                                 const at::Tensor& gamma, const at::Tensor& weight,
                                 const at::Tensor& bias);

std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& branch,
                                                      const at::Tensor& gamma,
                                                      const c10::optional<at::Tensor>& factor,
                                                      const at::Tensor& weight,
                                                      const at::Tensor& bias, double eps,
                                                      at::ScalarType out_dtype);

}  // namespace xdino::kernels
