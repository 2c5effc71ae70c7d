#include "kernels/cuda/token_norm_function.h"

#include <torch/autograd.h>

#include "kernels/cuda/token_norm.h"

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class TokenNormFunction : public torch::autograd::Function<TokenNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& t) {
    auto [n, passes] = cuda::token_norm_forward(t);
    ctx->save_for_backward({t, n, passes});
    return n;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {cuda::token_norm_backward(grads[0], saved[0], saved[1], saved[2])};
  }
};

}  // namespace

bool token_norm_applies(const at::Tensor& t, at::ScalarType acc) {
  if (!t.defined() || !t.is_cuda() || t.dim() < 1 || t.dim() > 4 || t.size(-1) < 1) return false;
  const at::ScalarType s = t.scalar_type();
  if (s != at::kFloat && s != at::kDouble && s != at::kHalf && s != at::kBFloat16) return false;
  return acc == (s == at::kDouble ? at::kDouble : at::kFloat);
}

at::Tensor token_norm(const at::Tensor& t) { return TokenNormFunction::apply(t); }

}  // namespace xdino::kernels
