#include "kernels/token_norm.h"

#include <torch/autograd.h>

#include "kernels/layer_norm.h"
#include "kernels/reference/norms.h"
#ifdef XDINO_WITH_CUDA_KERNELS
#include "kernels/cuda/token_norm.h"
#endif

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class TokenNormFunction : public torch::autograd::Function<TokenNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& t) {
#ifdef XDINO_WITH_CUDA_KERNELS
    auto [n, passes] = t.is_cuda() ? cuda::token_norm_forward(t) : reference::token_norm_forward(t);
#else
    auto [n, passes] = reference::token_norm_forward(t);
#endif
    ctx->save_for_backward({t, n, passes});
    return n;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
#ifdef XDINO_WITH_CUDA_KERNELS
    if (s[0].is_cuda()) return {cuda::token_norm_backward(grads[0], s[0], s[1], s[2])};
#endif
    return {reference::token_norm_backward(grads[0], s[0], s[1], s[2])};
  }
};

}  // namespace

bool token_norm_applies(const at::Tensor& t, at::ScalarType acc) {
  if (!t.defined() || (t.is_cuda() && !cuda_kernels_built())) return false;
  if (t.dim() < 1 || t.dim() > 4 || t.size(-1) < 1) return false;
  const at::ScalarType s = t.scalar_type();
  if (s != at::kFloat && s != at::kDouble && s != at::kHalf && s != at::kBFloat16) return false;
  return acc == (s == at::kDouble ? at::kDouble : at::kFloat);
}

at::Tensor token_norm(const at::Tensor& t) { return TokenNormFunction::apply(t); }

}  // namespace xdino::kernels
