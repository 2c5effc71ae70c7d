// The argument checks of the fused norms' implementations (kernels/reference/norms.cpp and
// kernels/cuda/layer_norm.cu), written once so that every implementation refuses the same
// inputs with the same line: `impl` names the implementation ("CUDA", "reference") at the head
// of each message, e.g. "CUDA residual LayerNorm: gamma, weight and bias must have 128 entries".
// What only one implementation needs (a CUDA kernel's contiguous device tensors) it checks
// itself, before these.
//
// Contract: each function returns normally or throws xdino::Error; none reads tensor data, so
// they cost no device synchronisation. Header-only: nvcc compiles it into the CUDA library as
// host code, which cannot link against xdino_kernels (that library links it).
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>
#include <string>

#include "core/check.h"

namespace xdino::kernels::checks {

inline bool floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Every norm computes in float64 for float64 input and in float32 otherwise.
inline at::ScalarType accumulation_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// A float tensor of rows along its last dimension.
inline void rows(const at::Tensor& t, const char* impl, const char* op, const char* what) {
  XDINO_CHECK(t.defined() && floating(t.scalar_type()), impl, " ", op, ": ", what,
              " must be a float tensor");
  XDINO_CHECK(t.dim() >= 1 && t.size(-1) >= 1, impl, " ", op, ": ", what,
              " needs a non-empty last dimension, got ", t.sizes());
}

// float64 arithmetic writes float64; float32 arithmetic writes float32, float16 or bfloat16.
inline void output_dtype(at::ScalarType acc, at::ScalarType out, const char* impl, const char* op) {
  XDINO_CHECK(acc == at::kDouble ? out == at::kDouble : out != at::kDouble && floating(out), impl,
              " ", op, ": ", c10::toString(acc), " arithmetic writes ",
              acc == at::kDouble ? "float64" : "float32/16 or bfloat16", ", not ",
              c10::toString(out));
}

// One entry per channel of x, on x's device, for each of the given parameters.
inline void parameters(const at::Tensor& x, std::initializer_list<const at::Tensor*> params,
                       const char* names, const char* impl, const char* op) {
  const int64_t C = x.size(-1);
  for (const at::Tensor* p : params) {
    XDINO_CHECK(p->defined() && p->numel() == C && p->device() == x.device(), impl, " ", op, ": ",
                names, " must have ", C, " entries on ", x.device(), ", got ",
                p->defined() ? c10::str(p->sizes(), " on ", p->device()) : std::string("none"));
  }
}

// The forward's statistics: one value per row of x, in the accumulation type.
inline void statistics(const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& x,
                       const char* impl, const char* op) {
  const at::ScalarType acc = accumulation_type(x);
  const int64_t rows = x.numel() / x.size(-1);
  XDINO_CHECK(mean.scalar_type() == acc && rstd.scalar_type() == acc && mean.numel() == rows &&
                  rstd.numel() == rows,
              impl, " ", op, ": mean and rstd must be the forward's (", rows, " rows of ",
              c10::toString(acc), ")");
}

// The per-sample (stochastic-depth) factor, where given: one value per sample, on x's device.
inline void sample_factor(const at::Tensor& factor, const at::Tensor& x, const char* impl) {
  if (!factor.defined()) return;
  XDINO_CHECK(x.dim() >= 2 && factor.numel() == x.size(0) && factor.device() == x.device(), impl,
              " residual LayerNorm: the stochastic-depth factor needs one value per sample (",
              x.size(0), ") on ", x.device(), ", got ", factor.sizes());
}

// LayerNorm(x; weight, bias) -> out_dtype.
inline void layer_norm_forward(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, at::ScalarType out_dtype, const char* impl) {
  rows(x, impl, "LayerNorm", "input");
  parameters(x, {&weight, &bias}, "weight and bias", impl, "LayerNorm");
  output_dtype(accumulation_type(x), out_dtype, impl, "LayerNorm");
}

// Its backward: dy of x's shape (float64 where x is), the forward's statistics.
inline void layer_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& mean,
                                const at::Tensor& rstd, const char* impl) {
  rows(x, impl, "LayerNorm", "input");
  rows(dy, impl, "LayerNorm", "gradient");
  XDINO_CHECK(dy.sizes() == x.sizes(), impl, " LayerNorm: gradient ", dy.sizes(),
              " does not match input ", x.sizes());
  XDINO_CHECK(accumulation_type(x) != at::kDouble || dy.scalar_type() == at::kDouble, impl,
              " LayerNorm: float64 input takes a float64 gradient, got ",
              c10::toString(dy.scalar_type()));
  statistics(mean, rstd, x, impl, "LayerNorm");
}

// y = x + branch * gamma * factor, then LayerNorm(y; weight, bias) -> out_dtype: the residual x
// in the accumulation type, the branch of its shape (float64 where x is).
inline void residual_layer_norm_forward(const at::Tensor& x, const at::Tensor& branch,
                                        const at::Tensor& gamma, const at::Tensor& factor,
                                        const at::Tensor& weight, const at::Tensor& bias,
                                        at::ScalarType out_dtype, const char* impl) {
  const char* op = "residual LayerNorm";
  rows(x, impl, op, "the residual");
  rows(branch, impl, op, "the branch");
  const at::ScalarType acc = accumulation_type(x);
  XDINO_CHECK(x.scalar_type() == acc && branch.sizes() == x.sizes(), impl, " ", op,
              ": the residual must be float32 or float64 and the branch of its shape, got ",
              c10::toString(x.scalar_type()), " ", x.sizes(), " and ", branch.sizes());
  XDINO_CHECK(acc != at::kDouble || branch.scalar_type() == acc, impl, " ", op,
              ": a float64 residual takes a float64 branch");
  parameters(x, {&gamma, &weight, &bias}, "gamma, weight and bias", impl, op);
  sample_factor(factor, x, impl);
  output_dtype(acc, out_dtype, impl, op);
}

// Its backward: both gradients of y's shape, the residual's in the accumulation type (all
// float64 where y is), the forward's statistics.
inline void residual_layer_norm_backward(const at::Tensor& dn, const at::Tensor& dy,
                                         const at::Tensor& y, const at::Tensor& branch,
                                         const at::Tensor& factor, const at::Tensor& mean,
                                         const at::Tensor& rstd, const char* impl) {
  const char* op = "residual LayerNorm";
  rows(y, impl, op, "the residual's output");
  rows(dn, impl, op, "the normalised output's gradient");
  rows(dy, impl, op, "the residual's gradient");
  const at::ScalarType acc = accumulation_type(y);
  XDINO_CHECK(dn.sizes() == y.sizes() && dy.sizes() == y.sizes() && branch.sizes() == y.sizes() &&
                  dy.scalar_type() == acc,
              impl, " ", op, ": the gradients must match the outputs ", y.sizes());
  XDINO_CHECK(acc != at::kDouble ||
                  (dn.scalar_type() == at::kDouble && branch.scalar_type() == at::kDouble),
              impl, " ", op, ": a float64 residual takes float64 gradients");
  sample_factor(factor, y, impl);
  statistics(mean, rstd, y, impl, op);
}

}  // namespace xdino::kernels::checks
