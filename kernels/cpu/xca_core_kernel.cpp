// XCA's attention core (kernels/cpu/xca_core_kernel.h), compiled once per ISA: CMake builds this
// file with XDINO_ISA=avx2 (-mavx2 -mfma, CPU_CAPABILITY_AVX2) and XDINO_ISA=avx512 (-mavx512f/
// bw/vl/dq, CPU_CAPABILITY_AVX512), so at::vec::Vectorized<T> is 256 or 512 bits wide. Only
// at::vec is included: every inline function this file instantiates lives in at::vec's
// per-capability namespace or in ours, so the linker never picks an AVX-512 copy of a function
// that an AVX2 object also uses.
//
// Why a kernel: LibTorch 1.13's CPU bmm runs XCA's (B*h) small d x d products as one GEMM call
// per item after three `select`s, ~92k selects per main-job step, and the normalise, scale and
// softmax around them are ten more passes over (B, h, d, d) tensors, forward and backward
// (bench/results/training_step_cpu.md, "CPU step 3"). Here one pass per item does the lot, with
// every product a register-blocked loop over rows that sit in L1.
#include "kernels/cpu/xca_core_kernel.h"

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vec_tail.h"

namespace xdino::kernels::XDINO_ISA {
namespace {

using at::vec::Vectorized;

// Rows of a (B, N, ...) buffer: row n of this item at base + n * stride.
template <typename T>
struct Rows {
  const T* base;
  int64_t stride;
  const T* row(int64_t n) const { return base + n * stride; }
};

using vec_tail::load;
using vec_tail::store;

// c(i, j) = sum_n a(n, i) * b(n, j) for i, j < d (c row-major, d x d). Four rows of c at a
// time: four independent accumulators per column chunk hide the multiply-add latency.
template <typename T>
void outer_sum(Rows<T> a, Rows<T> b, int64_t N, int64_t d, T* c) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) {
    for (int64_t j = 0; j < d; j += W) {
      const int64_t w = std::min<int64_t>(W, d - j);
      Vec c0(T(0)), c1(T(0)), c2(T(0)), c3(T(0));
      for (int64_t n = 0; n < N; ++n) {
        const T* an = a.row(n) + i;
        const Vec bn = load(b.row(n) + j, w);
        c0 = at::vec::fmadd(Vec(an[0]), bn, c0);
        c1 = at::vec::fmadd(Vec(an[1]), bn, c1);
        c2 = at::vec::fmadd(Vec(an[2]), bn, c2);
        c3 = at::vec::fmadd(Vec(an[3]), bn, c3);
      }
      store(c0, c + (i + 0) * d + j, w);
      store(c1, c + (i + 1) * d + j, w);
      store(c2, c + (i + 2) * d + j, w);
      store(c3, c + (i + 3) * d + j, w);
    }
  }
  for (; i < d; ++i) {
    for (int64_t j = 0; j < d; j += W) {
      const int64_t w = std::min<int64_t>(W, d - j);
      Vec acc(T(0));
      for (int64_t n = 0; n < N; ++n)
        acc = at::vec::fmadd(Vec(a.row(n)[i]), load(b.row(n) + j, w), acc);
      store(acc, c + i * d + j, w);
    }
  }
}

// o(n, c) = sum_r s(n, r) * m(r, c) [+ diag(c) * x(n, c)] for n < N, c < d (m row-major,
// d x d; o's rows `o_stride` apart). Four rows of o at a time, as outer_sum.
template <typename T>
void rows_times(Rows<T> s, const T* m, int64_t N, int64_t d, T* o, int64_t o_stride,
                const T* diag = nullptr, Rows<T> x = {nullptr, 0}) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  const auto finish = [&](Vec acc, int64_t n, int64_t c, int64_t w) {
    if (diag != nullptr) acc = at::vec::fmadd(load(diag + c, w), load(x.row(n) + c, w), acc);
    store(acc, o + n * o_stride + c, w);
  };
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    for (int64_t c = 0; c < d; c += W) {
      const int64_t w = std::min<int64_t>(W, d - c);
      Vec o0(T(0)), o1(T(0)), o2(T(0)), o3(T(0));
      const T *s0 = s.row(n), *s1 = s.row(n + 1), *s2 = s.row(n + 2), *s3 = s.row(n + 3);
      for (int64_t r = 0; r < d; ++r) {
        const Vec mr = load(m + r * d + c, w);
        o0 = at::vec::fmadd(Vec(s0[r]), mr, o0);
        o1 = at::vec::fmadd(Vec(s1[r]), mr, o1);
        o2 = at::vec::fmadd(Vec(s2[r]), mr, o2);
        o3 = at::vec::fmadd(Vec(s3[r]), mr, o3);
      }
      finish(o0, n, c, w);
      finish(o1, n + 1, c, w);
      finish(o2, n + 2, c, w);
      finish(o3, n + 3, c, w);
    }
  }
  for (; n < N; ++n) {
    for (int64_t c = 0; c < d; c += W) {
      const int64_t w = std::min<int64_t>(W, d - c);
      Vec acc(T(0));
      for (int64_t r = 0; r < d; ++r)
        acc = at::vec::fmadd(Vec(s.row(n)[r]), load(m + r * d + c, w), acc);
      finish(acc, n, c, w);
    }
  }
}

// sum_n a(n, i)^2 for i < d.
template <typename T>
void squares(Rows<T> a, int64_t N, int64_t d, T* out) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  for (int64_t i = 0; i < d; i += W) {
    const int64_t w = std::min<int64_t>(W, d - i);
    Vec acc(T(0));
    for (int64_t n = 0; n < N; ++n) {
      const Vec v = load(a.row(n) + i, w);
      acc = at::vec::fmadd(v, v, acc);
    }
    store(acc, out + i, w);
  }
}

// F.normalize's divisor from a squared sum: sqrt(max(sq, 1e-24)).
template <typename T>
T norm_of(T sq) {
  return std::sqrt(std::max(sq, T(1e-24)));
}

template <typename T>
void transpose(const T* m, int64_t d, T* t) {
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; ++j) t[j * d + i] = m[i * d + j];
}

// One (b, hh) item's pointers.
template <typename T>
struct Item {
  Rows<T> q, k, v;
  int64_t b, hh;
};

template <typename T>
Item<T> item_of(const XcaCoreDims& dims, const T* qkv, int64_t index) {
  const int64_t C = dims.heads * dims.head_dim, b = index / dims.heads, hh = index % dims.heads;
  const T* q = qkv + b * dims.tokens * 3 * C + hh * dims.head_dim;
  return {{q, 3 * C}, {q + C, 3 * C}, {q + 2 * C, 3 * C}, b, hh};
}

// logits(i, j) = raw(i, j) / (nq_i * nk_j) * t, in place, in the op path's order.
template <typename T>
void scale_logits(T* raw, const T* nq, const T* nk, T t, int64_t d) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < d; j += W) {
      const int64_t w = std::min<int64_t>(W, d - j);
      const Vec denominator = Vec(nq[i]) * load(nk + j, w);
      store(load(raw + i * d + j, w) / denominator * Vec(t), raw + i * d + j, w);
    }
}

}  // namespace

template <typename T>
void xca_core_forward(const XcaCoreDims& dims, const T* qkv, const T* temperature, T* out, T* attn,
                      T* q_sq, T* k_sq, int64_t begin, int64_t end) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  const int64_t N = dims.tokens, d = dims.head_dim, C = dims.heads * d;
  std::vector<T> nq(d), nk(d), attn_t(d * d);
  for (int64_t index = begin; index < end; ++index) {
    const Item<T> it = item_of(dims, qkv, index);
    T* qs = q_sq + index * d;
    T* ks = k_sq + index * d;
    T* a = attn + index * d * d;
    squares(it.q, N, d, qs);
    squares(it.k, N, d, ks);
    for (int64_t i = 0; i < d; ++i) {
      nq[i] = norm_of(qs[i]);
      nk[i] = norm_of(ks[i]);
    }
    outer_sum(it.q, it.k, N, d, a);
    scale_logits(a, nq.data(), nk.data(), temperature[it.hh], d);
    for (int64_t i = 0; i < d; ++i) {  // softmax over j
      T* row = a + i * d;
      const T top = *std::max_element(row, row + d);
      Vec sum_v(T(0));
      for (int64_t j = 0; j < d; j += W) {
        const int64_t w = std::min<int64_t>(W, d - j);
        Vec e = (load(row + j, w) - Vec(top)).exp();
        if (w < W) e = Vec::set(Vec(T(0)), e, w);  // the tail's lanes past d add nothing
        store(e, row + j, w);
        sum_v = sum_v + e;
      }
      T lanes[W];
      sum_v.store(lanes);
      T sum = 0;
      for (int64_t l = 0; l < W; ++l) sum += lanes[l];
      const Vec inverse(T(1) / sum);
      for (int64_t j = 0; j < d; j += W) {
        const int64_t w = std::min<int64_t>(W, d - j);
        store(load(row + j, w) * inverse, row + j, w);
      }
    }
    // out(n, i) = sum_j v(n, j) attn(i, j): rows of v times attn's transpose.
    transpose(a, d, attn_t.data());
    rows_times(it.v, attn_t.data(), N, d, out + it.b * N * C + it.hh * d, C);
  }
}

template <typename T>
void xca_core_backward(const XcaCoreDims& dims, const T* dout, const T* qkv, const T* temperature,
                       const T* attn, const T* q_sq, const T* k_sq, T* dqkv, T* dtemperature_items,
                       int64_t begin, int64_t end) {
  const int64_t N = dims.tokens, d = dims.head_dim, C = dims.heads * d;
  std::vector<T> nq(d), nk(d), cq(d), ck(d), raw(d * d), dattn(d * d), scratch(d * d);
  for (int64_t index = begin; index < end; ++index) {
    const Item<T> it = item_of(dims, qkv, index);
    const Rows<T> g{dout + it.b * N * C + it.hh * d, C};
    const T* a = attn + index * d * d;
    const T* qs = q_sq + index * d;
    const T* ks = k_sq + index * d;
    const T t = temperature[it.hh];
    for (int64_t i = 0; i < d; ++i) {
      nq[i] = norm_of(qs[i]);
      nk[i] = norm_of(ks[i]);
    }
    T* dq = dqkv + (it.q.base - qkv);
    T* dk = dqkv + (it.k.base - qkv);
    T* dv = dqkv + (it.v.base - qkv);
    // dv(n, j) = sum_i dout(n, i) attn(i, j).
    rows_times(g, a, N, d, dv, 3 * C);
    // dattn(i, j) = sum_n dout(n, i) v(n, j); raw(i, j) = sum_n q(n, i) k(n, j).
    outer_sum(g, it.v, N, d, dattn.data());
    outer_sum(it.q, it.k, N, d, raw.data());
    // Softmax's backward, then through logits = raw / (nq nk) * t: d raw in dattn's place,
    // the norms' gradients as -sum(dlogits * logits) / n, the temperature's as
    // sum(dlogits * raw / (nq nk)).
    std::fill(cq.begin(), cq.end(), T(0));
    std::fill(ck.begin(), ck.end(), T(0));
    T dt = 0;
    for (int64_t i = 0; i < d; ++i) {
      const T* ai = a + i * d;
      T* di = dattn.data() + i * d;
      T dot = 0;
      for (int64_t j = 0; j < d; ++j) dot += ai[j] * di[j];
      for (int64_t j = 0; j < d; ++j) {
        const T dlogit = ai[j] * (di[j] - dot);
        const T unscaled = raw[i * d + j] / (nq[i] * nk[j]);
        const T g_ij = dlogit * unscaled * t;  // dlogits * logits
        dt += dlogit * unscaled;
        cq[i] -= g_ij;
        ck[j] -= g_ij;
        di[j] = dlogit * t / (nq[i] * nk[j]);  // d raw
      }
    }
    dtemperature_items[index] = dt;
    // |q_i| = sqrt(sq) where the clamp let it through: d|q_i|/dq(n, i) = q(n, i) / |q_i|.
    for (int64_t i = 0; i < d; ++i) {
      cq[i] = qs[i] >= T(1e-24) ? cq[i] / nq[i] / nq[i] : T(0);
      ck[i] = ks[i] >= T(1e-24) ? ck[i] / nk[i] / nk[i] : T(0);
    }
    // dq(n, i) = sum_j k(n, j) draw(i, j) + cq_i q(n, i);
    // dk(n, j) = sum_i q(n, i) draw(i, j) + ck_j k(n, j).
    transpose(dattn.data(), d, scratch.data());
    rows_times(it.k, scratch.data(), N, d, dq, 3 * C, cq.data(), it.q);
    rows_times(it.q, dattn.data(), N, d, dk, 3 * C, ck.data(), it.k);
  }
}

template void xca_core_forward<float>(const XcaCoreDims&, const float*, const float*, float*,
                                      float*, float*, float*, int64_t, int64_t);
template void xca_core_forward<double>(const XcaCoreDims&, const double*, const double*, double*,
                                       double*, double*, double*, int64_t, int64_t);
template void xca_core_backward<float>(const XcaCoreDims&, const float*, const float*, const float*,
                                       const float*, const float*, const float*, float*, float*,
                                       int64_t, int64_t);
template void xca_core_backward<double>(const XcaCoreDims&, const double*, const double*,
                                        const double*, const double*, const double*, const double*,
                                        double*, double*, int64_t, int64_t);

}  // namespace xdino::kernels::XDINO_ISA
