// The bias and exact (erf) GELU after a Linear without its bias, on raw CPU pointers, compiled
// once per instruction set from kernels/cpu/bias_gelu_kernel.cpp with ATen's at::vec, as
// kernels/cpu/xca_core_kernel.h is (kernels/CMakeLists.txt). The autograd op
// (kernels/bias_gelu.h) picks the version the CPU runs and splits the rows over threads;
// these functions know nothing of tensors.
//
// Layout: h and out are (rows, cols) row-major, bias has cols values.
//  - bias_gelu_forward: out = gelu(h + bias) for the rows given, gelu(u) = u * Phi(u) with
//    Phi(u) = (1 + erf(u / sqrt 2)) / 2.
//  - bias_gelu_backward: dh = dout * (Phi(u) + u * phi(u)), u = h + bias, phi the standard
//    normal density; dbias_sum[c] += sum over these rows of dh[r, c] (the caller zeroes it and
//    sums the row blocks' partial sums in a fixed order).
// float32 uses an odd rational erf on |x| <= 4 (within 4e-7 of erf; 1 beyond in float), float64
// SLEEF's erf (1.0 ulp). Nothing throws; the caller checks shapes.
#pragma once

#include <cstdint>

namespace xdino::kernels {

// One set per ISA: namespace avx2 and namespace avx512 (the object's XDINO_ISA).
#define XDINO_BIAS_GELU_DECLARE(ns)                                                                \
  namespace ns {                                                                                   \
  template <typename T>                                                                            \
  void bias_gelu_forward(const T* h, const T* bias, T* out, int64_t rows, int64_t cols);           \
  template <typename T>                                                                            \
  void bias_gelu_backward(const T* dout, const T* h, const T* bias, T* dh, T* dbias_sum,           \
                          int64_t rows, int64_t cols);                                             \
  extern template void bias_gelu_forward<float>(const float*, const float*, float*, int64_t,       \
                                                int64_t);                                          \
  extern template void bias_gelu_forward<double>(const double*, const double*, double*, int64_t,   \
                                                 int64_t);                                         \
  extern template void bias_gelu_backward<float>(const float*, const float*, const float*, float*, \
                                                 float*, int64_t, int64_t);                        \
  extern template void bias_gelu_backward<double>(const double*, const double*, const double*,     \
                                                  double*, double*, int64_t, int64_t);             \
  }

XDINO_BIAS_GELU_DECLARE(avx2)
XDINO_BIAS_GELU_DECLARE(avx512)

}  // namespace xdino::kernels
