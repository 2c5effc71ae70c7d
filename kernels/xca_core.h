// XCA's attention core as one differentiable op, for models/ (docs/tiers.md, "A kernel"): the
// token norms of q and k, the per-head d x d products, the temperature, the softmax and the
// product with v, forward and backward, run by kernels/cpu's vectorised kernel on the CPU
// (AVX2 or AVX-512, kernels/cpu/isa.h). XCA's op path (models/xcit_layers.cpp) is its
// reference and the path of every other tensor.
//
// Contract:
//  - xca_core_applies(qkv, temperature, heads): true when xca_core takes them: CPU tensors and
//    a CPU the kernel runs on (cpu_isa() != kNone), qkv a contiguous (B, N, 3C) float32 or
//    float64 tensor with N >= 1 and C a multiple of heads, temperature heads entries of qkv's
//    dtype. Callers take their op path otherwise (autocast's bfloat16, a CUDA tensor).
//  - xca_core(qkv, temperature, heads) returns out (B, N, C), out[b, n, hh*d + i] =
//    sum_j attn[b, hh, i, j] v[b, hh, j, n], attn = softmax_j(q_i.k_j / (|q_i| |k_j|) t_hh),
//    with q, k, v the (B, h, d, N) parts of qkv and |.| F.normalize's max(norm, 1e-12): XCA's
//    op path up to float rounding. Differentiable once in qkv and temperature (one
//    backward pass computes both; only those with requires_grad get theirs back); holds qkv,
//    temperature, attn (B, h, d, d) and the squared norms (B, h, d) for the backward. Threads:
//    at::parallel_for over the B*h items.
//  - Throws xdino::Error on inputs xca_core_applies refuses.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xdino::kernels {

bool xca_core_applies(const at::Tensor& qkv, const at::Tensor& temperature, int64_t heads);

at::Tensor xca_core(const at::Tensor& qkv, const at::Tensor& temperature, int64_t heads);

}  // namespace xdino::kernels
