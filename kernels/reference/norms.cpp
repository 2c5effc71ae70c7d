#include "kernels/reference/norms.h"

#include <ATen/ATen.h>

#include <vector>

#include "core/check.h"
#include "kernels/norm_checks.h"

namespace xdino::kernels::reference {
namespace {

using checks::accumulation_type;
constexpr const char* kImpl = "reference";

// (rows, C) views in the accumulation type, and mean/rstd as (rows, 1) columns.
at::Tensor rows_of(const at::Tensor& t, at::ScalarType acc) {
  return t.to(acc).reshape({-1, t.size(-1)});
}

// The per-sample factor as one value per row (null: 1), in `acc`.
at::Tensor row_factor(const at::Tensor& factor, const at::Tensor& x, at::ScalarType acc) {
  if (!factor.defined()) return {};
  const int64_t tokens = x.numel() / x.size(0) / x.size(-1);
  return factor.to(acc).reshape({-1, 1}).repeat_interleave(tokens, 0);
}

// x_hat, mean and rstd of the rows of xr (rows, C), two passes as the kernels make them. The
// mean is the row's first value plus the mean of the differences from it: exact to the last
// bits of the spread even far from zero (a row of values near 1000 that differ by 0.01 would
// lose four digits to a plain float32 sum; a one-pass variance, all of them).
std::tuple<at::Tensor, at::Tensor, at::Tensor> normalise(const at::Tensor& xr, double eps) {
  const at::Tensor shift = xr.narrow(-1, 0, 1);
  const at::Tensor mean = shift + (xr - shift).mean(-1, /*keepdim=*/true);
  const at::Tensor centred = xr - mean;
  const at::Tensor rstd = (centred.square().mean(-1, /*keepdim=*/true) + eps).rsqrt();
  return {centred * rstd, mean, rstd};
}

// LayerNorm's input gradient from the output's g = dy * weight, on rows (rows, C).
at::Tensor input_gradient(const at::Tensor& g, const at::Tensor& x_hat, const at::Tensor& rstd) {
  const at::Tensor mean_g = g.mean(-1, /*keepdim=*/true);
  const at::Tensor mean_gx = (g * x_hat).mean(-1, /*keepdim=*/true);
  return rstd * (g - mean_g - x_hat * mean_gx);
}

// x_hat from the saved statistics, as the kernels recompute it.
at::Tensor x_hat_of(const at::Tensor& xr, const at::Tensor& mean, const at::Tensor& rstd) {
  return (xr - mean.reshape({-1, 1})) * rstd.reshape({-1, 1});
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_forward(const at::Tensor& x,
                                                                  const at::Tensor& weight,
                                                                  const at::Tensor& bias,
                                                                  double eps,
                                                                  at::ScalarType out_dtype) {
  checks::layer_norm_forward(x, weight, bias, out_dtype, kImpl);
  const int64_t C = x.size(-1);
  const at::ScalarType acc = accumulation_type(x);
  const auto [x_hat, mean, rstd] = normalise(rows_of(x, acc), eps);
  const at::Tensor y = x_hat * weight.to(acc).reshape({1, C}) + bias.to(acc).reshape({1, C});
  return {y.to(out_dtype).reshape(x.sizes()), mean.reshape({-1}), rstd.reshape({-1})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& dy,
                                                                   const at::Tensor& x,
                                                                   const at::Tensor& weight,
                                                                   const at::Tensor& mean,
                                                                   const at::Tensor& rstd) {
  checks::layer_norm_backward(dy, x, mean, rstd, kImpl);
  const int64_t C = x.size(-1);
  const at::ScalarType acc = accumulation_type(x);
  const at::Tensor x_hat = x_hat_of(rows_of(x, acc), mean, rstd);
  const at::Tensor d = rows_of(dy, acc);
  const at::Tensor g = d * weight.to(acc).reshape({1, C});
  const at::Tensor dx = input_gradient(g, x_hat, rstd.reshape({-1, 1}));
  return {dx.to(x.scalar_type()).reshape(x.sizes()),
          (d * x_hat).sum(0).to(weight.scalar_type()).reshape(weight.sizes()),
          d.sum(0).to(weight.scalar_type()).reshape(weight.sizes())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& weight, const at::Tensor& bias, double eps,
    at::ScalarType out_dtype) {
  checks::residual_layer_norm_forward(x, branch, gamma, factor, weight, bias, out_dtype, kImpl);
  const at::ScalarType acc = accumulation_type(x);
  const int64_t C = x.size(-1);
  // gamma * keep first, as the op path multiplies them into one (B, 1, C) scale.
  at::Tensor scale = gamma.to(acc).reshape({1, C});
  if (const at::Tensor keep = row_factor(factor, x, acc); keep.defined()) scale = scale * keep;
  const at::Tensor yr = rows_of(x, acc) + rows_of(branch, acc) * scale;
  const auto [x_hat, mean, rstd] = normalise(yr, eps);
  const at::Tensor n = x_hat * weight.to(acc).reshape({1, C}) + bias.to(acc).reshape({1, C});
  return {yr.reshape(x.sizes()), n.to(out_dtype).reshape(x.sizes()), mean.reshape({-1}),
          rstd.reshape({-1})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_layer_norm_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& weight,
    const at::Tensor& mean, const at::Tensor& rstd) {
  checks::residual_layer_norm_backward(dn, dy, y, branch, factor, mean, rstd, kImpl);
  const at::ScalarType acc = accumulation_type(y);
  const int64_t C = y.size(-1);
  const at::Tensor x_hat = x_hat_of(rows_of(y, acc), mean, rstd);
  const at::Tensor d = rows_of(dn, acc);
  const at::Tensor total = rows_of(dy, acc) + input_gradient(d * weight.to(acc).reshape({1, C}),
                                                             x_hat, rstd.reshape({-1, 1}));
  const at::Tensor keep = row_factor(factor, y, acc);
  at::Tensor scale = gamma.to(acc).reshape({1, C});
  if (keep.defined()) scale = scale * keep;
  at::Tensor through = rows_of(branch, acc);  // what gamma multiplied
  if (keep.defined()) through = through * keep;
  return {total.reshape(y.sizes()), (total * scale).to(branch.scalar_type()).reshape(y.sizes()),
          (total * through).sum(0).to(gamma.scalar_type()).reshape(gamma.sizes()),
          (d * x_hat).sum(0).to(weight.scalar_type()).reshape(weight.sizes()),
          d.sum(0).to(weight.scalar_type()).reshape(weight.sizes())};
}

std::pair<at::Tensor, at::Tensor> token_norm_forward(const at::Tensor& t) {
  XDINO_CHECK(t.defined() && checks::floating(t.scalar_type()) && t.dim() >= 1 && t.size(-1) >= 1,
              "reference token norm: a float tensor with a non-empty last dimension, got ",
              t.defined() ? c10::str(t.sizes()) : std::string("none"));
  const at::Tensor squared_sum = t.to(accumulation_type(t)).square().sum(-1, /*keepdim=*/true);
  // The clamp is on the squared sum: an all-zero vector gets gradient 0, not 0 x inf.
  return {squared_sum.clamp_min(1e-24).sqrt(), squared_sum >= 1e-24};
}

at::Tensor token_norm_backward(const at::Tensor& dn, const at::Tensor& t, const at::Tensor& n,
                               const at::Tensor& passes) {
  const at::ScalarType acc = accumulation_type(t);
  XDINO_CHECK(n.scalar_type() == acc && passes.scalar_type() == at::kBool &&
                  n.numel() * t.size(-1) == t.numel() && passes.numel() == n.numel() &&
                  dn.numel() == n.numel(),
              "reference token norm: n, passes and dn must be the forward's, got ", n.sizes(), ", ",
              passes.sizes(), ", ", dn.sizes());
  // d|t|/dt = t / |t|: one broadcast multiply over t.
  const at::Tensor scale = (dn.to(acc) / n).masked_fill(passes.logical_not(), 0.0);
  return (t.to(acc) * scale).to(t.scalar_type());
}

}  // namespace xdino::kernels::reference
