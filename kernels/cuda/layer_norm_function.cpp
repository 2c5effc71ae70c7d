#include "kernels/cuda/layer_norm_function.h"

#include <torch/autograd.h>

#include "kernels/cuda/layer_norm.h"

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

bool floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, double eps, at::ScalarType out_dtype) {
    auto [y, mean, rstd] = cuda::layer_norm_forward(x, weight, bias, eps, out_dtype);
    ctx->save_for_backward({x, weight, mean, rstd});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    auto [dx, dweight, dbias] =
        cuda::layer_norm_backward(grads[0].contiguous(), saved[0], saved[1], saved[2], saved[3]);
    return {dx, dweight, dbias.to(bias_dtype), at::Tensor(), at::Tensor()};
  }
};

class ResidualLayerNormFunction : public torch::autograd::Function<ResidualLayerNormFunction> {
 public:
  static tensor_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& branch,
                             const at::Tensor& gamma, const at::Tensor& weight,
                             const at::Tensor& bias, const at::Tensor& factor, double eps,
                             at::ScalarType out_dtype) {
    auto [y, n, mean, rstd] =
        cuda::residual_layer_norm_forward(x, branch, gamma, factor, weight, bias, eps, out_dtype);
    ctx->save_for_backward({y, branch, gamma, weight, mean, rstd, factor});
    ctx->saved_data["bias_dtype"] = static_cast<int64_t>(bias.scalar_type());
    return {y, n};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const auto bias_dtype = static_cast<at::ScalarType>(ctx->saved_data["bias_dtype"].toInt());
    // Unused outputs come as zeros (materialised grads, the default).
    auto [dx, dbranch, dgamma, dweight, dbias] = cuda::residual_layer_norm_backward(
        grads[1].contiguous(), grads[0].to(s[0].scalar_type()).contiguous(), s[0], s[1], s[2], s[6],
        s[3], s[4], s[5]);
    return {dx,           dbranch,      dgamma,      dweight, dbias.to(bias_dtype),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool layer_norm_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.defined() || !weight.defined() || !bias.defined()) return false;
  if (!x.is_cuda() || !x.is_contiguous() || x.dim() < 1 || x.size(-1) < 1) return false;
  if (!floating(x.scalar_type()) || !floating(weight.scalar_type()) ||
      !floating(bias.scalar_type()))
    return false;
  const int64_t C = x.size(-1);
  return weight.numel() == C && bias.numel() == C && weight.device() == x.device() &&
         bias.device() == x.device();
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

std::pair<at::Tensor, at::Tensor> residual_layer_norm(const at::Tensor& x, const at::Tensor& branch,
                                                      const at::Tensor& gamma,
                                                      const at::Tensor& factor,
                                                      const at::Tensor& weight,
                                                      const at::Tensor& bias, double eps,
                                                      at::ScalarType out_dtype) {
  const auto out = ResidualLayerNormFunction::apply(
      x, branch, gamma, weight, bias, factor.defined() ? factor.detach() : factor, eps, out_dtype);
  return {out[0], out[1]};
}

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps, at::ScalarType out_dtype) {
  return LayerNormFunction::apply(x, weight, bias, eps, out_dtype);
}

}  // namespace xdino::kernels
