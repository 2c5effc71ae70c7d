// A Linear's bias and the exact GELU after it as one differentiable op, for models/ (docs/
// tiers.md, "A kernel"): the MLP computes its first Linear without the bias and hands the
// product here. Run by kernels/cpu's vectorised kernel on the CPU (AVX2 or AVX-512,
// kernels/cpu/isa.h); torch::gelu(fc1(x)) is its reference and the path of every other tensor.
//
// Contract:
//  - bias_gelu_applies(h, bias): true when bias_gelu takes them: CPU tensors and a CPU the
//    kernel runs on (cpu_isa() != kNone), h a contiguous float32 or float64 tensor of one or
//    more dimensions and a non-empty last one, bias a 1-D tensor of h.size(-1) values of h's
//    dtype. Callers take their op path otherwise (autocast's bfloat16, a CUDA tensor).
//  - bias_gelu_takes_linear(x, weight, bias): true when bias_gelu takes linear(x, weight)
//    and bias, asked before the product is computed, so that a caller which splits a Linear
//    from its bias does so only where the kernel then runs (elsewhere it keeps torch's path,
//    op for op): CPU tensors and a CPU the kernel runs on, x float32 or float64 with one or
//    more dimensions, weight (out, x.size(-1)) and bias (out) of x's dtype, out >= 1.
//  - bias_gelu(h, bias) returns gelu(h + bias) (erf GELU, torch::gelu's default) in h's shape
//    and dtype: within float32 rounding and a few ulps of erf of torch's. Differentiable once
//    in h and bias (one backward pass computes both; only those with requires_grad get theirs
//    back); holds h and bias for the backward, as torch's GELU holds its input. The bias's
//    gradient is summed over fixed blocks of rows in a fixed order, so it does not depend on
//    the thread count. Threads: at::parallel_for over the rows.
//  - Throws xdino::Error on inputs bias_gelu_applies refuses.
#pragma once

#include <ATen/core/Tensor.h>

namespace xdino::kernels {

bool bias_gelu_applies(const at::Tensor& h, const at::Tensor& bias);

bool bias_gelu_takes_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

at::Tensor bias_gelu(const at::Tensor& h, const at::Tensor& bias);

}  // namespace xdino::kernels
