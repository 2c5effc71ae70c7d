#include "kernels/xca_core.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include "core/check.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/xca_core_kernel.h"

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

XcaCoreDims dims_of(const at::Tensor& qkv, int64_t heads) {
  return {qkv.size(0), qkv.size(1), heads, qkv.size(2) / 3 / heads};
}

// Items per task: a main-job item is ~0.1 MFLOP, so a few make a task worth a thread.
constexpr int64_t kGrain = 4;

class XcaCoreFunction : public torch::autograd::Function<XcaCoreFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv,
                            const at::Tensor& temperature, int64_t heads) {
    const XcaCoreDims dims = dims_of(qkv, heads);
    const int64_t B = dims.batch, N = dims.tokens, h = heads, d = dims.head_dim;
    const at::Tensor t = temperature.contiguous();
    at::Tensor out = at::empty({B, N, h * d}, qkv.options());
    at::Tensor attn = at::empty({B, h, d, d}, qkv.options());
    at::Tensor q_sq = at::empty({B, h, d}, qkv.options());
    at::Tensor k_sq = at::empty({B, h, d}, qkv.options());
    AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "xca_core_forward", [&] {
      at::parallel_for(0, B * h, kGrain, [&](int64_t begin, int64_t end) {
        XDINO_CPU_ISA_CALL(xca_core_forward, dims, qkv.data_ptr<scalar_t>(), t.data_ptr<scalar_t>(),
                           out.data_ptr<scalar_t>(), attn.data_ptr<scalar_t>(),
                           q_sq.data_ptr<scalar_t>(), k_sq.data_ptr<scalar_t>(), begin, end);
      });
    });
    ctx->save_for_backward({qkv, t, attn, q_sq, k_sq});
    ctx->saved_data["heads"] = heads;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &qkv = s[0], &t = s[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const XcaCoreDims dims = dims_of(qkv, heads);
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dqkv = at::empty_like(qkv);
    at::Tensor dt_items = at::empty({dims.batch, heads}, qkv.options());
    AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "xca_core_backward", [&] {
      at::parallel_for(0, dims.batch * heads, kGrain, [&](int64_t begin, int64_t end) {
        XDINO_CPU_ISA_CALL(xca_core_backward, dims, dout.data_ptr<scalar_t>(),
                           qkv.data_ptr<scalar_t>(), t.data_ptr<scalar_t>(),
                           s[2].data_ptr<scalar_t>(), s[3].data_ptr<scalar_t>(),
                           s[4].data_ptr<scalar_t>(), dqkv.data_ptr<scalar_t>(),
                           dt_items.data_ptr<scalar_t>(), begin, end);
      });
    });
    // The items' temperature gradients summed over the batch in one fixed order.
    at::Tensor dt = ctx->needs_input_grad(1) ? dt_items.sum(0).reshape(t.sizes()) : at::Tensor();
    return {ctx->needs_input_grad(0) ? dqkv : at::Tensor(), dt, at::Tensor()};
  }
};

}  // namespace

bool xca_core_applies(const at::Tensor& qkv, const at::Tensor& temperature, int64_t heads) {
  if (cpu_isa() == Isa::kNone || !qkv.defined() || !temperature.defined()) return false;
  if (!qkv.device().is_cpu() || !temperature.device().is_cpu() || !qkv.is_contiguous())
    return false;
  const at::ScalarType s = qkv.scalar_type();
  if ((s != at::kFloat && s != at::kDouble) || temperature.scalar_type() != s) return false;
  if (qkv.dim() != 3 || qkv.size(1) < 1 || heads < 1 || qkv.size(2) % (3 * heads) != 0 ||
      qkv.size(2) == 0)
    return false;
  return temperature.numel() == heads;
}

at::Tensor xca_core(const at::Tensor& qkv, const at::Tensor& temperature, int64_t heads) {
  XDINO_CHECK(xca_core_applies(qkv, temperature, heads),
              "CPU XCA core: a contiguous (B, N, 3C) float32/float64 CPU qkv with C a multiple of ",
              heads,
              " heads and that many temperatures of its dtype, on an AVX2 or AVX-512 CPU; got ",
              qkv.defined() ? c10::str(qkv.sizes(), " ", qkv.scalar_type(), " on ", qkv.device())
                            : std::string("none"));
  return XcaCoreFunction::apply(qkv, temperature, heads);
}

}  // namespace xdino::kernels
