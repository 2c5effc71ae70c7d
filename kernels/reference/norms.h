// The fused norms' arithmetic in ATen ops: the backend that the autograd ops of
// kernels/layer_norm.h and kernels/token_norm.h run on every tensor that is not on a CUDA
// device of a build with kernels/cuda (docs/tiers.md, "A kernel"). Each function has the
// signature, the contract and the dtypes of its CUDA twin in kernels/cuda/layer_norm.h and
// kernels/cuda/token_norm.h, so that the ops' plumbing (optional inputs, saved tensors,
// gradients, dtypes) is the same on both and runs in the CPU-only build, where CI tests it;
// only the kernels' own arithmetic is left for a card.
//
// Why ATen ops and not at::native_layer_norm: this is a reference for the kernels, computed as
// they compute (two-pass variance in the accumulation type, the input gradient as
// rstd * (g - mean(g) - x_hat * mean(g * x_hat)), column sums for the parameters), in plain
// ops that a reader can check against the formulas.
//
// Contract: as the CUDA functions', except that the tensors may be on any device and need not
// be contiguous; everything is computed in the accumulation type (float64 for float64 input,
// float32 otherwise) and rounded once to each output's dtype. Throws xdino::Error on shapes or
// dtypes the CUDA functions refuse.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <utility>

namespace xdino::kernels::reference {

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

std::pair<at::Tensor, at::Tensor> token_norm_forward(const at::Tensor& t);

at::Tensor token_norm_backward(const at::Tensor& dn, const at::Tensor& t, const at::Tensor& n,
                               const at::Tensor& passes);

}  // namespace xdino::kernels::reference
