#include "models/xcit_layers.h"

#include <cmath>

#include "core/check.h"
#include "core/compat.h"
#include "kernels/token_norm.h"
#include "kernels/xca_core.h"

namespace xdino::models {

namespace nn = torch::nn;
using torch::Tensor;
using torch::indexing::None;
using torch::indexing::Slice;

namespace {

nn::LayerNorm layer_norm(int64_t dim) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6));
}

nn::Conv2d depthwise3x3(int64_t dim) {
  return nn::Conv2d(nn::Conv2dOptions(dim, dim, 3).padding(1).groups(dim).bias(true));
}

// |t|_2 over the last dimension, as F.normalize's max(|t|, 1e-12), accumulated in `acc`.
// An autograd node of its own because the composite square -> sum -> sqrt would keep, for its
// backward, the float32 copy that CUDA autocast makes of a half q or k before `square` (pow
// runs in float32 there): 8 bytes per token channel of q and k in every block, ~1.6 GB of an
// XCiT-S12 step at batch 64 (bench/results/gpu.md, "Memory of the mixed-precision step"). This
// node keeps the input itself, as torch's norm does. The clamp is on the squared sum, so an
// all-zero channel gets gradient 0, as F.normalize gives it, and never sqrt'(0) = inf times 0.
struct TokenNorm : torch::autograd::Function<TokenNorm> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& t,
                        c10::ScalarType acc) {
    const Tensor squared_sum = t.to(acc).square().sum({-1}, /*keepdim=*/true);
    const Tensor passes = squared_sum >= 1e-24;  // where the clamp lets the gradient through
    const Tensor n = squared_sum.clamp_min(1e-24).sqrt();
    ctx->save_for_backward({t, n, passes});
    return n;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& t = saved[0];
    // d|t|/dt = t / |t|: one broadcast multiply over t.
    const Tensor scale = (grads[0] / saved[1]).masked_fill(saved[2].logical_not(), 0.0);
    return {(t * scale).to(t.scalar_type()), Tensor()};
  }
};

}  // namespace

Tensor token_norm(const Tensor& t, c10::ScalarType acc, LayerKernels kernels) {
  if (wants_fused(kernels, t) && xdino::kernels::token_norm_applies(t, acc))
    return xdino::kernels::token_norm(t);
  return TokenNorm::apply(t, acc);
}

// ------------------------------------------------------------------------------------------

FourierPositionalEncodingImpl::FourierPositionalEncodingImpl(int64_t dim) {
  token_projection = register_module("token_projection", nn::Conv2d(nn::Conv2dOptions(64, dim, 1)));
}

double FourierPositionalEncodingImpl::flops(int64_t num_tokens, int64_t dim) {
  return 64.0 * static_cast<double>(dim) * static_cast<double>(num_tokens);
}

Tensor FourierPositionalEncodingImpl::features(int64_t rows, int64_t cols, torch::Dtype dtype,
                                               torch::Device device) {
  // The operation sequence of the official float32 code, so float32 results agree bit for bit
  // up to the libm of sin/cos.
  const auto opts = torch::TensorOptions().dtype(accumulation_dtype(dtype)).device(device);
  constexpr int64_t kHidden = 32;
  const double kScale = 2.0 * M_PI;
  Tensor i = torch::arange(kHidden, opts);
  Tensor dim_t = torch::pow(10000.0, torch::div(i, 2, "floor") * 2 / kHidden);
  const auto encode = [&](int64_t n) {
    Tensor coord = torch::arange(1, n + 1, opts);
    coord = coord / (torch::full({1}, static_cast<double>(n), opts) + 1e-6) * kScale;
    Tensor pos = coord.unsqueeze(1) / dim_t;  // (n, 32)
    return torch::stack({pos.index({Slice(), Slice(0, None, 2)}).sin(),
                         pos.index({Slice(), Slice(1, None, 2)}).cos()},
                        2)
        .flatten(1);  // interleaved: sin, cos, sin, cos, ...
  };
  Tensor y = encode(rows).unsqueeze(1).expand({rows, cols, kHidden});
  Tensor x = encode(cols).unsqueeze(0).expand({rows, cols, kHidden});
  return torch::cat({y, x}, 2).reshape({rows * cols, 2 * kHidden});
}

Tensor FourierPositionalEncodingImpl::forward(int64_t rows, int64_t cols) {
  const Tensor& w = token_projection->weight;
  Tensor map = features(rows, cols, w.scalar_type(), w.device());
  // The 1x1 conv as a linear map on (N, 64): same weights, no NCHW round trip.
  Tensor pe =
      torch::nn::functional::linear(map.to(w.scalar_type()), w.flatten(1), token_projection->bias);
  return pe.unsqueeze(0);
}

// ------------------------------------------------------------------------------------------

XCAImpl::XCAImpl(int64_t dim, int64_t heads, XcaAttention path, LayerKernels kernels_path)
    : num_heads(heads), attention(path), kernels(kernels_path) {
  XDINO_CHECK_ARG(dim % heads == 0, "embed_dim ", dim, " is not divisible by ", heads, " heads");
  temperature = register_parameter("temperature", torch::ones({heads, 1, 1}));
  qkv = register_module("qkv", nn::Linear(nn::LinearOptions(dim, 3 * dim).bias(true)));
  proj = register_module("proj", nn::Linear(dim, dim));
}

bool XCAImpl::uses_sdpa() const { return attention == XcaAttention::kSdpa; }

Tensor XCAImpl::forward(const Tensor& x, QKNorms* norms) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), h = num_heads, d = C / h;
  if (norms == nullptr && uses_sdpa()) {
    // XCA is attention with the channels as the sequence and the tokens as the embedding:
    // softmax((t q^)(k^)^T) v on (B, h, d, N) tensors, with scale 1 (the temperature is per
    // head, so it goes into q^). One transposed copy of the qkv output gives q, k and v unit
    // stride along N, which every fused backend requires (docs/flops.md has the shapes).
    const Tensor parts = qkv(x).transpose(1, 2).contiguous().view({B, 3, h, d, N});
    const Tensor q = parts.select(1, 0), k = parts.select(1, 1), v = parts.select(1, 2);
    const auto acc = accumulation_dtype(q.scalar_type());
    const Tensor q_hat = q.to(acc) / token_norm(q, acc, kernels) * temperature.to(acc);
    const Tensor k_hat = k.to(acc) / token_norm(k, acc, kernels);
    const Tensor out =
        compat::sdpa_unscaled(q_hat.to(v.scalar_type()), k_hat.to(v.scalar_type()), v);
    return proj(out.permute({0, 3, 1, 2}).reshape({B, N, C}).contiguous());
  }
  const Tensor qkv_out = qkv(x);
  // The whole core in one op where the CPU kernel takes it (kernels/xca_core.h): the same
  // arithmetic as below, without its ~25 ops and per-item GEMM calls.
  if (norms == nullptr && wants_cpu_kernel(kernels, x) &&
      xdino::kernels::xca_core_applies(qkv_out, temperature, h))
    return proj(xdino::kernels::xca_core(qkv_out, temperature, h));
  // (B, h, d, N) views of the qkv output; matmul reads them through strides. unbind (not
  // three selects) keeps the backward pass to one gradient buffer instead of three.
  const auto parts = qkv_out.view({B, N, 3, h, d}).unbind(2);
  const Tensor q = parts[0].permute({0, 2, 3, 1});
  const Tensor k = parts[1].permute({0, 2, 3, 1});
  const Tensor v = parts[2].permute({0, 2, 3, 1});
  const auto acc = accumulation_dtype(q.scalar_type());
  // F.normalize divides each channel's token vector by max(|.|_2, 1e-12). square+sum is a
  // vectorised reduction over these strided views; linalg_vector_norm is ~4x slower here.
  const Tensor nq = token_norm(q, acc, kernels);
  const Tensor nk = token_norm(k, acc, kernels);
  Tensor logits;
  if (q.scalar_type() == torch::kHalf) {
    // float16 cannot hold the raw q.k^T sums of long sequences: normalise first, like the
    // official code.
    logits =
        torch::matmul(q / nq.to(q.scalar_type()), (k / nk.to(k.scalar_type())).transpose(-2, -1))
            .to(acc);
  } else {
    // Normalising the d x d product instead of q and k is the same math without two passes
    // over (B, h, d, N) tensors and without keeping q^, k^ for the backward pass.
    logits = torch::matmul(q, k.transpose(-2, -1)).to(acc) / (nq * nk.transpose(-2, -1));
  }
  logits = logits * temperature.to(acc);
  const Tensor attn = torch::softmax(logits, -1);
  if (norms != nullptr) {
    // Per token: over the d channels of each head, before and after the normalisation.
    norms->q_raw = q.to(acc).square().sum(2).sqrt();
    norms->k_raw = k.to(acc).square().sum(2).sqrt();
    norms->q_hat = (q.to(acc) / nq).square().sum(2).sqrt();
    norms->k_hat = (k.to(acc) / nk).square().sum(2).sqrt();
  }
  // (B, h, d, N) -> (B, N, h, d) -> (B, N, C): channel = head * d + i. The reshape alone is
  // a view with strides (N*C, 1, N); LibTorch 1.13's linear does not fold such a "transposed"
  // 3-d input into one matrix product but runs it as a batched product against the weight
  // expanded B times, one small GEMM per image, with a batched weight gradient summed after.
  // One copy (N*C floats per image) makes it a single GEMM (bench/results/training_step_cpu.md,
  // "The CPU step against main_dino.py itself").
  const Tensor out = torch::matmul(attn.to(v.scalar_type()), v);
  return proj(out.permute({0, 3, 1, 2}).reshape({B, N, C}).contiguous());
}

// ------------------------------------------------------------------------------------------

LPIImpl::LPIImpl(int64_t dim) {
  conv1 = register_module("conv1", depthwise3x3(dim));
  bn = register_module("bn", BatchNorm(dim));
  conv2 = register_module("conv2", depthwise3x3(dim));
}

Tensor LPIImpl::forward(const Tensor& x, int64_t rows, int64_t cols) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2);
  // (B, N, C) seen as a channels-last image: no copy in, none out.
  Tensor img = x.reshape({B, rows, cols, C}).permute({0, 3, 1, 2});
  // Under autocast the BatchNorm takes the half-precision activation as torch's does (statistics
  // in float32 inside the kernel): a float32 copy would be kept for its backward.
  // GELU runs on the (B, H, W, C) view of conv1's channels-last output: contiguous there, so
  // LibTorch 1.13 takes its vectorised CPU path; on the NCHW view of the same memory GELU and
  // its backward are ~6x slower (bench/results/training_step_cpu.md, "The CPU step against
  // main_dino.py itself"). The same function; the vectorised path may round differently in the
  // last bit.
  const Tensor hidden = torch::gelu(conv1(img).permute({0, 2, 3, 1})).permute({0, 3, 1, 2});
  img = conv2(bn(hidden));
  return img.permute({0, 2, 3, 1}).reshape({B, N, C});
}

// ------------------------------------------------------------------------------------------

XCABlockImpl::XCABlockImpl(const XCABlockOptions& o)
    : drop_path_rate(o.drop_path_rate()), kernels(o.kernels()) {
  const int64_t dim = o.dim(), heads = o.num_heads();
  const double eta = o.eta();
  gamma1 = register_parameter("gamma1", torch::full({dim}, eta));
  gamma2 = register_parameter("gamma2", torch::full({dim}, eta));
  gamma3 = register_parameter("gamma3", torch::full({dim}, eta));
  norm1 = register_module("norm1", layer_norm(dim));
  attn = register_module("attn", XCA(dim, heads, o.attention(), o.kernels()));
  norm2 = register_module("norm2", layer_norm(dim));
  mlp = register_module("mlp", Mlp(dim, 4 * dim));
  norm3 = register_module("norm3", layer_norm(dim));
  local_mp = register_module("local_mp", LPI(dim));
}

Tensor XCABlockImpl::forward(const Tensor& x, int64_t rows, int64_t cols, QKNorms* norms) {
  const bool train = is_training();
  // Each residual feeds the next LayerNorm; residual_then_norm fuses the pair where it can
  // (models/layers.h, LayerKernels). The last residual leaves the block.
  const Tensor n1 = layer_norm_for_product(norm1, x, kernels);
  const auto [y1, n3] =
      residual_then_norm(x, attn(n1, norms), gamma1, drop_path_rate, train, norm3, kernels);
  const auto [y2, n2] = residual_then_norm(y1, local_mp(n3, rows, cols), gamma3, drop_path_rate,
                                           train, norm2, kernels);
  return residual_drop_path(y2, mlp(n2, kernels), gamma2, drop_path_rate, train);
}

// ------------------------------------------------------------------------------------------

ClassAttentionImpl::ClassAttentionImpl(int64_t dim, int64_t heads) : num_heads(heads) {
  XDINO_CHECK_ARG(dim % heads == 0, "embed_dim ", dim, " is not divisible by ", heads, " heads");
  qkv = register_module("qkv", nn::Linear(nn::LinearOptions(dim, 3 * dim).bias(true)));
  proj = register_module("proj", nn::Linear(dim, dim));
}

Tensor ClassAttentionImpl::forward(const Tensor& u, Tensor* attention) {
  namespace F = torch::nn::functional;
  const int64_t B = u.size(0), T = u.size(1), C = u.size(2), h = num_heads, d = C / h;
  const Tensor& w = qkv->weight;
  const Tensor& b = qkv->bias;
  // Only the CLS query is ever used: project q for token 0 alone, k and v for all tokens.
  const Tensor q =
      F::linear(u.select(1, 0), w.narrow(0, 0, C), b.narrow(0, 0, C)).view({B, h, 1, d});
  const auto kv =
      F::linear(u, w.narrow(0, C, 2 * C), b.narrow(0, C, 2 * C)).view({B, T, 2, h, d}).unbind(2);
  const Tensor k = kv[0].transpose(1, 2);  // (B, h, T, d)
  const Tensor v = kv[1].transpose(1, 2);
  const auto acc = accumulation_dtype(q.scalar_type());
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const Tensor logits = torch::matmul(q, k.transpose(-2, -1)).to(acc) * scale;  // (B, h, 1, T)
  const Tensor attn = torch::softmax(logits, -1);
  if (attention != nullptr) *attention = attn.squeeze(2);
  const Tensor cls = torch::matmul(attn.to(v.scalar_type()), v);  // (B, h, 1, d)
  return proj(cls.reshape({B, 1, C}));
}

// ------------------------------------------------------------------------------------------

ClassAttentionBlockImpl::ClassAttentionBlockImpl(const ClassAttentionBlockOptions& o)
    : tokens_norm(o.tokens_norm()) {
  const int64_t dim = o.dim(), heads = o.num_heads();
  const double eta = o.eta();
  gamma1 = register_parameter("gamma1", torch::full({dim}, eta));
  gamma2 = register_parameter("gamma2", torch::full({dim}, eta));
  norm1 = register_module("norm1", layer_norm(dim));
  attn = register_module("attn", ClassAttention(dim, heads));
  norm2 = register_module("norm2", layer_norm(dim));
  mlp = register_module("mlp", Mlp(dim, 4 * dim));
}

Tensor ClassAttentionBlockImpl::forward(const Tensor& x, Tensor* attention) {
  const Tensor u = norm1(x);
  const Tensor patches_u = u.index({Slice(), Slice(1, None)});
  const Tensor patches_x = x.index({Slice(), Slice(1, None)});
  // The official attention module passes the normalised patch rows through, so the residual
  // adds gamma1 * norm1(x_n) to every patch token.
  const Tensor cls = torch::addcmul(x.index({Slice(), Slice(0, 1)}), attn(u, attention), gamma1);
  Tensor patches = torch::addcmul(patches_x, patches_u, gamma1);
  const Tensor z0 = norm2(cls);
  if (tokens_norm) patches = norm2(patches);
  // CLS: residual on top of the normalised token; patches: the residual adds them to
  // themselves.
  return torch::cat({torch::addcmul(z0, mlp(z0), gamma2), patches * 2}, 1);
}

}  // namespace xdino::models
