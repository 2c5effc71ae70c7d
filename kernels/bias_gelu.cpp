#include "kernels/bias_gelu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cpu/bias_gelu_kernel.h"
#include "kernels/cpu/isa.h"

namespace xdino::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Rows per block: the unit of the threads' work and of the bias gradient's partial sums. Fixed,
// so that the gradient's rounding does not follow the thread count; 64 rows of a 512-wide MLP
// are 128 KiB of h, a few microseconds of work.
constexpr int64_t kRowsPerBlock = 64;

class BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h, const at::Tensor& bias) {
    const int64_t cols = h.size(-1), rows = h.numel() / cols;
    const at::Tensor b = bias.contiguous();
    at::Tensor out = at::empty_like(h);
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "bias_gelu_forward", [&] {
      const scalar_t* hp = h.data_ptr<scalar_t>();
      scalar_t* op = out.data_ptr<scalar_t>();
      at::parallel_for(0, rows, kRowsPerBlock, [&](int64_t begin, int64_t end) {
        XDINO_CPU_ISA_CALL(bias_gelu_forward, hp + begin * cols, b.data_ptr<scalar_t>(),
                           op + begin * cols, end - begin, cols);
      });
    });
    ctx->save_for_backward({h, b});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &h = s[0], &b = s[1];
    const int64_t cols = h.size(-1), rows = h.numel() / cols;
    const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dh = at::empty_like(h);
    at::Tensor partial = at::zeros({blocks, cols}, h.options());
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "bias_gelu_backward", [&] {
      const scalar_t* g = dout.data_ptr<scalar_t>();
      const scalar_t* hp = h.data_ptr<scalar_t>();
      scalar_t* dp = dh.data_ptr<scalar_t>();
      scalar_t* pp = partial.data_ptr<scalar_t>();
      at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
        for (int64_t k = first; k < last; ++k) {
          const int64_t r0 = k * kRowsPerBlock, n = std::min(kRowsPerBlock, rows - r0);
          XDINO_CPU_ISA_CALL(bias_gelu_backward, g + r0 * cols, hp + r0 * cols,
                             b.data_ptr<scalar_t>(), dp + r0 * cols, pp + k * cols, n, cols);
        }
      });
    });
    // The blocks' sums added in block order, in float64 (a few dozen rows of cols values).
    at::Tensor dbias = ctx->needs_input_grad(1)
                           ? partial.to(at::kDouble).sum(0).to(b.scalar_type()).reshape(b.sizes())
                           : at::Tensor();
    return {ctx->needs_input_grad(0) ? dh : at::Tensor(), dbias};
  }
};

}  // namespace

bool bias_gelu_applies(const at::Tensor& h, const at::Tensor& bias) {
  if (cpu_isa() == Isa::kNone || !h.defined() || !bias.defined()) return false;
  if (!h.device().is_cpu() || !bias.device().is_cpu() || !h.is_contiguous()) return false;
  const at::ScalarType s = h.scalar_type();
  if ((s != at::kFloat && s != at::kDouble) || bias.scalar_type() != s) return false;
  return h.dim() >= 1 && h.size(-1) >= 1 && bias.dim() == 1 && bias.numel() == h.size(-1);
}

bool bias_gelu_takes_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (cpu_isa() == Isa::kNone || !x.defined() || !weight.defined() || !bias.defined()) return false;
  if (!x.device().is_cpu() || !weight.device().is_cpu() || !bias.device().is_cpu()) return false;
  const at::ScalarType s = x.scalar_type();
  if ((s != at::kFloat && s != at::kDouble) || weight.scalar_type() != s || bias.scalar_type() != s)
    return false;
  // linear's product is then a fresh contiguous (..., out) tensor of x's dtype.
  return x.dim() >= 1 && weight.dim() == 2 && weight.size(1) == x.size(-1) && weight.size(0) >= 1 &&
         bias.dim() == 1 && bias.numel() == weight.size(0);
}

at::Tensor bias_gelu(const at::Tensor& h, const at::Tensor& bias) {
  XDINO_CHECK(
      bias_gelu_applies(h, bias),
      "CPU bias + GELU: a contiguous float32/float64 CPU tensor and a bias of its last "
      "dimension's size and dtype, on an AVX2 or AVX-512 CPU; got ",
      h.defined() ? c10::str(h.sizes(), " ", h.scalar_type(), " on ", h.device())
                  : std::string("none"),
      " and bias ",
      bias.defined() ? c10::str(bias.sizes(), " ", bias.scalar_type()) : std::string("none"));
  return BiasGeluFunction::apply(h, bias);
}

}  // namespace xdino::kernels
