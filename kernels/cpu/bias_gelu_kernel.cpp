// The bias + GELU of a Linear's output (kernels/cpu/bias_gelu_kernel.h), compiled once per ISA
// like kernels/cpu/xca_core_kernel.cpp (only at::vec is included, for the same reason).
//
// Why a kernel: LibTorch 1.13's CPU GELU backward calls SLEEF's erf and exp per vector and runs
// at about four passes' worth of memory time, the forward at about two, and the Linear's bias
// costs a pass of its own each way (addmm's copy forward, a column sum backward). Here one
// pass each way does the bias, the GELU and the bias's gradient, with an erf of a few
// multiply-adds (bench/results/training_step_cpu.md, "CPU step 3: bias + GELU").
#include "kernels/cpu/bias_gelu_kernel.h"

#include <ATen/cpu/vec/vec.h>

#include <algorithm>

#include "kernels/cpu/vec_tail.h"

// GCC 12's avx512fintrin.h builds _mm512_max_ps/_mm512_min_ps from a self-initialised
// `__m512 __Y = __Y;` (GCC bug 105593), which -Wmaybe-uninitialized reports wherever they
// are inlined; nothing here is uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace xdino::kernels::XDINO_ISA {
namespace {

using at::vec::Vectorized;

using vec_tail::load;
using vec_tail::store;

// erf(x) for float32 as x * P(x^2) / Q(x^2) on [-4, 4], degrees 6 over 4; erf(4) rounds to 1
// in float32, so the clamp costs nothing. Measured within 3.4e-7 of erf over [-6, 6] (about 3
// float32 ulps of 1 at the worst point, near the clamp); tests/kernels/test_kernel_bias_gelu.cpp
// holds it to that against float64.
Vectorized<float> erf_of(Vectorized<float> x) {
  using Vec = Vectorized<float>;
  x = at::vec::clamp(x, Vec(-4.f), Vec(4.f));  // a NaN stays a NaN
  const Vec x2 = x * x;
  Vec p(-2.72614225801306e-10f);
  p = at::vec::fmadd(p, x2, Vec(2.77068142495902e-08f));
  p = at::vec::fmadd(p, x2, Vec(-2.10102402082508e-06f));
  p = at::vec::fmadd(p, x2, Vec(-5.69250639462346e-05f));
  p = at::vec::fmadd(p, x2, Vec(-7.34990630326855e-04f));
  p = at::vec::fmadd(p, x2, Vec(-2.95459980854025e-03f));
  p = at::vec::fmadd(p, x2, Vec(-1.60960333262415e-02f));
  Vec q(-1.45660718464996e-05f);
  q = at::vec::fmadd(q, x2, Vec(-2.13374055278905e-04f));
  q = at::vec::fmadd(q, x2, Vec(-1.68282697438203e-03f));
  q = at::vec::fmadd(q, x2, Vec(-7.37332916720468e-03f));
  q = at::vec::fmadd(q, x2, Vec(-1.42647390514189e-02f));
  return x * p / q;
}

// float64 keeps SLEEF's erf: the CPU's float64 path is the tests' and the digest's, not a hot one.
Vectorized<double> erf_of(const Vectorized<double>& x) { return x.erf(); }

// Phi(u) = (1 + erf(u / sqrt 2)) / 2.
template <typename T>
Vectorized<T> normal_cdf(const Vectorized<T>& u) {
  using Vec = Vectorized<T>;
  return Vec(T(0.5)) * (Vec(T(1)) + erf_of(u * Vec(T(0.70710678118654752440))));
}

}  // namespace

template <typename T>
void bias_gelu_forward(const T* h, const T* bias, T* out, int64_t rows, int64_t cols) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  for (int64_t r = 0; r < rows; ++r) {
    const T* hr = h + r * cols;
    T* o = out + r * cols;
    for (int64_t c = 0; c < cols; c += W) {
      const int64_t w = std::min<int64_t>(W, cols - c);
      const Vec u = load(hr + c, w) + load(bias + c, w);
      store(u * normal_cdf(u), o + c, w);
    }
  }
}

template <typename T>
void bias_gelu_backward(const T* dout, const T* h, const T* bias, T* dh, T* dbias_sum, int64_t rows,
                        int64_t cols) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  const Vec inv_sqrt_2pi(T(0.39894228040143267794));
  const Vec minus_half(T(-0.5));
  for (int64_t r = 0; r < rows; ++r) {
    const T* hr = h + r * cols;
    const T* gr = dout + r * cols;
    T* o = dh + r * cols;
    for (int64_t c = 0; c < cols; c += W) {
      const int64_t w = std::min<int64_t>(W, cols - c);
      const Vec u = load(hr + c, w) + load(bias + c, w);
      const Vec density = (minus_half * u * u).exp() * inv_sqrt_2pi;
      const Vec du = load(gr + c, w) * at::vec::fmadd(u, density, normal_cdf(u));
      store(du, o + c, w);
      store(load(dbias_sum + c, w) + du, dbias_sum + c, w);
    }
  }
}

template void bias_gelu_forward<float>(const float*, const float*, float*, int64_t, int64_t);
template void bias_gelu_forward<double>(const double*, const double*, double*, int64_t, int64_t);
template void bias_gelu_backward<float>(const float*, const float*, const float*, float*, float*,
                                        int64_t, int64_t);
template void bias_gelu_backward<double>(const double*, const double*, const double*, double*,
                                         double*, int64_t, int64_t);

}  // namespace xdino::kernels::XDINO_ISA
