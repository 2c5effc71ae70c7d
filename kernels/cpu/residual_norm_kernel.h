// The LayerScale residual and the LayerNorm after it (XCiT's y = x + s * gamma * branch, then
// n = LayerNorm(y)) on raw CPU pointers, compiled once per instruction set from
// kernels/cpu/residual_norm_kernel.cpp with ATen's at::vec, as kernels/cpu/xca_core_kernel.h
// is (kernels/CMakeLists.txt). kernels/cpu/norms.h wraps them in tensors and splits the rows
// over threads; these functions know nothing of tensors.
//
// Layout: x, branch, y, n, dn, dy, dx, dbranch are (rows, cols) row-major; gamma, weight, bias
// have cols values; mean and rstd one per row. `factor` is null (no stochastic depth) or holds
// one value per sample, row r belonging to sample r / rows_per_sample.
//  - residual_norm_forward, rows [begin, end): y = x + branch * gamma * s, mean and rstd of y
//    as kernels/reference/norms.cpp computes them (the mean as the row's first value plus the
//    mean of the differences from it, then a second pass for the variance: rstd =
//    1 / sqrt(var + eps)), n = (y - mean) * rstd * weight + bias.
//  - residual_norm_backward, rows [begin, end): with x_hat = (y - mean) * rstd and
//    g = dn * weight, the residual's gradient total = dy + rstd * (g - mean(g) -
//    x_hat * mean(g * x_hat)) goes to dx, total * gamma * s to dbranch, and sums over these
//    rows are added into sums[0..cols) (gamma's: total * branch * s), sums[cols..2 cols)
//    (weight's: dn * x_hat) and sums[2 cols..3 cols) (bias's: dn); the caller zeroes them and
//    adds the row blocks' sums in a fixed order.
// Nothing throws; the caller checks shapes and dtypes.
#pragma once

#include <cstdint>

namespace xdino::kernels {

struct ResidualNormRows {
  int64_t begin, end, cols, rows_per_sample;
};

// The instantiations for float and double, declared (`extern template`) here and made
// (`template`) in the ISA's object.
#define XDINO_RESIDUAL_NORM_INSTANTIATE(how, T)                                                  \
  how void residual_norm_forward<T>(const ResidualNormRows&, const T*, const T*, const T*,       \
                                    const T*, const T*, const T*, T, T*, T*, T*, T*);            \
  how void residual_norm_backward<T>(const ResidualNormRows&, const T*, const T*, const T*,      \
                                     const T*, const T*, const T*, const T*, const T*, const T*, \
                                     T*, T*, T*);

// One set per ISA: namespace avx2 and namespace avx512 (the object's XDINO_ISA).
#define XDINO_RESIDUAL_NORM_DECLARE(ns)                                                           \
  namespace ns {                                                                                  \
  template <typename T>                                                                           \
  void residual_norm_forward(const ResidualNormRows& rows, const T* x, const T* branch,           \
                             const T* gamma, const T* factor, const T* weight, const T* bias,     \
                             T eps, T* y, T* n, T* mean, T* rstd);                                \
  template <typename T>                                                                           \
  void residual_norm_backward(const ResidualNormRows& rows, const T* dn, const T* dy, const T* y, \
                              const T* branch, const T* gamma, const T* factor, const T* weight,  \
                              const T* mean, const T* rstd, T* dx, T* dbranch, T* sums);          \
  XDINO_RESIDUAL_NORM_INSTANTIATE(extern template, float)                                         \
  XDINO_RESIDUAL_NORM_INSTANTIATE(extern template, double)                                        \
  }

XDINO_RESIDUAL_NORM_DECLARE(avx2)
XDINO_RESIDUAL_NORM_DECLARE(avx512)

}  // namespace xdino::kernels
