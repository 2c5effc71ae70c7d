// The kernels of token_norm.h, on t seen as (D0, D1, D2, N) with arbitrary strides (fewer
// dimensions get leading ones). The forward gives each thread one (i0, i1, i2) row and sums its
// N values; consecutive threads take consecutive i2, which in XCA's views are adjacent channels,
// so every load of the loop is coalesced although the tokens are 3C apart. The backward gives
// each thread one element, i2 fastest again, and writes dt in (D0, N, D1, D2) order.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "core/check.h"
#include "kernels/cuda/token_norm.h"

namespace xdino::kernels::cuda {
namespace {

constexpr int kThreads = 128;

struct Shape4 {
  int64_t size[4];    // D0, D1, D2, N
  int64_t stride[4];  // of t, in elements
};

// t as four dimensions: leading dimensions of size 1 where it has fewer.
Shape4 shape4(const at::Tensor& t) {
  Shape4 s{};
  const int64_t missing = 4 - t.dim();
  for (int64_t i = 0; i < 4; ++i) {
    s.size[i] = i < missing ? 1 : t.size(i - missing);
    s.stride[i] = i < missing ? 0 : t.stride(i - missing);
  }
  return s;
}

__device__ __forceinline__ float square_root(float v) { return sqrtf(v); }
__device__ __forceinline__ double square_root(double v) { return sqrt(v); }

template <typename T, typename Acc>
__global__ void forward_kernel(const T* __restrict__ t, Shape4 s, Acc* __restrict__ n,
                               bool* __restrict__ passes) {
  const int64_t rows = s.size[0] * s.size[1] * s.size[2];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (j >= rows) return;
  const int64_t i2 = j % s.size[2], i1 = (j / s.size[2]) % s.size[1],
                i0 = j / (s.size[2] * s.size[1]);
  const T* row = t + i0 * s.stride[0] + i1 * s.stride[1] + i2 * s.stride[2];
  Acc squares = 0;
  for (int64_t k = 0; k < s.size[3]; ++k) {
    const Acc v = static_cast<Acc>(row[k * s.stride[3]]);
    squares += v * v;
  }
  const Acc floor = static_cast<Acc>(1e-24);
  passes[j] = squares >= floor;
  n[j] = square_root(squares >= floor ? squares : floor);
}

// dt[i0, i1, i2, k] = t * dn / n where passes; element e runs over (i0, k, i1, i2), i2 fastest,
// which is also dt's memory order.
template <typename T, typename Acc>
__global__ void backward_kernel(const Acc* __restrict__ dn, const T* __restrict__ t, Shape4 s,
                                const Acc* __restrict__ n, const bool* __restrict__ passes,
                                T* __restrict__ dt) {
  const int64_t D1 = s.size[1], D2 = s.size[2], N = s.size[3];
  const int64_t total = s.size[0] * N * D1 * D2;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  const int64_t i2 = e % D2, i1 = (e / D2) % D1, k = (e / (D2 * D1)) % N, i0 = e / (D2 * D1 * N);
  const int64_t row = (i0 * D1 + i1) * D2 + i2;
  const Acc v =
      static_cast<Acc>(t[i0 * s.stride[0] + i1 * s.stride[1] + i2 * s.stride[2] + k * s.stride[3]]);
  dt[e] = static_cast<T>(passes[row] ? v * (dn[row] / n[row]) : Acc(0));
}

template <typename F>
void with_float_type(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat:
      f(float{}, float{});
      return;
    case at::kDouble:
      f(double{}, double{});
      return;
    case at::kHalf:
      f(at::Half{}, float{});
      return;
    case at::kBFloat16:
      f(at::BFloat16{}, float{});
      return;
    default:
      XDINO_CHECK(false, "CUDA token norm: t must be float32, float64, float16 or bfloat16, got ",
                  c10::toString(t));
  }
}

void check_input(const at::Tensor& t) {
  XDINO_CHECK(t.is_cuda() && t.dim() >= 1 && t.dim() <= 4 && t.size(-1) >= 1,
              "CUDA token norm: t must be a CUDA tensor of 1 to 4 dimensions with tokens, got ",
              t.sizes(), " on ", t.device());
}

std::vector<int64_t> norm_shape(const at::Tensor& t) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape.back() = 1;
  return shape;
}

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>((count + kThreads - 1) / kThreads);
}

}  // namespace

std::pair<at::Tensor, at::Tensor> token_norm_forward(const at::Tensor& t) {
  check_input(t);
  const c10::cuda::CUDAGuard guard(t.device());
  const at::ScalarType acc = t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor n = at::empty(norm_shape(t), t.options().dtype(acc));
  at::Tensor passes = at::empty(norm_shape(t), t.options().dtype(at::kBool));
  const int64_t rows = n.numel();
  if (rows == 0) return {n, passes};
  const Shape4 s = shape4(t);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_float_type(t.scalar_type(), [&](auto value, auto accumulate) {
    using T = decltype(value);
    using Acc = decltype(accumulate);
    forward_kernel<T, Acc><<<blocks_for(rows), kThreads, 0, stream>>>(
        t.data_ptr<T>(), s, n.data_ptr<Acc>(), passes.data_ptr<bool>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {n, passes};
}

at::Tensor token_norm_backward(const at::Tensor& dn, const at::Tensor& t, const at::Tensor& n,
                               const at::Tensor& passes) {
  check_input(t);
  const at::ScalarType acc = t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  XDINO_CHECK(n.scalar_type() == acc && passes.scalar_type() == at::kBool &&
                  n.numel() * t.size(-1) == t.numel() && passes.numel() == n.numel() &&
                  dn.numel() == n.numel(),
              "CUDA token norm: n, passes and dn must be the forward's, got ", n.sizes(), ", ",
              passes.sizes(), ", ", dn.sizes());
  const c10::cuda::CUDAGuard guard(t.device());
  const Shape4 s = shape4(t);
  // dt laid out (D0, N, D1, D2), then seen as t's shape.
  at::Tensor dt = at::empty({s.size[0], s.size[3], s.size[1], s.size[2]}, t.options())
                      .permute({0, 2, 3, 1})
                      .view(t.sizes());  // drops the leading ones shape4 added
  if (t.numel() == 0) return dt;
  const at::Tensor g = dn.to(acc).contiguous(), norms = n.contiguous(), mask = passes.contiguous();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_float_type(t.scalar_type(), [&](auto value, auto accumulate) {
    using T = decltype(value);
    using Acc = decltype(accumulate);
    backward_kernel<T, Acc><<<blocks_for(t.numel()), kThreads, 0, stream>>>(
        g.data_ptr<Acc>(), t.data_ptr<T>(), s, norms.data_ptr<Acc>(), mask.data_ptr<bool>(),
        dt.data_ptr<T>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return dt;
}

}  // namespace xdino::kernels::cuda
