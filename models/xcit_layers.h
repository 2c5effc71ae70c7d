// The layers of XCiT (docs/architecture.md, "XCiT"), named like the official modules so that a
// model's state_dict keys are the official ones.
//
// Shapes: B batch, C channels, h heads, d = C/h, (Hp, Wp) token grid, N = Hp*Wp patch tokens,
// T = N+1 tokens with CLS first. Token order is row-major over the grid (n = r*Wp + c).
// BatchNorms are models::BatchNorm (SyncBatchNorm once given a communicator; see
// docs/architecture.md, "Processes").
// Every forward accepts float32, float64 or bfloat16/float16 tensors and runs under autocast;
// softmax and the XCA norms are computed in float32 (float64 for float64 inputs), as PyTorch's
// autocast does for the official model.
// Optional capture pointers (nullptr: no capture) let one forward implementation also return
// attention maps and |Q|/|K| statistics (see models/backbone.h).
//
// Contract:
//  - Patch-token layers (XCA, LPI, XCABlock) map x (B, N, C) -> (B, N, C); those that see the
//    grid take (Hp, Wp) with Hp * Wp = N. `norms`, when given, receives the |Q|/|K| maps
//    (B, h, N). ClassAttention maps u (B, T, C) -> the CLS row (B, 1, C); ClassAttentionBlock
//    x (B, T, C) -> (B, T, C); `attention`, when given, receives the CLS weights (B, h, T).
//    FourierPositionalEncoding(Hp, Wp) gives (1, N, C). Outputs are in the input's dtype (or
//    autocast's).
//  - Blocks take options structs (TORCH_ARG). C not divisible by the heads throws
//    xdino::UsageError; other shape mismatches fail in LibTorch's own checks (c10::Error).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "models/backbone.h"
#include "models/batch_norm.h"
#include "models/layers.h"

namespace xdino::models {

// `pos_embeder`: fixed Fourier features of the 1-based grid coordinates (y channels 0-31,
// x channels 32-63, interleaved sin/cos) projected by a 1x1 conv 64 -> C (docs/architecture.md,
// "XCiT").
struct FourierPositionalEncodingImpl : torch::nn::Module {
  explicit FourierPositionalEncodingImpl(int64_t dim);
  // (1, N, C) in token_projection's dtype (or autocast's), to add to the patch tokens.
  torch::Tensor forward(int64_t rows, int64_t cols);
  // The 64 fixed features per token, (N, 64), float32 (float64 if `dtype` is kDouble).
  static torch::Tensor features(int64_t rows, int64_t cols, torch::Dtype dtype,
                                torch::Device device);
  // fvcore FLOPs of forward for `num_tokens` tokens: the 1x1 conv 64 -> dim (the features are
  // not counted), the term every family with this encoding adds (XCiT, X-ViT).
  static double flops(int64_t num_tokens, int64_t dim);
  torch::nn::Conv2d token_projection{nullptr};
};
TORCH_MODULE(FourierPositionalEncoding);

// Cross-covariance attention (`attn` of an XCA block): d x d attention per head between
// channels, q and k L2-normalised over the token axis, logits times `temperature` (h,1,1).
// `attention` chooses the path (XcaAttention, models/backbone.h); both compute the same
// function, to float rounding (tests/models/test_xcit_layers.cpp). kSdpa on LibTorch 1.13 throws
// xdino::UsageError at forward; a call with `norms` takes the op path, which computes them.
struct XCAImpl : torch::nn::Module {
  XCAImpl(int64_t dim, int64_t num_heads, XcaAttention attention = XcaAttention::kAuto,
          LayerKernels kernels = LayerKernels::kAuto);
  // x (B, N, C) -> (B, N, C). `norms`: per-token |q|, |k| per head, raw and normalised.
  torch::Tensor forward(const torch::Tensor& x, QKNorms* norms = nullptr);
  // Whether forward runs scaled_dot_product_attention (when not asked for the norms).
  bool uses_sdpa() const;
  int64_t num_heads;
  XcaAttention attention;
  LayerKernels kernels;  // the token norms' path
  torch::Tensor temperature;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(XCA);

// Local patch interaction (`local_mp`): depthwise conv3x3 -> GELU -> BN -> depthwise conv3x3
// on the token grid; x (B, N, C) -> (B, N, C).
struct LPIImpl : torch::nn::Module {
  explicit LPIImpl(int64_t dim);
  torch::Tensor forward(const torch::Tensor& x, int64_t rows, int64_t cols);
  torch::nn::Conv2d conv1{nullptr};
  BatchNorm bn{nullptr};
  torch::nn::Conv2d conv2{nullptr};
};
TORCH_MODULE(LPI);

// `blocks.i`: x += DP(gamma1 * XCA(norm1 x)); x += DP(gamma3 * LPI(norm3 x));
// x += DP(gamma2 * MLP(norm2 x)) -- in this order (docs/architecture.md, "XCiT"). Patch
// tokens only.
// Named like LibTorch's options: XCABlock(XCABlockOptions(384, 8).drop_path_rate(0.1)).
struct XCABlockOptions {
  XCABlockOptions(int64_t dim, int64_t num_heads) : dim_(dim), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(double, eta) = 1.0;             // initial value of the layer scales gamma1..3
  TORCH_ARG(double, drop_path_rate) = 0.0;  // stochastic depth of the three residuals
  TORCH_ARG(XcaAttention, attention) = XcaAttention::kAuto;  // XCA's path
  TORCH_ARG(LayerKernels, kernels) = LayerKernels::kAuto;    // norm1..3's path (layers.h)
};

struct XCABlockImpl : torch::nn::Module {
  explicit XCABlockImpl(const XCABlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x, int64_t rows, int64_t cols,
                        QKNorms* norms = nullptr);
  double drop_path_rate;
  LayerKernels kernels;
  torch::Tensor gamma1, gamma2, gamma3;
  torch::nn::LayerNorm norm1{nullptr};
  XCA attn{nullptr};
  torch::nn::LayerNorm norm2{nullptr};
  Mlp mlp{nullptr};
  torch::nn::LayerNorm norm3{nullptr};
  LPI local_mp{nullptr};
};
TORCH_MODULE(XCABlock);

// Class attention (`cls_attn_blocks.j.attn`): only the CLS query attends, over all T tokens
// (CLS key included), scale d^-1/2. u (B, T, C) -> the new CLS row (B, 1, C); the official
// module's pass-through of the patch rows is done by ClassAttentionBlock.
// `attention`: the softmax weights (B, h, T), float32 (float64 for float64 inputs).
struct ClassAttentionImpl : torch::nn::Module {
  ClassAttentionImpl(int64_t dim, int64_t num_heads);
  torch::Tensor forward(const torch::Tensor& u, torch::Tensor* attention = nullptr);
  int64_t num_heads;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(ClassAttention);

// `cls_attn_blocks.j` with the official quirks (docs/architecture.md, "XCiT"): u = norm1(x);
// CLS: x0 + gamma1*attn(u); patches: x_n + gamma1*u_n; then norm2 on all tokens (tokens_norm)
// or on CLS only; CLS gets + gamma2*MLP(z0) on top of the normalised z0; patch rows double.
// No stochastic depth. x (B, T, C) -> (B, T, C).
struct ClassAttentionBlockOptions {
  ClassAttentionBlockOptions(int64_t dim, int64_t num_heads) : dim_(dim), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(double, eta) = 1.0;          // initial value of the layer scales gamma1, gamma2
  TORCH_ARG(bool, tokens_norm) = false;  // norm2 on all tokens (true) or on CLS only
};

struct ClassAttentionBlockImpl : torch::nn::Module {
  explicit ClassAttentionBlockImpl(const ClassAttentionBlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* attention = nullptr);
  bool tokens_norm;
  torch::Tensor gamma1, gamma2;
  torch::nn::LayerNorm norm1{nullptr};
  ClassAttention attn{nullptr};
  torch::nn::LayerNorm norm2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(ClassAttentionBlock);

// |t|_2 over the last dimension, clamped at 1e-12 as F.normalize does, accumulated in `acc`;
// (..., 1) in `acc`. Its backward keeps t itself, never a wider copy, and gives an all-zero
// vector gradient 0 (see xcit_layers.cpp).
// kernels: the fused path (kFused, or kAuto on a CUDA tensor) takes kernels::token_norm where it
// applies, the same function in one kernel each way on a card (models/layers.h, LayerKernels).
torch::Tensor token_norm(const torch::Tensor& t, c10::ScalarType acc,
                         LayerKernels kernels = LayerKernels::kOps);

}  // namespace xdino::models
