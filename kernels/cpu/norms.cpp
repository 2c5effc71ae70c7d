#include "kernels/cpu/norms.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/residual_norm_kernel.h"
#include "kernels/norm_checks.h"

namespace xdino::kernels::cpu {
namespace {

// Rows per block: the unit of the threads' work and of the parameters' partial sums. Fixed, so
// that the gradients' rounding does not follow the thread count (as kernels/bias_gelu.cpp's).
constexpr int64_t kRowsPerBlock = 64;
constexpr const char* kImpl = "CPU";

// A CPU tensor of `dtype` with `numel` values, in any layout (the callers make it contiguous).
bool vector_of(const at::Tensor& t, at::ScalarType dtype, int64_t numel) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype && t.numel() == numel;
}

// A contiguous CPU tensor of `like`'s shape and dtype.
bool rows_like(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.device().is_cpu() && t.is_contiguous() &&
         t.scalar_type() == like.scalar_type() && t.sizes() == like.sizes();
}

bool takes(const at::Tensor& x, std::initializer_list<const at::Tensor*> same_rows,
           const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight) {
  if (cpu_isa() == Isa::kNone || !x.defined() || !x.device().is_cpu() || !x.is_contiguous())
    return false;
  const at::ScalarType s = x.scalar_type();
  if ((s != at::kFloat && s != at::kDouble) || x.dim() < 2 || x.size(-1) < 1) return false;
  for (const at::Tensor* t : same_rows)
    if (!rows_like(*t, x)) return false;
  const int64_t C = x.size(-1);
  return vector_of(gamma, s, C) && vector_of(weight, s, C) &&
         (!factor.defined() || vector_of(factor, s, x.size(0)));
}

ResidualNormRows rows_of(const at::Tensor& x, int64_t begin, int64_t end) {
  const int64_t C = x.size(-1);
  return {begin, end, C, x.numel() / x.size(0) / C};
}

template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace

bool residual_layer_norm_takes(const at::Tensor& x, const at::Tensor& branch,
                               const at::Tensor& gamma, const at::Tensor& factor,
                               const at::Tensor& weight, const at::Tensor& bias,
                               at::ScalarType out_dtype) {
  return takes(x, {&branch}, gamma, factor, weight) && out_dtype == x.scalar_type() &&
         vector_of(bias, x.scalar_type(), x.size(-1));
}

bool residual_layer_norm_backward_takes(const at::Tensor& dn, const at::Tensor& dy,
                                        const at::Tensor& y, const at::Tensor& branch,
                                        const at::Tensor& gamma, const at::Tensor& factor,
                                        const at::Tensor& weight) {
  return takes(y, {&dn, &dy, &branch}, gamma, factor, weight);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& weight, const at::Tensor& bias, double eps,
    at::ScalarType out_dtype) {
  // The checks every implementation makes (kernels/norm_checks.h), then what only this one needs.
  checks::residual_layer_norm_forward(x, branch, gamma, factor, weight, bias, out_dtype, kImpl);
  XDINO_CHECK(residual_layer_norm_takes(x, branch, gamma, factor, weight, bias, out_dtype),
              "CPU residual LayerNorm: contiguous float32 or float64 CPU rows and parameters of "
              "one dtype, on an AVX2 or AVX-512 CPU; got ",
              x.defined() ? c10::str(x.sizes(), " ", x.scalar_type()) : std::string("none"),
              " writing ", c10::toString(out_dtype));
  const int64_t C = x.size(-1), rows = x.numel() / C;
  const at::Tensor g = gamma.contiguous(), w = weight.contiguous(), b = bias.contiguous();
  const at::Tensor keep = factor.defined() ? factor.contiguous() : at::Tensor();
  at::Tensor y = at::empty_like(x), n = at::empty_like(x);
  at::Tensor mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "residual_layer_norm_forward", [&] {
    at::parallel_for(0, rows, kRowsPerBlock, [&](int64_t begin, int64_t end) {
      XDINO_CPU_ISA_CALL(residual_norm_forward, rows_of(x, begin, end), x.data_ptr<scalar_t>(),
                         branch.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                         data_or_null<scalar_t>(keep), w.data_ptr<scalar_t>(),
                         b.data_ptr<scalar_t>(), static_cast<scalar_t>(eps), y.data_ptr<scalar_t>(),
                         n.data_ptr<scalar_t>(), mean.data_ptr<scalar_t>(),
                         rstd.data_ptr<scalar_t>());
    });
  });
  return {y, n, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight,
    const at::Tensor& mean, const at::Tensor& rstd) {
  checks::residual_layer_norm_backward(dn, dy, y, branch, factor, mean, rstd, kImpl);
  XDINO_CHECK(residual_layer_norm_backward_takes(dn, dy, y, branch, gamma, factor, weight),
              "CPU residual LayerNorm backward: contiguous CPU gradients of the forward's shape "
              "and dtype, on an AVX2 or AVX-512 CPU; got ",
              dn.defined() ? c10::str(dn.sizes(), " ", dn.scalar_type()) : std::string("none"));
  const int64_t C = y.size(-1), rows = y.numel() / C;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  const at::Tensor g = gamma.contiguous(), w = weight.contiguous();
  const at::Tensor m = mean.contiguous(), r = rstd.contiguous();
  const at::Tensor keep = factor.defined() ? factor.contiguous() : at::Tensor();
  at::Tensor dx = at::empty_like(y), dbranch = at::empty_like(y);
  // Per block: gamma's, weight's and bias's sums over its rows.
  at::Tensor partial = at::zeros({blocks, 3 * C}, y.options());
  at::Tensor sums = at::empty({3 * C}, y.options().dtype(at::kDouble));
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "residual_layer_norm_backward", [&] {
    scalar_t* pp = partial.data_ptr<scalar_t>();
    at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
      for (int64_t k = first; k < last; ++k) {
        const int64_t r0 = k * kRowsPerBlock, r1 = std::min(rows, r0 + kRowsPerBlock);
        XDINO_CPU_ISA_CALL(residual_norm_backward, rows_of(y, r0, r1), dn.data_ptr<scalar_t>(),
                           dy.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                           branch.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                           data_or_null<scalar_t>(keep), w.data_ptr<scalar_t>(),
                           m.data_ptr<scalar_t>(), r.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(),
                           dbranch.data_ptr<scalar_t>(), pp + k * 3 * C);
      }
    });
    // The blocks' sums added in block order, in float64.
    double* s = sums.data_ptr<double>();
    std::fill(s, s + 3 * C, 0.0);
    for (int64_t k = 0; k < blocks; ++k)
      for (int64_t c = 0; c < 3 * C; ++c) s[c] += static_cast<double>(pp[k * 3 * C + c]);
  });
  const at::Tensor parts = sums.to(y.scalar_type());
  return {dx, dbranch, parts.narrow(0, 0, C).reshape(gamma.sizes()),
          parts.narrow(0, C, C).reshape(weight.sizes()),
          parts.narrow(0, 2 * C, C).reshape(weight.sizes())};
}

}  // namespace xdino::kernels::cpu
