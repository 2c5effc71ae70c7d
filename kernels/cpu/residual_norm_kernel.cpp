// The LayerScale residual and its LayerNorm (kernels/cpu/residual_norm_kernel.h), compiled once
// per ISA like kernels/cpu/xca_core_kernel.cpp (only at::vec is included, for the same reason).
//
// Why a kernel: on the op path the residual is an addcmul and a multiply for the stochastic
// depth factor, and the norm re-reads y; backward, autograd adds y's two gradients in a pass of
// its own and sums gamma's gradient in another. Here each row (a few hundred values, in L1) is
// read once from memory each way (bench/results/training_step_cpu.md, "CPU step 3: residual +
// LayerNorm").
#include "kernels/cpu/residual_norm_kernel.h"

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/vec_tail.h"

namespace xdino::kernels::XDINO_ISA {
namespace {

using at::vec::Vectorized;

using vec_tail::load;
using vec_tail::store;

// v with the lanes from w on set to zero, so that a row's tail adds nothing to its sums.
template <typename T>
Vectorized<T> first_lanes(const Vectorized<T>& v, int64_t w) {
  using Vec = Vectorized<T>;
  return w == Vec::size() ? v : Vec::set(Vec(T(0)), v, w);
}

// The lanes' sum, in lane order (the same order whatever the row's length).
template <typename T>
T lane_sum(const Vectorized<T>& v) {
  T lanes[Vectorized<T>::size()];
  v.store(lanes);
  T s = 0;
  for (const T l : lanes) s += l;
  return s;
}

// The row's scale for the branch: gamma times its sample's stochastic-depth factor.
template <typename T>
T sample_scale(const T* factor, const ResidualNormRows& rows, int64_t r) {
  return factor == nullptr ? T(1) : factor[r / rows.rows_per_sample];
}

}  // namespace

template <typename T>
void residual_norm_forward(const ResidualNormRows& rows, const T* x, const T* branch,
                           const T* gamma, const T* factor, const T* weight, const T* bias, T eps,
                           T* y, T* n, T* mean, T* rstd) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  const int64_t C = rows.cols;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const T* xr = x + r * C;
    const T* br = branch + r * C;
    T* yr = y + r * C;
    const T keep_value = sample_scale(factor, rows, r);
    const Vec keep(keep_value);
    // y, and the sum of its differences from its first value (fma: the value stored below).
    const T first = std::fma(br[0], gamma[0] * keep_value, xr[0]);
    const Vec shift(first);
    Vec spread(T(0));
    for (int64_t c = 0; c < C; c += W) {
      const int64_t w = std::min<int64_t>(W, C - c);
      // gamma * keep first, as the op path multiplies them into one scale.
      const Vec v = at::vec::fmadd(load(br + c, w), load(gamma + c, w) * keep, load(xr + c, w));
      store(v, yr + c, w);
      spread = spread + first_lanes(v - shift, w);
    }
    const T mu = first + lane_sum(spread) / T(C);
    const Vec m(mu);
    Vec squares(T(0));
    for (int64_t c = 0; c < C; c += W) {
      const int64_t w = std::min<int64_t>(W, C - c);
      const Vec d = first_lanes(load(yr + c, w) - m, w);
      squares = at::vec::fmadd(d, d, squares);
    }
    const T inv = T(1) / std::sqrt(lane_sum(squares) / T(C) + eps);
    mean[r] = mu;
    rstd[r] = inv;
    const Vec s(inv);
    T* nr = n + r * C;
    for (int64_t c = 0; c < C; c += W) {
      const int64_t w = std::min<int64_t>(W, C - c);
      const Vec x_hat = (load(yr + c, w) - m) * s;
      store(at::vec::fmadd(x_hat, load(weight + c, w), load(bias + c, w)), nr + c, w);
    }
  }
}

template <typename T>
void residual_norm_backward(const ResidualNormRows& rows, const T* dn, const T* dy, const T* y,
                            const T* branch, const T* gamma, const T* factor, const T* weight,
                            const T* mean, const T* rstd, T* dx, T* dbranch, T* sums) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  const int64_t C = rows.cols;
  T* dgamma = sums;
  T* dweight = sums + C;
  T* dbias = sums + 2 * C;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const T* dnr = dn + r * C;
    const T* yr = y + r * C;
    const Vec m(mean[r]), s(rstd[r]);
    // mean(g) and mean(g * x_hat); the norm's parameters' sums on the way. A tail's lanes load
    // as zeros, so its g adds nothing to the sums.
    Vec g_sum(T(0)), gx_sum(T(0));
    for (int64_t c = 0; c < C; c += W) {
      const int64_t w = std::min<int64_t>(W, C - c);
      const Vec d = load(dnr + c, w);
      const Vec x_hat = (load(yr + c, w) - m) * s;
      const Vec g = d * load(weight + c, w);
      g_sum = g_sum + g;
      gx_sum = at::vec::fmadd(g, x_hat, gx_sum);
      store(at::vec::fmadd(d, x_hat, load(dweight + c, w)), dweight + c, w);
      store(load(dbias + c, w) + d, dbias + c, w);
    }
    const Vec mean_g(lane_sum(g_sum) / T(C)), mean_gx(lane_sum(gx_sum) / T(C));
    const T keep_value = sample_scale(factor, rows, r);
    const Vec keep(keep_value);
    const T* dyr = dy + r * C;
    const T* br = branch + r * C;
    T* dxr = dx + r * C;
    T* dbr = dbranch + r * C;
    for (int64_t c = 0; c < C; c += W) {
      const int64_t w = std::min<int64_t>(W, C - c);
      const Vec x_hat = (load(yr + c, w) - m) * s;
      const Vec g = load(dnr + c, w) * load(weight + c, w);
      const Vec total = at::vec::fmadd(s, g - mean_g - x_hat * mean_gx, load(dyr + c, w));
      store(total, dxr + c, w);
      store(total * (load(gamma + c, w) * keep), dbr + c, w);
      const Vec through = load(br + c, w) * keep;  // what gamma multiplied
      store(at::vec::fmadd(total, through, load(dgamma + c, w)), dgamma + c, w);
    }
  }
}

XDINO_RESIDUAL_NORM_INSTANTIATE(template, float)
XDINO_RESIDUAL_NORM_INSTANTIATE(template, double)

}  // namespace xdino::kernels::XDINO_ISA
