// Class attention's core on raw CPU pointers, compiled once per instruction set from
// kernels/cpu/class_attention_kernel.cpp with ATen's at::vec, as kernels/cpu/xca_core_kernel.h
// is (kernels/CMakeLists.txt). The autograd op (kernels/class_attention.h) picks the version
// the CPU runs and splits the (batch, head) items over threads; these functions know nothing
// of tensors.
//
// Layout (docs/architecture.md, "XCiT": only the CLS query attends):
//  - q: (B, h, d) contiguous, the CLS row's query; kv: (B, T, 2, h, d) contiguous, the keys and
//    values of all T tokens (CLS included), the k and v Linear's output as it comes.
//  - out: (B, h, d); attn: (B, h, T), the softmax weights.
// Forward of items [begin, end) of the B*h: attn_t = softmax_t(scale * q.k_t),
// out = sum_t attn_t v_t. Backward of the same items: dq and dkv's k and v parts of those
// items, each element written once (no zeroing needed). Nothing throws; the caller checks
// shapes.
#pragma once

#include <cstdint>

namespace xdino::kernels {

struct ClassAttentionDims {
  int64_t batch, tokens, heads, head_dim;
  double scale;
};

// One set per ISA: namespace avx2 and namespace avx512 (the object's XDINO_ISA).
#define XDINO_CLASS_ATTENTION_DECLARE(ns)                                                         \
  namespace ns {                                                                                  \
  template <typename T>                                                                           \
  void class_attention_forward(const ClassAttentionDims& dims, const T* q, const T* kv, T* out,   \
                               T* attn, int64_t begin, int64_t end);                              \
  template <typename T>                                                                           \
  void class_attention_backward(const ClassAttentionDims& dims, const T* dout, const T* q,        \
                                const T* kv, const T* attn, T* dq, T* dkv, int64_t begin,         \
                                int64_t end);                                                     \
  extern template void class_attention_forward<float>(const ClassAttentionDims&, const float*,    \
                                                      const float*, float*, float*, int64_t,      \
                                                      int64_t);                                   \
  extern template void class_attention_forward<double>(const ClassAttentionDims&, const double*,  \
                                                       const double*, double*, double*, int64_t,  \
                                                       int64_t);                                  \
  extern template void class_attention_backward<float>(const ClassAttentionDims&, const float*,   \
                                                       const float*, const float*, const float*,  \
                                                       float*, float*, int64_t, int64_t);         \
  extern template void class_attention_backward<double>(const ClassAttentionDims&, const double*, \
                                                        const double*, const double*,             \
                                                        const double*, double*, double*, int64_t, \
                                                        int64_t);                                 \
  }

XDINO_CLASS_ATTENTION_DECLARE(avx2)
XDINO_CLASS_ATTENTION_DECLARE(avx512)

}  // namespace xdino::kernels
