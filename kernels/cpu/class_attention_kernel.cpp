// Class attention's core (kernels/cpu/class_attention_kernel.h), compiled once per ISA as
// kernels/cpu/xca_core_kernel.cpp is: at::vec::Vectorized<T> is 256 or 512 bits wide, and only
// at::vec and our own inline functions are instantiated here.
//
// Why a kernel: each item is a row of d values against T rows, a few thousand multiply-adds.
// LibTorch 1.13's CPU matmul runs each (B*h) item's 1 x d x T product as its own GEMM call after
// `select`s, twice forward and four times backward, and the strided k and v views cost copies
// in both directions (~7% of the main job's step: bench/results/training_step_cpu.md, "CPU
// step 3: class attention"). Here one pass per item does the products and the softmax.
#include "kernels/cpu/class_attention_kernel.h"

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vec_tail.h"

namespace xdino::kernels::XDINO_ISA {
namespace {

using at::vec::Vectorized;
using vec_tail::load;
using vec_tail::store;

// sum_i a[i] * b[i] over d values (a loadu with a count fills the lanes past d with zeros).
template <typename T>
T cls_dot(const T* a, const T* b, int64_t d) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  Vec acc(T(0));
  for (int64_t i = 0; i < d; i += W) {
    const int64_t w = std::min<int64_t>(W, d - i);
    acc = at::vec::fmadd(load(a + i, w), load(b + i, w), acc);
  }
  T lanes[W];
  acc.store(lanes);
  T sum = 0;
  for (int64_t l = 0; l < W; ++l) sum += lanes[l];
  return sum;
}

// o[i] = sum_t c[t] * rows[t][i] for t < n, i < d, rows `stride` apart.
template <typename T>
void weighted_rows(const T* c, const T* rows, int64_t stride, int64_t n, int64_t d, T* o) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  for (int64_t i = 0; i < d; i += W) {
    const int64_t w = std::min<int64_t>(W, d - i);
    Vec acc(T(0));
    for (int64_t t = 0; t < n; ++t)
      acc = at::vec::fmadd(Vec(c[t]), load(rows + t * stride + i, w), acc);
    store(acc, o + i, w);
  }
}

// o[i] = c * x[i] for i < d.
template <typename T>
void scaled(T c, const T* x, int64_t d, T* o) {
  using Vec = Vectorized<T>;
  constexpr int64_t W = Vec::size();
  for (int64_t i = 0; i < d; i += W) {
    const int64_t w = std::min<int64_t>(W, d - i);
    store(Vec(c) * load(x + i, w), o + i, w);
  }
}

// One (b, hh) item's offsets: its query and output row, its first key, its first value.
struct ClsItem {
  int64_t row, key, value;
};

ClsItem cls_item_of(const ClassAttentionDims& dims, int64_t index) {
  const int64_t C = dims.heads * dims.head_dim, b = index / dims.heads, hh = index % dims.heads;
  const int64_t key = b * dims.tokens * 2 * C + hh * dims.head_dim;
  return {b * C + hh * dims.head_dim, key, key + C};
}

}  // namespace

template <typename T>
void class_attention_forward(const ClassAttentionDims& dims, const T* q, const T* kv, T* out,
                             T* attn, int64_t begin, int64_t end) {
  const int64_t N = dims.tokens, d = dims.head_dim, stride = 2 * dims.heads * d;
  const T scale = static_cast<T>(dims.scale);
  for (int64_t index = begin; index < end; ++index) {
    const ClsItem it = cls_item_of(dims, index);
    T* a = attn + index * N;
    // The op path's order: the product, then the scale, then the softmax.
    for (int64_t t = 0; t < N; ++t) a[t] = cls_dot(q + it.row, kv + it.key + t * stride, d) * scale;
    const T top = *std::max_element(a, a + N);
    T sum = 0;
    for (int64_t t = 0; t < N; ++t) sum += (a[t] = std::exp(a[t] - top));
    const T inverse = T(1) / sum;
    for (int64_t t = 0; t < N; ++t) a[t] *= inverse;
    weighted_rows(a, kv + it.value, stride, N, d, out + it.row);
  }
}

template <typename T>
void class_attention_backward(const ClassAttentionDims& dims, const T* dout, const T* q,
                              const T* kv, const T* attn, T* dq, T* dkv, int64_t begin,
                              int64_t end) {
  const int64_t N = dims.tokens, d = dims.head_dim, stride = 2 * dims.heads * d;
  const T scale = static_cast<T>(dims.scale);
  std::vector<T> dlogits(N);
  for (int64_t index = begin; index < end; ++index) {
    const ClsItem it = cls_item_of(dims, index);
    const T* a = attn + index * N;
    const T* g = dout + it.row;
    // dattn_t = g.v_t; the softmax's backward a_t (dattn_t - sum_s a_s dattn_s); the scale.
    T row_term = 0;
    for (int64_t t = 0; t < N; ++t) {
      dlogits[t] = cls_dot(g, kv + it.value + t * stride, d);
      row_term += a[t] * dlogits[t];
    }
    for (int64_t t = 0; t < N; ++t) {
      dlogits[t] = a[t] * (dlogits[t] - row_term) * scale;
      scaled(a[t], g, d, dkv + it.value + t * stride);               // dv_t = a_t g
      scaled(dlogits[t], q + it.row, d, dkv + it.key + t * stride);  // dk_t = dlogit_t q
    }
    weighted_rows(dlogits.data(), kv + it.key, stride, N, d, dq + it.row);  // dq = sum dlogit_t k_t
  }
}

template void class_attention_forward<float>(const ClassAttentionDims&, const float*, const float*,
                                             float*, float*, int64_t, int64_t);
template void class_attention_forward<double>(const ClassAttentionDims&, const double*,
                                              const double*, double*, double*, int64_t, int64_t);
template void class_attention_backward<float>(const ClassAttentionDims&, const float*, const float*,
                                              const float*, const float*, float*, float*, int64_t,
                                              int64_t);
template void class_attention_backward<double>(const ClassAttentionDims&, const double*,
                                               const double*, const double*, const double*, double*,
                                               double*, int64_t, int64_t);

}  // namespace xdino::kernels::XDINO_ISA
