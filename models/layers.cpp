#include "models/layers.h"

#include "core/check.h"
#include "core/compat.h"
#include "distributed/replicas.h"
#include "kernels/bias_gelu.h"
#include "kernels/layer_norm.h"

namespace xdino::models {

namespace nn = torch::nn;
using torch::Tensor;

Tensor drop_path_factor(const Tensor& x, double rate, bool training) {
  if (!training || rate <= 0.0) return {};
  const double keep = 1.0 - rate;
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = x.size(0);
  // Drawn in float32 whatever x's dtype: the mask must be exactly 0 or 1.
  torch::Tensor mask;
  if (const auto* replica = distributed::current_replica(); replica && replica->count > 1) {
    // One replica of a split batch: draw the whole batch's numbers, keep this replica's rows,
    // so the masks are those of the unsplit step (distributed/replicas.h).
    XDINO_CHECK(x.device().is_cpu(), "replicas run on the CPU");
    std::vector<int64_t> full_shape = shape;
    full_shape[0] *= replica->count;
    mask = distributed::replica_rows(
               torch::rand(full_shape, replica->generator, x.options().dtype(torch::kFloat)))
               .contiguous();
  } else {
    mask = torch::rand(shape, x.options().dtype(torch::kFloat));
  }
  mask.add_(keep).floor_();
  return mask.div_(keep).to(x.scalar_type());
}

Tensor residual_drop_path(const Tensor& x, const Tensor& y, const Tensor& gamma, double rate,
                          bool training) {
  const Tensor factor = drop_path_factor(x, rate, training);
  // (B,1,C) scale: one pass over y instead of gamma-multiply, mask-multiply and add.
  if (factor.defined()) return torch::addcmul(x, y, gamma * factor);
  return torch::addcmul(x, y, gamma);
}

Tensor residual_drop_path(const Tensor& x, const Tensor& y, double rate, bool training) {
  const Tensor factor = drop_path_factor(x, rate, training);
  if (factor.defined()) return torch::addcmul(x, y, factor);
  return x + y;
}

// ------------------------------------------------------------------------------------------

namespace {
// What the matrix product after a LayerNorm of x takes: autocast's dtype where it is on.
c10::ScalarType product_dtype(const Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (x.scalar_type() == torch::kDouble || !compat::autocast_enabled(device))
    return x.scalar_type();
  return compat::autocast_dtype(device);
}
}  // namespace

Tensor layer_norm_for_product(nn::LayerNorm& norm, const Tensor& x, LayerKernels kernels) {
  if (wants_fused(kernels, x) && xdino::kernels::layer_norm_applies(x, norm->weight, norm->bias))
    return xdino::kernels::layer_norm(x, norm->weight, norm->bias, norm->options.eps(),
                                      product_dtype(x));
  return norm(x);
}

std::pair<Tensor, Tensor> residual_then_norm(const Tensor& x, const Tensor& branch,
                                             const Tensor& gamma, double rate, bool training,
                                             nn::LayerNorm& norm, LayerKernels kernels) {
  // kAuto on the CPU takes the op only where kernels/cpu's kernel runs it (not the reference,
  // which is no faster than torch's ops there).
  const bool cpu_kernel = wants_cpu_kernel(kernels, x) &&
                          xdino::kernels::residual_layer_norm_has_cpu_kernel(
                              x, branch, gamma, norm->weight, norm->bias, product_dtype(x));
  if ((wants_fused(kernels, x) || cpu_kernel) &&
      xdino::kernels::residual_layer_norm_applies(x, branch, gamma, norm->weight, norm->bias)) {
    // The same random numbers, in the same order, as residual_drop_path draws them; none in
    // eval mode or at rate 0 (an absent factor: the teacher's every step).
    const Tensor factor = drop_path_factor(x, rate, training);
    return xdino::kernels::residual_layer_norm(
        x, branch, gamma, factor.defined() ? c10::optional<Tensor>(factor) : c10::nullopt,
        norm->weight, norm->bias, norm->options.eps(), product_dtype(x));
  }
  Tensor y = residual_drop_path(x, branch, gamma, rate, training);
  Tensor n = layer_norm_for_product(norm, y, kernels);
  return {std::move(y), std::move(n)};
}

MlpImpl::MlpImpl(int64_t dim, int64_t hidden) {
  fc1 = register_module("fc1", nn::Linear(dim, hidden));
  fc2 = register_module("fc2", nn::Linear(hidden, dim));
}

Tensor MlpImpl::forward(const Tensor& x, LayerKernels kernels) {
  // fc1 is split from its bias only where the kernel then takes the product; elsewhere (a CPU
  // without AVX2, autocast's dtype, a CUDA tensor) the MLP is torch's, op for op.
  if (wants_cpu_kernel(kernels, x) && !compat::autocast_enabled(x.device().type()) &&
      xdino::kernels::bias_gelu_takes_linear(x, fc1->weight, fc1->bias))
    return fc2(
        xdino::kernels::bias_gelu(nn::functional::linear(x, fc1->weight).contiguous(), fc1->bias));
  return fc2(torch::gelu(fc1(x)));
}

// ------------------------------------------------------------------------------------------

ConvPatchEmbedImpl::ConvPatchEmbedImpl(int64_t patch, int64_t embed_dim, int64_t channels)
    : patch_size(patch), in_chans(channels) {
  XDINO_CHECK_ARG(patch == 16 || patch == 8 || patch == 4,
                  "XCiT's convolutional patch embedding supports patch size 16, 8 or 4, not ",
                  patch);
  XDINO_CHECK_ARG(embed_dim % 8 == 0, "XCiT embed_dim must be a multiple of 8, got ", embed_dim);
  XDINO_CHECK_ARG(channels >= 1, "--in_chans must be at least 1, got ", channels);
  proj = nn::ModuleList();
  // One "conv3x3" unit: Sequential [Conv2d(k3, s2, p1, no bias), BatchNorm2d].
  const auto add_unit = [&](int64_t in, int64_t out) {
    convs.push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(2).padding(1).bias(false)));
    norms.push_back(BatchNorm(out));
    proj->push_back(nn::Sequential(convs.back(), norms.back()));
  };
  // log2(patch) units, widths doubling up to embed_dim: p16 starts at C/8, p8 at C/4 (the
  // official pair); p4 (ours, for 28-32 px images) continues the pattern at C/2.
  const int64_t first = embed_dim / (patch / 2);
  add_unit(channels, first);
  for (int64_t c = first; c < embed_dim; c *= 2) {
    proj->push_back(nn::GELU());  // parameterless, but it takes an index as in the official
    add_unit(c, 2 * c);
  }
  register_module("proj", proj);
}

std::pair<int64_t, int64_t> ConvPatchEmbedImpl::grid(int64_t height, int64_t width, int64_t patch) {
  for (int64_t p = patch; p > 1; p /= 2) {
    height = (height + 1) / 2;
    width = (width + 1) / 2;
  }
  return {height, width};
}

double ConvPatchEmbedImpl::flops(int64_t height, int64_t width, int64_t patch, int64_t dim,
                                 int64_t channels) {
  double flops = 0;
  double in = static_cast<double>(channels),
         out = static_cast<double>(dim) / static_cast<double>(patch / 2);
  for (int64_t p = patch; p > 1; p /= 2) {  // widths double up to embed_dim
    height = (height + 1) / 2;
    width = (width + 1) / 2;
    const double pixels = static_cast<double>(height * width);
    flops += out * in * 9 * pixels + 2 * out * pixels;
    in = out;
    out *= 2;
  }
  return flops;
}

std::pair<Tensor, std::pair<int64_t, int64_t>> ConvPatchEmbedImpl::forward(const Tensor& images) {
  XDINO_CHECK(images.dim() == 4 && images.size(1) == in_chans, "XCiT expects images (B, ", in_chans,
              ", H, W), got ", images.sizes());
  // NCHW: on CPU these strided convs run ~15% faster than in channels-last.
  Tensor y = images;
  for (size_t i = 0; i < convs.size(); ++i)
    y = norms[i](convs[i](i == 0 ? y : torch::gelu(y)));  // half stays half under autocast
  const int64_t rows = y.size(2), cols = y.size(3);
  // (the copy costs ~C*N per image against ~1000x that for the convs)
  Tensor tokens = y.flatten(2).transpose(1, 2).contiguous();
  return {tokens, {rows, cols}};
}

// ------------------------------------------------------------------------------------------

ViTPatchEmbedImpl::ViTPatchEmbedImpl(int64_t patch, int64_t dim, int64_t in_chans) {
  XDINO_CHECK_ARG(in_chans >= 1, "--in_chans must be at least 1, got ", in_chans);
  proj = register_module("proj", nn::Conv2d(nn::Conv2dOptions(in_chans, dim, patch).stride(patch)));
}

Tensor ViTPatchEmbedImpl::forward(const Tensor& images) {
  const int64_t in_chans = proj->options.in_channels();
  XDINO_CHECK(images.dim() == 4 && images.size(1) == in_chans, "ViT expects images (B, ", in_chans,
              ", H, W), got ", images.sizes());
  const int64_t p = proj->options.kernel_size()->at(0);
  XDINO_CHECK(images.size(2) >= p && images.size(3) >= p, "image ", images.size(2), "x",
              images.size(3), " is smaller than one ", p, "x", p, " patch");
  return proj(images).flatten(2).transpose(1, 2);
}

}  // namespace xdino::models
