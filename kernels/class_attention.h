// Class attention's core as one differentiable op, for models/ (docs/tiers.md, "A kernel"): the
// CLS query's products with every key, the scale, the softmax and the weighted sum of the
// values, forward and backward, run by kernels/cpu's vectorised kernel on the CPU (AVX2 or
// AVX-512, kernels/cpu/isa.h). ClassAttention's op path (models/xcit_layers.cpp) is its
// reference and the path of every other tensor.
//
// Contract:
//  - class_attention_applies(q, kv, heads): true when class_attention takes them: CPU tensors
//    and a CPU the kernel runs on (cpu_isa() != kNone), q a contiguous (B, C) and kv a
//    contiguous (B, T, 2C) tensor, both float32 or both float64, T >= 1, C a non-zero multiple
//    of heads. Callers take their op path otherwise (autocast's bfloat16, a CUDA tensor).
//  - class_attention(q, kv, heads) returns out (B, C), out[b, hh*d + i] =
//    sum_t attn[b, hh, t] v[b, t, hh, i], attn = softmax_t(q[b, hh, :].k[b, t, hh, :] / sqrt d),
//    with k and v kv's (B, T, h, d) halves: the op path up to float rounding. Differentiable
//    once in q and kv (one backward pass computes both; only those with requires_grad get
//    theirs back); holds q, kv and attn (B, h, T) for the backward. Threads: at::parallel_for
//    over the B*h items, each item's result the same whatever the thread count.
//  - Throws xdino::Error on inputs class_attention_applies refuses.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xdino::kernels {

bool class_attention_applies(const at::Tensor& q, const at::Tensor& kv, int64_t heads);

at::Tensor class_attention(const at::Tensor& q, const at::Tensor& kv, int64_t heads);

}  // namespace xdino::kernels
