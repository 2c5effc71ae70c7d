// The layers of XCiT (spec xcit.md sections 3-10), named like the official modules so that a
// model's state_dict keys are the official ones.
//
// Shapes: B batch, C channels, h heads, d = C/h, (Hp, Wp) token grid, N = Hp*Wp patch tokens,
// T = N+1 tokens with CLS first. Token order is row-major over the grid (n = r*Wp + c).
// BatchNorms are models::BatchNorm (SyncBatchNorm once given a communicator, spec section 13).
// Every forward accepts float32, float64 or bfloat16/float16 tensors and runs under autocast;
// softmax and the XCA norms are computed in float32 (float64 for float64 inputs), as PyTorch's
// autocast does for the official model.
// Optional capture pointers (nullptr: no capture) let one forward implementation also return
// attention maps and |Q|/|K| statistics (see models/backbone.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "models/backbone.h"
#include "models/batch_norm.h"

namespace xdino::models {

// x + s * gamma * y, where s is the per-sample stochastic-depth factor (spec section 10):
// floor(keep + U[0,1)) / keep with keep = 1 - rate, drawn per sample; s = 1 in eval mode or
// when rate == 0. x, y: (B, ..., C); gamma: (C,).
torch::Tensor residual_drop_path(const torch::Tensor& x, const torch::Tensor& y,
                                 const torch::Tensor& gamma, double rate, bool training);

// x + s * y (no layer scale), for the ViT blocks.
torch::Tensor residual_drop_path(const torch::Tensor& x, const torch::Tensor& y, double rate,
                                 bool training);

// The per-sample factor alone, (B, 1, ..., 1) with x's rank, in x's dtype; undefined when
// stochastic depth is off (eval mode or rate == 0).
torch::Tensor drop_path_factor(const torch::Tensor& x, double rate, bool training);

// timm Mlp: fc1 -> GELU (erf) -> fc2.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// `patch_embed`: stride-2 conv3x3 (no bias) + BN units with GELU between them, 4 units for
// patch 16 and 3 for patch 8, at Sequential indices 0,2,4(,6). Any input size; every unit
// rounds up (out = ceil(in / 2)). Throws xdino::UsageError for another patch size.
struct ConvPatchEmbedImpl : torch::nn::Module {
  ConvPatchEmbedImpl(int64_t patch_size, int64_t embed_dim);
  // images (B, 3, H, W) -> tokens (B, N, C) contiguous, and the grid (Hp, Wp).
  std::pair<torch::Tensor, std::pair<int64_t, int64_t>> forward(const torch::Tensor& images);
  // (Hp, Wp) for an H x W input, without running anything.
  static std::pair<int64_t, int64_t> grid(int64_t height, int64_t width, int64_t patch_size);
  int64_t patch_size;
  // Official layout: a Sequential [unit, GELU, unit, GELU, ...]; LibTorch cannot nest
  // Sequentials, so the outer list is a ModuleList with the same indices.
  torch::nn::ModuleList proj{nullptr};
  std::vector<torch::nn::Conv2d> convs;  // proj.{0,2,4,6}.0
  std::vector<BatchNorm> norms;          // proj.{0,2,4,6}.1
};
TORCH_MODULE(ConvPatchEmbed);

// `pos_embeder`: fixed Fourier features of the 1-based grid coordinates (y channels 0-31,
// x channels 32-63, interleaved sin/cos) projected by a 1x1 conv 64 -> C (spec section 4).
struct FourierPositionalEncodingImpl : torch::nn::Module {
  explicit FourierPositionalEncodingImpl(int64_t dim);
  // (1, N, C) in token_projection's dtype (or autocast's), to add to the patch tokens.
  torch::Tensor forward(int64_t rows, int64_t cols);
  // The 64 fixed features per token, (N, 64), float32 (float64 if `dtype` is kDouble).
  static torch::Tensor features(int64_t rows, int64_t cols, torch::Dtype dtype,
                                torch::Device device);
  torch::nn::Conv2d token_projection{nullptr};
};
TORCH_MODULE(FourierPositionalEncoding);

// Cross-covariance attention (`attn` of an XCA block): d x d attention per head between
// channels, q and k L2-normalised over the token axis, logits times `temperature` (h,1,1).
struct XCAImpl : torch::nn::Module {
  XCAImpl(int64_t dim, int64_t num_heads);
  // x (B, N, C) -> (B, N, C). `norms`: per-token |q|, |k| per head, raw and normalised.
  torch::Tensor forward(const torch::Tensor& x, QKNorms* norms = nullptr);
  int64_t num_heads;
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
// x += DP(gamma2 * MLP(norm2 x)) -- in this order (spec section 8). Patch tokens only.
struct XCABlockImpl : torch::nn::Module {
  XCABlockImpl(int64_t dim, int64_t num_heads, double eta, double drop_path_rate);
  torch::Tensor forward(const torch::Tensor& x, int64_t rows, int64_t cols,
                        QKNorms* norms = nullptr);
  double drop_path_rate;
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

// `cls_attn_blocks.j` with the official quirks (spec section 9): u = norm1(x);
// CLS: x0 + gamma1*attn(u); patches: x_n + gamma1*u_n; then norm2 on all tokens (tokens_norm)
// or on CLS only; CLS gets + gamma2*MLP(z0) on top of the normalised z0; patch rows double.
// No stochastic depth. x (B, T, C) -> (B, T, C).
struct ClassAttentionBlockImpl : torch::nn::Module {
  ClassAttentionBlockImpl(int64_t dim, int64_t num_heads, double eta, bool tokens_norm);
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
torch::Tensor token_norm(const torch::Tensor& t, c10::ScalarType acc);

// Dtype in which softmax and norms run for activations of `dtype`: float64 stays float64,
// everything else is float32.
inline torch::Dtype accumulation_dtype(torch::Dtype dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace xdino::models
