#include "kernels/layer_norm.h"

#include <torch/autograd.h>

#include "kernels/cpu/norms.h"
#include "kernels/reference/norms.h"
#ifdef XDINO_WITH_CUDA_KERNELS
#include "kernels/cuda/layer_norm.h"
#endif

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// A device whose backend this build has: the CPU (or any non-CUDA device) runs the reference,
// or for the residual LayerNorm kernels/cpu's kernel where it takes the tensors; a CUDA
// device, the kernels, when they are built.
bool backend_for(const at::Tensor& x) { return !x.is_cuda() || cuda_kernels_built(); }

// The plain functions of the backend for x's device (kernels/cuda/layer_norm.h's contracts).
std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& w,
                                                       const at::Tensor& b, double eps,
                                                       at::ScalarType out) {
#ifdef XDINO_WITH_CUDA_KERNELS
  if (x.is_cuda()) return cuda::layer_norm_forward(x, w, b, eps, out);
#endif
  return reference::layer_norm_forward(x, w, b, eps, out);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& dy, const at::Tensor& x,
                                                        const at::Tensor& w, const at::Tensor& mean,
                                                        const at::Tensor& rstd) {
#ifdef XDINO_WITH_CUDA_KERNELS
  if (x.is_cuda()) return cuda::layer_norm_backward(dy, x, w, mean, rstd);
#endif
  return reference::layer_norm_backward(dy, x, w, mean, rstd);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_forward(
    const at::Tensor& x, const at::Tensor& branch, const at::Tensor& gamma,
    const at::Tensor& factor, const at::Tensor& w, const at::Tensor& b, double eps,
    at::ScalarType out) {
#ifdef XDINO_WITH_CUDA_KERNELS
  if (x.is_cuda())
    return cuda::residual_layer_norm_forward(x, branch, gamma, factor, w, b, eps, out);
#endif
  if (cpu::residual_layer_norm_takes(x, branch, gamma, factor, w, b, out))
    return cpu::residual_layer_norm_forward(x, branch, gamma, factor, w, b, eps, out);
  return reference::residual_layer_norm_forward(x, branch, gamma, factor, w, b, eps, out);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> residual_backward(
    const at::Tensor& dn, const at::Tensor& dy, const at::Tensor& y, const at::Tensor& branch,
    const at::Tensor& gamma, const at::Tensor& factor, const at::Tensor& w, const at::Tensor& mean,
    const at::Tensor& rstd) {
#ifdef XDINO_WITH_CUDA_KERNELS
  if (y.is_cuda())
    return cuda::residual_layer_norm_backward(dn, dy, y, branch, gamma, factor, w, mean, rstd);
#endif
  if (cpu::residual_layer_norm_backward_takes(dn, dy, y, branch, gamma, factor, w))
    return cpu::residual_layer_norm_backward(dn, dy, y, branch, gamma, factor, w, mean, rstd);
  return reference::residual_layer_norm_backward(dn, dy, y, branch, gamma, factor, w, mean, rstd);
}

// A gradient for an input that asked for one, in `like`'s dtype; undefined otherwise, so that
// nothing is kept for an input without requires_grad.
at::Tensor if_needed(AutogradContext* ctx, size_t input, const at::Tensor& grad,
                     at::ScalarType dtype) {
  return ctx->needs_input_grad(input) ? grad.to(dtype) : at::Tensor();
}

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps, at::ScalarType out_dtype) {
    auto [y, mean, rstd] = kernels::forward(x, weight, bias, eps, out_dtype);
    ctx->save_for_backward({x, weight, mean, rstd});
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto dtype = [&](const char* key) {
      return static_cast<at::ScalarType>(ctx->saved_data[key].toInt());
    };
    auto [dx, dweight, dbias] =
        kernels::backward(grads[0].contiguous(), saved[0], saved[1], saved[2], saved[3]);
    return {if_needed(ctx, 0, dx, saved[0].scalar_type()),
            if_needed(ctx, 1, dweight, dtype("weight_dtype")),
            if_needed(ctx, 2, dbias, dtype("bias_dtype")), at::Tensor(), at::Tensor()};
  }
};

class ResidualLayerNormFunction : public torch::autograd::Function<ResidualLayerNormFunction> {
 public:
  // `factor` is an optional input, not a tensor input: Function::apply describes every tensor
  // input it is given (VariableInfo), and an undefined one has no device to describe.
  static tensor_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& branch,
                             const at::Tensor& gamma, const at::Tensor& weight,
                             const at::Tensor& bias, const c10::optional<at::Tensor>& factor,
                             double eps, at::ScalarType out_dtype) {
    const at::Tensor keep = factor.has_value() ? *factor : at::Tensor();
    auto [y, n, mean, rstd] =
        residual_forward(x, branch, gamma, keep, weight, bias, eps, out_dtype);
    ctx->save_for_backward({y, branch, gamma, weight, mean, rstd, keep});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return {y, n};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    // Unused outputs come as zeros (materialised grads, the default).
    auto [dx, dbranch, dgamma, dweight, dbias] =
        residual_backward(grads[1].contiguous(), grads[0].to(s[0].scalar_type()).contiguous(), s[0],
                          s[1], s[2], s[6], s[3], s[4], s[5]);
    return {if_needed(ctx, 0, dx, s[0].scalar_type()),
            if_needed(ctx, 1, dbranch, s[1].scalar_type()),
            if_needed(ctx, 2, dgamma, s[2].scalar_type()),
            if_needed(ctx, 3, dweight, s[3].scalar_type()),
            if_needed(ctx, 4, dbias, bias_dtype),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

bool cuda_kernels_built() {
#ifdef XDINO_WITH_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

bool layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !bias.defined() || !backend_for(x)) return false;
  if (!x.is_contiguous() || x.dim() < 1 || x.size(-1) < 1) return false;
  if (!floating(x.scalar_type()) || !floating(weight.scalar_type()) ||
      !floating(bias.scalar_type()))
    return false;
  const int64_t C = x.size(-1);
  return weight.numel() == C && bias.numel() == C && weight.device() == x.device() &&
         bias.device() == x.device();
}

bool residual_layer_norm_has_cpu_kernel(const at::Tensor& x, const at::Tensor& branch,
                                        const at::Tensor& gamma, const at::Tensor& weight,
                                        const at::Tensor& bias, at::ScalarType out_dtype) {
  return cpu::residual_layer_norm_takes(x, branch, gamma, at::Tensor(), weight, bias, out_dtype);
}

bool residual_layer_norm_applies(const at::Tensor& x, const at::Tensor& branch,
                                 const at::Tensor& gamma, const at::Tensor& weight,
                                 const at::Tensor& bias) {
  if (!layer_norm_applies(x, weight, bias) || !branch.defined() || !gamma.defined()) return false;
  const bool wide = x.scalar_type() == at::kDouble;
  if (!wide && x.scalar_type() != at::kFloat) return false;
  const at::ScalarType b = branch.scalar_type();
  const bool branch_ok =
      wide ? b == at::kDouble : (b == at::kFloat || b == at::kHalf || b == at::kBFloat16);
  return branch_ok && branch.is_contiguous() && branch.sizes() == x.sizes() &&
         branch.device() == x.device() && x.dim() >= 2 && floating(gamma.scalar_type()) &&
         gamma.numel() == x.size(-1) && gamma.device() == x.device();
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, at::ScalarType out_dtype) {
  return LayerNormFunction::apply(x, weight, bias, eps, out_dtype);
}

std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& branch,
                                                      const at::Tensor& gamma,
                                                      const c10::optional<at::Tensor>& factor,
                                                      const at::Tensor& weight,
                                                      const at::Tensor& bias, double eps,
                                                      at::ScalarType out_dtype) {
  // An undefined tensor is an absent factor too (drop_path_factor's answer in eval mode).
  const c10::optional<at::Tensor> keep = factor.has_value() && factor->defined()
                                             ? c10::optional<at::Tensor>(factor->detach())
                                             : c10::nullopt;
  const auto out =
      ResidualLayerNormFunction::apply(x, branch, gamma, weight, bias, keep, eps, out_dtype);
  return {out[0], out[1]};
}

}  // namespace xdino::kernels
