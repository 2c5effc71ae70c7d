// Layers shared by the backbones (ViT, XCiT, and the ones to come): the timm Mlp, stochastic
// depth on a residual branch, the two patch embeddings (ViT's linear one, XCiT's convolutional
// one), the dtype helpers every attention uses, and a LayerNorm (alone or after a residual) on
// torch's ops or kernels/'s fused ones (LayerKernels, below). Submodule names are the official
// ones (fc1/fc2, proj.*), so checkpoints map onto them by name.
//
// Contract: every forward accepts float32, float64 or bfloat16/float16 tensors and runs under
// autocast; accumulation_dtype() is where softmax and norms run. BatchNorms are
// models::BatchNorm (SyncBatchNorm once given a communicator).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "models/backbone.h"
#include "models/batch_norm.h"

namespace xdino::models {

// How an XCA block's normalisations run (docs/tiers.md, "A kernel"): its LayerNorms, the
// LayerScale residuals that feed them, and XCA's token norms of q and k.
//  - kOps: torch's LayerNorm; under autocast it writes float32, which the next matrix product
//    casts to autocast's dtype in a kernel of its own;
//  - kFused: kernels::layer_norm writes autocast's dtype directly (x's dtype without
//    autocast), in one pass, and the two LayerScale residuals that feed norm3 and norm2 come
//    out of the same op as the norm (kernels::residual_layer_norm; models/layers.h,
//    residual_then_norm), and XCA's token norms read q and k once (kernels::token_norm;
//    models/xcit_layers.h). On a CUDA tensor of a build with kernels/cuda they run the CUDA
//    kernels; on the CPU, the same autograd ops over kernels/reference's ATen ops (what CI
//    tests of the fused path on every build; no faster than kOps there); a tensor neither
//    takes (an unsupported dtype or layout, a CUDA tensor without the kernels) runs kOps;
//  - kAuto: kFused on a CUDA tensor; on the CPU, kernels/cpu's XCA core (kernels/xca_core.h:
//    the token norms, the d x d products, the temperature, the softmax and the product with v
//    in one op, on AVX2/AVX-512), its bias + GELU (kernels/bias_gelu.h, in the XCA block's
//    MLP) and its residual + LayerNorm (kernels::residual_layer_norm where
//    residual_layer_norm_has_cpu_kernel: float32/float64 outside autocast) where they apply,
//    and torch's ops elsewhere (norm1, LPI, autocast). On an H200
//    (2026-11-28) the fused kernels passed every test of tests/kernels/ and the CUDA
//    Trainer's, and won each of five alternated A/Bs of the XCiT-S12/16 step, 5-18%
//    (bench/results/gpu.md, "Fused kernels on a card"); on the CPU the reference norms are no
//    faster than torch's, and the XCA core makes the main job's step 1.16x and the 224 px step
//    1.14x faster on an AVX-512 Zen 4, not yet timed on an AVX2-only CPU
//    (bench/results/training_step_cpu.md, "CPU step 3").
//  kFused on the CPU also takes the XCA core (and the reference norms, where XCA's core does
//  not apply: the token norms of the SDPA path); kOps takes none of kernels/.
enum class LayerKernels { kAuto, kOps, kFused };

// Whether `kernels` asks for the fused path for a tensor on x's device (kAuto: on CUDA). The
// fused ops still fall back to kOps on what they do not take (the *_applies of kernels/).
inline bool wants_fused(LayerKernels kernels, const torch::Tensor& x) {
  return kernels == LayerKernels::kFused || (kernels == LayerKernels::kAuto && x.is_cuda());
}

// Whether `kernels` asks for kernels/cpu's vectorised kernels (XCA's core,
// kernels/xca_core.h; the MLP's bias + GELU, kernels/bias_gelu.h) for a CPU tensor x: kFused and
// kAuto do; kOps keeps torch's ops. They still fall back to the op path on what they do not take
// (xca_core_applies).
inline bool wants_cpu_kernel(LayerKernels kernels, const torch::Tensor& x) {
  return kernels != LayerKernels::kOps && x.device().is_cpu();
}

// norm(x) in the dtype the matrix product after it takes, by `kernels`. Same values as norm(x)
// up to float32 rounding; differentiable in x and norm's parameters.
torch::Tensor layer_norm_for_product(torch::nn::LayerNorm& norm, const torch::Tensor& x,
                                     LayerKernels kernels);

// {y, n}: y = residual_drop_path(x, branch, gamma, rate, training) and
// n = layer_norm_for_product(norm, y, kernels), as XCiT's blocks chain them; with kFused
// (float32 x) both come from one op (one kernel on a card), whose backward also sums y's two
// gradients.
std::pair<torch::Tensor, torch::Tensor> residual_then_norm(
    const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& gamma, double rate,
    bool training, torch::nn::LayerNorm& norm, LayerKernels kernels);

// x + s * gamma * y, where s is the per-sample stochastic-depth factor (docs/architecture.md):
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

// timm Mlp: fc1 -> GELU (erf) -> fc2. With `kernels` kAuto or kFused on a CPU tensor outside
// autocast, fc1's bias and the GELU run as one op (kernels/bias_gelu.h) after fc1's product:
// the same values up to float32 rounding and a few ulps of erf; kOps (the default, which ViT
// and X-ViT keep) is torch's Linear and GELU.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x, LayerKernels kernels = LayerKernels::kOps);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// `patch_embed`: stride-2 conv3x3 (no bias) + BN units with GELU between them, 4 units for
// patch 16, 3 for patch 8 and 2 for patch 4 (ours, small images), at Sequential indices 0,2,4(,6).
// The first conv (proj.0.0) takes in_chans input channels (3: RGB, the official model). Any
// input size; every unit rounds up (out = ceil(in / 2)). Throws xdino::UsageError for another
// patch size or in_chans < 1.
struct ConvPatchEmbedImpl : torch::nn::Module {
  ConvPatchEmbedImpl(int64_t patch_size, int64_t embed_dim, int64_t in_chans = 3);
  // images (B, in_chans, H, W) -> tokens (B, N, C) contiguous, and the grid (Hp, Wp).
  std::pair<torch::Tensor, std::pair<int64_t, int64_t>> forward(const torch::Tensor& images);
  // (Hp, Wp) for an H x W input, without running anything.
  static std::pair<int64_t, int64_t> grid(int64_t height, int64_t width, int64_t patch_size);
  // Eval-mode FLOPs for an H x W input, fvcore convention: each conv's weight elements times
  // its output pixels, plus 2 per BatchNorm output element.
  static double flops(int64_t height, int64_t width, int64_t patch_size, int64_t embed_dim,
                      int64_t in_chans = 3);
  int64_t patch_size;
  int64_t in_chans;
  // Official layout: a Sequential [unit, GELU, unit, GELU, ...]; LibTorch cannot nest
  // Sequentials, so the outer list is a ModuleList with the same indices.
  torch::nn::ModuleList proj{nullptr};
  std::vector<torch::nn::Conv2d> convs;  // proj.{0,2,4,6}.0
  std::vector<BatchNorm> norms;          // proj.{0,2,4,6}.1
};
TORCH_MODULE(ConvPatchEmbed);

// ViT's patch embedding: a patch x patch conv with stride patch (`patch_embed.proj`) from
// in_chans channels (timm's and the official VisionTransformer's in_chans).
struct ViTPatchEmbedImpl : torch::nn::Module {
  ViTPatchEmbedImpl(int64_t patch_size, int64_t embed_dim, int64_t in_chans = 3);
  torch::Tensor forward(const torch::Tensor& images);  // (B, in_chans, H, W) -> (B, n, C)
  torch::nn::Conv2d proj{nullptr};
};
TORCH_MODULE(ViTPatchEmbed);

// Dtype in which softmax and norms run for activations of `dtype`: float64 stays float64,
// everything else is float32.
inline torch::Dtype accumulation_dtype(torch::Dtype dtype) {
  return dtype == torch::kDouble ? torch::kDouble : torch::kFloat;
}

}  // namespace xdino::models
