// XCA's attention core on raw CPU pointers, compiled once per instruction set from
// kernels/cpu/xca_core_kernel.cpp with ATen's at::vec (kernels/CMakeLists.txt: one object per
// ISA, its namespace named after it), so one source serves AVX2 and AVX-512. The autograd op
// (kernels/xca_core.h) picks the version the CPU runs (kernels/cpu/isa.h) and splits the
// (batch, head) items over threads; these functions know nothing of tensors.
//
// Layout (docs/tiers.md, "A kernel"; docs/architecture.md has XCA's formula):
//  - qkv: (B, N, 3, h, d) contiguous, the qkv Linear's output; q(n, i) of item (b, hh) is
//    qkv[((b*N + n)*3 + 0)*h*d + hh*d + i], k and v at parts 1 and 2.
//  - temperature: h values. out: (B, N, h*d), what XCA's projection takes.
//  - attn: (B, h, d, d), softmax over its last index; q_sq, k_sq: (B, h, d), the squared
//    token norms of q's and k's channels (before the 1e-24 clamp, so the backward knows where
//    the clamp held).
// Forward of items [begin, end) of the B*h: attn = softmax_j(q_i.k_j / (|q_i| |k_j|) * t_hh)
// with |.| = sqrt(max(sum of squares, 1e-24)), out_i = sum_j attn_ij v_j. Backward of the same
// items: dqkv's q, k and v parts of those items, each element written once (no zeroing
// needed), and dtemperature_items[b*h + hh], the temperature's gradient from that item alone
// (the caller sums them over b in a fixed order). Nothing throws; the caller checks shapes.
#pragma once

#include <cstdint>

namespace xdino::kernels {

struct XcaCoreDims {
  int64_t batch, tokens, heads, head_dim;
};

// One set per ISA: namespace avx2 and namespace avx512 (the object's XDINO_ISA).
#define XDINO_XCA_CORE_DECLARE(ns)                                                                 \
  namespace ns {                                                                                   \
  template <typename T>                                                                            \
  void xca_core_forward(const XcaCoreDims& dims, const T* qkv, const T* temperature, T* out,       \
                        T* attn, T* q_sq, T* k_sq, int64_t begin, int64_t end);                    \
  template <typename T>                                                                            \
  void xca_core_backward(const XcaCoreDims& dims, const T* dout, const T* qkv,                     \
                         const T* temperature, const T* attn, const T* q_sq, const T* k_sq,        \
                         T* dqkv, T* dtemperature_items, int64_t begin, int64_t end);              \
  extern template void xca_core_forward<float>(const XcaCoreDims&, const float*, const float*,     \
                                               float*, float*, float*, float*, int64_t, int64_t);  \
  extern template void xca_core_forward<double>(const XcaCoreDims&, const double*, const double*,  \
                                                double*, double*, double*, double*, int64_t,       \
                                                int64_t);                                          \
  extern template void xca_core_backward<float>(const XcaCoreDims&, const float*, const float*,    \
                                                const float*, const float*, const float*,          \
                                                const float*, float*, float*, int64_t, int64_t);   \
  extern template void xca_core_backward<double>(const XcaCoreDims&, const double*, const double*, \
                                                 const double*, const double*, const double*,      \
                                                 const double*, double*, double*, int64_t,         \
                                                 int64_t);                                         \
  }

XDINO_XCA_CORE_DECLARE(avx2)
XDINO_XCA_CORE_DECLARE(avx512)

}  // namespace xdino::kernels
