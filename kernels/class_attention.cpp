#include "kernels/class_attention.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>

#include "core/check.h"
#include "kernels/cpu/class_attention_kernel.h"
#include "kernels/cpu/isa.h"

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

ClassAttentionDims class_attention_dims(const at::Tensor& kv, int64_t heads) {
  const int64_t d = kv.size(2) / 2 / heads;
  return {kv.size(0), kv.size(1), heads, d, 1.0 / std::sqrt(static_cast<double>(d))};
}

// Items per task: a main-job item is ~3k multiply-adds, so a task needs a few dozen.
constexpr int64_t kClassAttentionGrain = 32;

class ClassAttentionFunction : public torch::autograd::Function<ClassAttentionFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& kv,
                            int64_t heads) {
    const ClassAttentionDims dims = class_attention_dims(kv, heads);
    at::Tensor out = at::empty_like(q);
    at::Tensor attn = at::empty({dims.batch, heads, dims.tokens}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "class_attention_forward", [&] {
      at::parallel_for(0, dims.batch * heads, kClassAttentionGrain,
                       [&](int64_t begin, int64_t end) {
                         XDINO_CPU_ISA_CALL(class_attention_forward, dims, q.data_ptr<scalar_t>(),
                                            kv.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
                                            attn.data_ptr<scalar_t>(), begin, end);
                       });
    });
    ctx->save_for_backward({q, kv, attn});
    ctx->saved_data["heads"] = heads;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &q = s[0], &kv = s[1], &attn = s[2];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const ClassAttentionDims dims = class_attention_dims(kv, heads);
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dq = at::empty_like(q);
    at::Tensor dkv = at::empty_like(kv);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "class_attention_backward", [&] {
      at::parallel_for(
          0, dims.batch * heads, kClassAttentionGrain, [&](int64_t begin, int64_t end) {
            XDINO_CPU_ISA_CALL(class_attention_backward, dims, dout.data_ptr<scalar_t>(),
                               q.data_ptr<scalar_t>(), kv.data_ptr<scalar_t>(),
                               attn.data_ptr<scalar_t>(), dq.data_ptr<scalar_t>(),
                               dkv.data_ptr<scalar_t>(), begin, end);
          });
    });
    return {ctx->needs_input_grad(0) ? dq : at::Tensor(),
            ctx->needs_input_grad(1) ? dkv : at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool class_attention_applies(const at::Tensor& q, const at::Tensor& kv, int64_t heads) {
  if (cpu_isa() == Isa::kNone || !q.defined() || !kv.defined()) return false;
  if (!q.device().is_cpu() || !kv.device().is_cpu() || !q.is_contiguous() || !kv.is_contiguous())
    return false;
  const at::ScalarType s = q.scalar_type();
  if ((s != at::kFloat && s != at::kDouble) || kv.scalar_type() != s) return false;
  if (q.dim() != 2 || kv.dim() != 3 || heads < 1) return false;
  const int64_t C = q.size(1);
  return C > 0 && C % heads == 0 && kv.size(0) == q.size(0) && kv.size(1) >= 1 &&
         kv.size(2) == 2 * C;
}

at::Tensor class_attention(const at::Tensor& q, const at::Tensor& kv, int64_t heads) {
  XDINO_CHECK(class_attention_applies(q, kv, heads),
              "CPU class attention: a contiguous (B, C) query and (B, T, 2C) keys and values, "
              "float32 or float64 CPU tensors of one dtype, C a multiple of ",
              heads, " heads, on an AVX2 or AVX-512 CPU; got ",
              q.defined() ? c10::str(q.sizes(), " ", q.scalar_type(), " on ", q.device())
                          : std::string("none"),
              " and ",
              kv.defined() ? c10::str(kv.sizes(), " ", kv.scalar_type(), " on ", kv.device())
                           : std::string("none"));
  return ClassAttentionFunction::apply(q, kv, heads);
}

}  // namespace xdino::kernels
