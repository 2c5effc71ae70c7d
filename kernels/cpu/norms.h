// The residual LayerNorm of kernels/layer_norm.h on the CPU, by kernels/cpu's vectorised kernel
// (kernels/cpu/residual_norm_kernel.h, AVX2 or AVX-512): the backend that the autograd op runs
// on the CPU tensors it takes, beside kernels/reference (every other tensor off a card) and
// kernels/cuda. The functions have the signatures, outputs and dtypes of their twins in
// kernels/reference/norms.h, so the op saves the same tensors whichever ran.
//
// Contract:
//  - residual_layer_norm_takes(x, branch, gamma, factor, weight, bias, out_dtype): true on a
//    CPU the kernel runs on (cpu_isa() != kNone) for CPU tensors x (2 or more dimensions) and
//    branch of one shape, contiguous, and gamma, weight, bias (C values each) and the factor
//    where defined (one per sample), all float32 or all float64, with out_dtype x's dtype (so
//    not under autocast, whose bfloat16 branch and output the reference takes).
//  - residual_layer_norm_backward_takes(dn, dy, y, branch, gamma, factor, weight): the same of
//    the backward's tensors (dn and dy of y's shape and dtype).
//  - residual_layer_norm_forward / _backward: as the reference's, within float32 rounding of
//    it (the same passes: the mean about the row's first value, a two-pass variance). Rows are
//    split over threads (at::parallel_for); the parameters' gradients are summed per fixed
//    block of 64 rows and the blocks added in order in float64, so they do not depend on the
//    thread count.
//  - Throws xdino::Error on inputs the *_takes above refuse.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace xdino::kernels::cpu {

bool residual_layer_norm_takes(const at::Tensor& x, const at::Tensor& branch,
                               const at::Tensor& gamma, const at::Tensor& factor,
                               const at::Tensor& weight, const at::Tensor& bias,
                               at::ScalarType out_dtype);

bool residual_layer_norm_backward_takes(const at::Tensor& dn, const at::Tensor& dy,
                                        const at::Tensor& y, const at::Tensor& branch,
                                        const at::Tensor& gamma, const at::Tensor& factor,
                                        const at::Tensor& weight);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& weight, const at::Tensor& bias, double eps,
    at::ScalarType out_dtype);

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight,
    const at::Tensor& mean, const at::Tensor& rstd);

}  // namespace xdino::kernels::cpu
