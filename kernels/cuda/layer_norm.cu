// The kernels of layer_norm.h. One warp normalises one row: XCiT's rows are 128-768 channels
// wide, so a lane holds 4-24 values, the two warp reductions (mean, then the centred sum of
// squares, as at::native_layer_norm's two-pass variance) need no shared memory, and a row is
// re-read from L1 rather than kept in registers whose count would depend on C. The weight and
// bias gradients are column sums over every row: partial sums over chunks of rows, each thread
// one channel (coalesced along C), then one at::sum over the chunks. The residual variant
// computes its row first (x + branch * gamma * factor), writes it, and normalises it from there;
// its backward adds the incoming residual gradient to the LayerNorm's in the same pass.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/norm_checks.h"

namespace xdino::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;       // warps per block in the row kernels
constexpr int kColumnThreads = 128;    // channels per block in the column kernel
constexpr int64_t kRowsPerChunk = 64;  // rows each column-kernel thread sums, at least
constexpr int64_t kMaxChunks = 65535;  // a grid's y extent

template <typename Acc>
__device__ __forceinline__ Acc warp_sum(Acc v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float reciprocal_sqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double reciprocal_sqrt(double v) { return rsqrt(v); }

// One warp's row `index`: its mean and 1 / sqrt(var + eps) (two passes), out = (row - mean) *
// rstd * weight + bias; lane 0 keeps mean and rstd. The mean is the row's first value plus the
// mean of the differences from it, so a row far from zero keeps the digits of its spread
// (kernels/reference/norms.cpp computes it the same way). Each lane reads only the columns
// c = lane + 32k, the ones it may just have written; row[0] is every lane's read.
template <typename TIn, typename TOut, typename Acc>
__device__ __forceinline__ void normalise_row(const TIn* row, const Acc* weight, const Acc* bias,
                                              TOut* out, Acc* mean, Acc* rstd, int64_t index,
                                              int64_t C, Acc eps) {
  const int lane = threadIdx.x;
  const Acc shift = static_cast<Acc>(row[0]);
  Acc sum = 0;
  for (int64_t c = lane; c < C; c += kWarp) sum += static_cast<Acc>(row[c]) - shift;
  const Acc mu = shift + warp_sum(sum) / static_cast<Acc>(C);
  Acc squares = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const Acc d = static_cast<Acc>(row[c]) - mu;
    squares += d * d;
  }
  const Acc rs = reciprocal_sqrt(warp_sum(squares) / static_cast<Acc>(C) + eps);
  for (int64_t c = lane; c < C; c += kWarp)
    out[c] = static_cast<TOut>((static_cast<Acc>(row[c]) - mu) * rs * weight[c] + bias[c]);
  if (lane == 0) {
    mean[index] = mu;
    rstd[index] = rs;
  }
}

// LayerNorm's input gradient on one warp's row x (mean mu, rstd rs) from the output's dy:
// rstd * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight. Calls
// write(c, gradient) for each of the lane's columns.
template <typename TIn, typename TGrad, typename Acc, typename Write>
__device__ __forceinline__ void row_input_gradient(const TGrad* dy, const TIn* x, const Acc* weight,
                                                   Acc mu, Acc rs, int64_t C, Write&& write) {
  const int lane = threadIdx.x;
  Acc sum_g = 0, sum_gx = 0;
  for (int64_t c = lane; c < C; c += kWarp) {
    const Acc g = static_cast<Acc>(dy[c]) * weight[c];
    sum_g += g;
    sum_gx += g * (static_cast<Acc>(x[c]) - mu) * rs;
  }
  const Acc mean_g = warp_sum(sum_g) / static_cast<Acc>(C);
  const Acc mean_gx = warp_sum(sum_gx) / static_cast<Acc>(C);
  for (int64_t c = lane; c < C; c += kWarp) {
    const Acc g = static_cast<Acc>(dy[c]) * weight[c];
    const Acc x_hat = (static_cast<Acc>(x[c]) - mu) * rs;
    write(c, rs * (g - mean_g - x_hat * mean_gx));
  }
}

template <typename T, typename TOut, typename Acc>
__global__ void forward_kernel(const T* __restrict__ x, const Acc* __restrict__ weight,
                               const Acc* __restrict__ bias, TOut* __restrict__ y,
                               Acc* __restrict__ mean, Acc* __restrict__ rstd, int64_t rows,
                               int64_t C, Acc eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;  // the whole warp leaves together: the shuffles stay full
  normalise_row(x + row * C, weight, bias, y + row * C, mean, rstd, row, C, eps);
}

// dx per row (row_input_gradient).
template <typename T, typename TGrad, typename Acc>
__global__ void backward_input_kernel(const TGrad* __restrict__ dy, const T* __restrict__ x,
                                      const Acc* __restrict__ weight, const Acc* __restrict__ mean,
                                      const Acc* __restrict__ rstd, T* __restrict__ dx,
                                      int64_t rows, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;
  T* dxr = dx + row * C;
  row_input_gradient(dy + row * C, x + row * C, weight, mean[row], rstd[row], C,
                     [&](int64_t c, Acc grad) { dxr[c] = static_cast<T>(grad); });
}

// Per chunk of `chunk_rows` rows and per channel: sum(dy * x_hat) and sum(dy).
template <typename T, typename TGrad, typename Acc>
__global__ void backward_params_kernel(const TGrad* __restrict__ dy, const T* __restrict__ x,
                                       const Acc* __restrict__ mean, const Acc* __restrict__ rstd,
                                       Acc* __restrict__ dweight, Acc* __restrict__ dbias,
                                       int64_t rows, int64_t C, int64_t chunk_rows) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (c >= C) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t last = first + chunk_rows < rows ? first + chunk_rows : rows;
  Acc dw = 0, db = 0;
  for (int64_t r = first; r < last; ++r) {
    const Acc g = static_cast<Acc>(dy[r * C + c]);
    dw += g * (static_cast<Acc>(x[r * C + c]) - mean[r]) * rstd[r];
    db += g;
  }
  dweight[static_cast<int64_t>(blockIdx.y) * C + c] = dw;
  dbias[static_cast<int64_t>(blockIdx.y) * C + c] = db;
}

// y = x + branch * gamma * factor[row / tokens] (factor: per-sample stochastic depth, or null),
// then the LayerNorm of y as forward_kernel computes it. x, y in the accumulation type.
template <typename TBranch, typename TOut, typename Acc>
__global__ void residual_forward_kernel(
    const Acc* __restrict__ x, const TBranch* __restrict__ branch, const Acc* __restrict__ gamma,
    const Acc* __restrict__ factor, const Acc* __restrict__ weight, const Acc* __restrict__ bias,
    Acc* __restrict__ y, TOut* __restrict__ n, Acc* __restrict__ mean, Acc* __restrict__ rstd,
    int64_t rows, int64_t C, int64_t tokens, Acc eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const Acc keep = factor == nullptr ? Acc(1) : factor[row / tokens];
  const Acc* xr = x + row * C;
  const TBranch* br = branch + row * C;
  Acc* yr = y + row * C;
  // gamma * keep first: the op path multiplies them into one (B, 1, C) scale.
  for (int64_t c = lane; c < C; c += kWarp)
    yr[c] = xr[c] + static_cast<Acc>(br[c]) * (gamma[c] * keep);
  __syncwarp();  // yr[0], lane 0's write, is every lane's shift in normalise_row
  normalise_row(yr, weight, bias, n + row * C, mean, rstd, row, C, eps);
}

// total = dy + LayerNorm's input gradient from dn (row_input_gradient on y); dx = total;
// dbranch = total * gamma * factor.
template <typename TBranch, typename TGrad, typename Acc>
__global__ void residual_backward_rows_kernel(
    const TGrad* __restrict__ dn, const Acc* __restrict__ dy, const Acc* __restrict__ y,
    const Acc* __restrict__ weight, const Acc* __restrict__ mean, const Acc* __restrict__ rstd,
    const Acc* __restrict__ gamma, const Acc* __restrict__ factor, Acc* __restrict__ dx,
    TBranch* __restrict__ dbranch, int64_t rows, int64_t C, int64_t tokens) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (row >= rows) return;
  const Acc keep = factor == nullptr ? Acc(1) : factor[row / tokens];
  const int64_t base = row * C;
  row_input_gradient(dn + base, y + base, weight, mean[row], rstd[row], C,
                     [&](int64_t c, Acc from_norm) {
                       const Acc total = dy[base + c] + from_norm;
                       dx[base + c] = total;
                       dbranch[base + c] = static_cast<TBranch>(total * (gamma[c] * keep));
                     });
}

// Per chunk of rows and per channel: sum(dx * branch * factor) for gamma, and sum(dn * y_hat),
// sum(dn) for the LayerNorm's weight and bias.
template <typename TBranch, typename TGrad, typename Acc>
__global__ void residual_backward_columns_kernel(
    const TGrad* __restrict__ dn, const Acc* __restrict__ dx, const TBranch* __restrict__ branch,
    const Acc* __restrict__ y, const Acc* __restrict__ mean, const Acc* __restrict__ rstd,
    const Acc* __restrict__ factor, Acc* __restrict__ dgamma, Acc* __restrict__ dweight,
    Acc* __restrict__ dbias, int64_t rows, int64_t C, int64_t tokens, int64_t chunk_rows) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (c >= C) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t last = first + chunk_rows < rows ? first + chunk_rows : rows;
  Acc dg = 0, dw = 0, db = 0;
  for (int64_t r = first; r < last; ++r) {
    const int64_t i = r * C + c;
    const Acc keep = factor == nullptr ? Acc(1) : factor[r / tokens];
    dg += dx[i] * static_cast<Acc>(branch[i]) * keep;
    const Acc g = static_cast<Acc>(dn[i]);
    dw += g * (y[i] - mean[r]) * rstd[r];
    db += g;
  }
  const int64_t out = static_cast<int64_t>(blockIdx.y) * C + c;
  dgamma[out] = dg;
  dweight[out] = dw;
  dbias[out] = db;
}

// Calls f with a value of the C++ type of `t`: float32, float16 or bfloat16 (the float64 case
// is handled by the callers, whose accumulation type then changes too).
template <typename F>
void with_reduced_or_float(at::ScalarType t, const char* what, F&& f) {
  switch (t) {
    case at::kFloat:
      f(float{});
      return;
    case at::kHalf:
      f(at::Half{});
      return;
    case at::kBFloat16:
      f(at::BFloat16{});
      return;
    default:
      XDINO_CHECK(false, "CUDA LayerNorm: ", what, " must be float32, float16 or bfloat16, got ",
                  c10::toString(t));
  }
}

// Calls launch(T1{}, T2{}, Acc{}): every type double where `acc` is float64 (callers check that
// the tensors then are), otherwise T1 and T2 the C++ types of `first` and `second` (float32,
// float16 or bfloat16, named `first_what` and `second_what` in an error) and Acc float.
template <typename F>
void with_types(at::ScalarType acc, at::ScalarType first, const char* first_what,
                at::ScalarType second, const char* second_what, F&& launch) {
  if (acc == at::kDouble) {
    launch(double{}, double{}, double{});
    return;
  }
  with_reduced_or_float(first, first_what, [&](auto a) {
    with_reduced_or_float(second, second_what, [&](auto b) { launch(a, b, float{}); });
  });
}

constexpr const char* kImpl = "CUDA";
using checks::accumulation_type;

// What the kernels alone need, before the checks every implementation makes (norm_checks.h).
void check_on_device(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors)
    XDINO_CHECK(t->is_cuda() && t->is_contiguous(),
                "CUDA LayerNorm: its tensors must be contiguous CUDA tensors, got one ",
                t->is_cuda() ? "not contiguous" : c10::str("on ", t->device()));
}

dim3 row_block() { return dim3(kWarp, kRowsPerBlock); }  // one warp a row

dim3 row_grid(int64_t rows) {
  return dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
}

// Rows per chunk of the column kernels: at least kRowsPerChunk, and few enough chunks for a grid.
int64_t chunk_rows_for(int64_t rows) {
  return std::max(kRowsPerChunk, (rows + kMaxChunks - 1) / kMaxChunks);
}

dim3 column_grid(int64_t rows, int64_t C, int64_t chunk_rows) {
  return dim3(static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads),
              static_cast<unsigned>(std::max<int64_t>(1, (rows + chunk_rows - 1) / chunk_rows)));
}

// The column kernels' partial sums, one row per chunk of rows (column_grid's y).
at::Tensor column_parts(const dim3& columns, int64_t C, const at::TensorOptions& options) {
  return at::empty({static_cast<int64_t>(columns.y), C}, options);
}

// The sum over the chunks, as a gradient of `like` (its dtype and shape).
at::Tensor column_sum(const at::Tensor& parts, const at::Tensor& like) {
  return parts.sum(0).to(like.scalar_type()).view(like.sizes());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& x,
                                                                  const at::Tensor& weight,
                                                                  const at::Tensor& bias,
                                                                  double eps,
                                                                  at::ScalarType out_dtype) {
  check_on_device({&x});
  checks::layer_norm_forward(x, weight, bias, out_dtype, kImpl);
  const int64_t C = x.size(-1), rows = x.numel() / C;
  const at::ScalarType acc = accumulation_type(x);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor w = weight.to(acc).contiguous(), b = bias.to(acc).contiguous();
  at::Tensor y = at::empty(x.sizes(), x.options().dtype(out_dtype));
  at::Tensor mean = at::empty({rows}, x.options().dtype(acc));
  at::Tensor rstd = at::empty({rows}, x.options().dtype(acc));
  if (rows == 0) return {y, mean, rstd};
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto in, auto out, auto accumulate) {
    using T = decltype(in);
    using TOut = decltype(out);
    using Acc = decltype(accumulate);
    forward_kernel<T, TOut, Acc><<<row_grid(rows), row_block(), 0, stream>>>(
        x.data_ptr<T>(), w.data_ptr<Acc>(), b.data_ptr<Acc>(), y.data_ptr<TOut>(),
        mean.data_ptr<Acc>(), rstd.data_ptr<Acc>(), rows, C, static_cast<Acc>(eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  with_types(acc, x.scalar_type(), "the input", out_dtype, "the output", launch);
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& dy,
                                                                   const at::Tensor& x,
                                                                   const at::Tensor& weight,
                                                                   const at::Tensor& mean,
                                                                   const at::Tensor& rstd) {
  check_on_device({&x, &dy});
  checks::layer_norm_backward(dy, x, mean, rstd, kImpl);
  const int64_t C = x.size(-1), rows = x.numel() / C;
  const at::ScalarType acc = accumulation_type(x);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor w = weight.to(acc).contiguous();
  at::Tensor dx = at::empty_like(x);
  const int64_t chunk_rows = chunk_rows_for(rows);
  const dim3 columns = column_grid(rows, C, chunk_rows);
  at::Tensor dw_parts = column_parts(columns, C, x.options().dtype(acc));
  at::Tensor db_parts = column_parts(columns, C, x.options().dtype(acc));
  if (rows == 0) {
    return {dx, at::zeros_like(weight), at::zeros_like(weight)};
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto in, auto grad, auto accumulate) {
    using T = decltype(in);
    using TGrad = decltype(grad);
    using Acc = decltype(accumulate);
    backward_input_kernel<T, TGrad, Acc><<<row_grid(rows), row_block(), 0, stream>>>(
        dy.data_ptr<TGrad>(), x.data_ptr<T>(), w.data_ptr<Acc>(), mean.data_ptr<Acc>(),
        rstd.data_ptr<Acc>(), dx.data_ptr<T>(), rows, C);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    backward_params_kernel<T, TGrad, Acc><<<columns, kColumnThreads, 0, stream>>>(
        dy.data_ptr<TGrad>(), x.data_ptr<T>(), mean.data_ptr<Acc>(), rstd.data_ptr<Acc>(),
        dw_parts.data_ptr<Acc>(), db_parts.data_ptr<Acc>(), rows, C, chunk_rows);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  with_types(acc, x.scalar_type(), "the input", dy.scalar_type(), "the gradient", launch);
  return {dx, column_sum(dw_parts, weight), column_sum(db_parts, weight)};
}

namespace {

// The per-sample factor as the kernels read it: null, or x.size(0) values in `acc`.
at::Tensor sample_factor(const at::Tensor& factor, const at::Tensor& x, at::ScalarType acc) {
  if (!factor.defined()) return {};
  return factor.to(acc).contiguous().view({-1});
}

int64_t tokens_per_sample(const at::Tensor& x) { return x.numel() / x.size(0) / x.size(-1); }

template <typename Acc>
const Acc* maybe_data(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<Acc>() : nullptr;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& weight, const at::Tensor& bias, double eps,
    at::ScalarType out_dtype) {
  check_on_device({&x, &branch});
  checks::residual_layer_norm_forward(x, branch, gamma, factor, weight, bias, out_dtype, kImpl);
  const at::ScalarType acc = accumulation_type(x);
  const int64_t C = x.size(-1), rows = x.numel() / C;
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor g = gamma.to(acc).contiguous(), w = weight.to(acc).contiguous(),
                   b = bias.to(acc).contiguous(), keep = sample_factor(factor, x, acc);
  at::Tensor y = at::empty_like(x);
  at::Tensor n = at::empty(x.sizes(), x.options().dtype(out_dtype));
  at::Tensor mean = at::empty({rows}, x.options().dtype(acc));
  at::Tensor rstd = at::empty({rows}, x.options().dtype(acc));
  if (rows == 0) return {y, n, mean, rstd};
  const int64_t tokens = tokens_per_sample(x);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto branch_type, auto out, auto accumulate) {
    using TBranch = decltype(branch_type);
    using TOut = decltype(out);
    using Acc = decltype(accumulate);
    residual_forward_kernel<TBranch, TOut, Acc><<<row_grid(rows), row_block(), 0, stream>>>(
        x.data_ptr<Acc>(), branch.data_ptr<TBranch>(), g.data_ptr<Acc>(), maybe_data<Acc>(keep),
        w.data_ptr<Acc>(), b.data_ptr<Acc>(), y.data_ptr<Acc>(), n.data_ptr<TOut>(),
        mean.data_ptr<Acc>(), rstd.data_ptr<Acc>(), rows, C, tokens, static_cast<Acc>(eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  with_types(acc, branch.scalar_type(), "the branch", out_dtype, "the output", launch);
  return {y, n, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight,
    const at::Tensor& mean, const at::Tensor& rstd) {
  check_on_device({&y, &dn, &dy, &branch});
  checks::residual_layer_norm_backward(dn, dy, y, branch, factor, mean, rstd, kImpl);
  const at::ScalarType acc = accumulation_type(y);
  const int64_t C = y.size(-1), rows = y.numel() / C;
  const c10::cuda::CUDAGuard guard(y.device());
  const at::Tensor g = gamma.to(acc).contiguous(), w = weight.to(acc).contiguous(),
                   keep = sample_factor(factor, y, acc);
  at::Tensor dx = at::empty_like(y);
  at::Tensor dbranch = at::empty_like(branch);
  const int64_t chunk_rows = chunk_rows_for(rows);
  const dim3 columns = column_grid(rows, C, chunk_rows);
  at::Tensor dg_parts = column_parts(columns, C, y.options().dtype(acc));
  at::Tensor dw_parts = column_parts(columns, C, y.options().dtype(acc));
  at::Tensor db_parts = column_parts(columns, C, y.options().dtype(acc));
  if (rows == 0) {
    return {dx, dbranch, at::zeros_like(gamma), at::zeros_like(weight), at::zeros_like(weight)};
  }
  const int64_t tokens = tokens_per_sample(y);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto branch_type, auto grad, auto accumulate) {
    using TBranch = decltype(branch_type);
    using TGrad = decltype(grad);
    using Acc = decltype(accumulate);
    residual_backward_rows_kernel<TBranch, TGrad, Acc><<<row_grid(rows), row_block(), 0, stream>>>(
        dn.data_ptr<TGrad>(), dy.data_ptr<Acc>(), y.data_ptr<Acc>(), w.data_ptr<Acc>(),
        mean.data_ptr<Acc>(), rstd.data_ptr<Acc>(), g.data_ptr<Acc>(), maybe_data<Acc>(keep),
        dx.data_ptr<Acc>(), dbranch.data_ptr<TBranch>(), rows, C, tokens);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    residual_backward_columns_kernel<TBranch, TGrad, Acc><<<columns, kColumnThreads, 0, stream>>>(
        dn.data_ptr<TGrad>(), dx.data_ptr<Acc>(), branch.data_ptr<TBranch>(), y.data_ptr<Acc>(),
        mean.data_ptr<Acc>(), rstd.data_ptr<Acc>(), maybe_data<Acc>(keep), dg_parts.data_ptr<Acc>(),
        dw_parts.data_ptr<Acc>(), db_parts.data_ptr<Acc>(), rows, C, tokens, chunk_rows);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  with_types(acc, branch.scalar_type(), "the branch", dn.scalar_type(), "the gradient", launch);
  return {dx, dbranch, column_sum(dg_parts, gamma), column_sum(dw_parts, weight),
          column_sum(db_parts, weight)};
}

}  // namespace xdino::kernels::cuda
