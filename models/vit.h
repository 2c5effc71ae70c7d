// DINO's Vision Transformer (facebookresearch/dino vision_transformer.py): vit_tiny, vit_small,
// vit_base with patch 16 or 8, checkpoint-compatible with the official DINO ViT weights.
//
// Contract:
//  - Keys, in state_dict order: cls_token, pos_embed [1, (img_size/p)^2 + 1, C],
//    patch_embed.proj.{weight [C, in_chans, p, p],bias}, blocks.i.{norm1, attn.qkv, attn.proj,
//    norm2, mlp.fc1, mlp.fc2}.*, norm.*, [head.* when num_classes > 0]. LayerNorm eps 1e-6, qkv
//    bias.
//  - Init as DINO: pos_embed, cls_token and Linear weights truncated normal (std 0.02),
//    Linear biases 0, LayerNorm 1/0, patch conv PyTorch default. Drop path rate ramps
//    linearly from 0 (first block) to drop_path_rate (last block).
//  - An H x W input gives floor(H/p) x floor(W/p) patches; position embeddings are resized
//    exactly as DINO's interpolate_pos_encoding (bicubic, scale factor (n + 0.1)/sqrt(N)).
//  - linear_features follows eval_linear.py: concatenated final-normed CLS tokens of the last
//    n blocks; with avgpool (n must be 1) the final-normed mean patch token interleaved with
//    the CLS: [cls_0, avg_0, cls_1, avg_1, ...].
#pragma once

#include <string>

#include "models/backbone.h"
#include "models/layers.h"

namespace xdino::models {

struct ViTConfig {
  std::string name = "vit_small";
  std::string paper_name = "ViT-S/16";  // as DINO's paper writes it
  int64_t patch_size = 16;
  int64_t embed_dim = 384;
  int64_t depth = 12;
  int64_t num_heads = 6;
  int64_t img_size = 224;  // position-embedding grid: img_size / patch_size per side
  int64_t num_classes = 0;
  double drop_path_rate = 0.0;
  int64_t in_chans = 3;  // channels of the input images (patch_embed.proj)
};

// vit_tiny (192, 3 heads), vit_small (384, 6), vit_base (768, 12); depth 12.
std::optional<ViTConfig> find_vit_variant(const std::string& name, int64_t patch_size);

double vit_flops(const ViTConfig& config, int64_t height, int64_t width);

// DINO's interpolate_pos_encoding for an H x W input (pixels): pos_embed (1, 1+N0, C) ->
// (1, 1+n, C), n = floor(H/p) * floor(W/p); returned unchanged when n == N0 and H == W.
torch::Tensor interpolate_pos_encoding(const torch::Tensor& pos_embed, int64_t height,
                                       int64_t width, int64_t patch_size);

// Multi-head self-attention, scale head_dim^-1/2. `cls_attention`: the CLS query's softmax
// row (B, h, T), float32 (float64 for float64 inputs).
struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t dim, int64_t num_heads);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* cls_attention = nullptr);
  int64_t num_heads;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
};
TORCH_MODULE(Attention);

struct ViTBlockOptions {
  ViTBlockOptions(int64_t dim, int64_t num_heads) : dim_(dim), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, dim);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(double, drop_path_rate) = 0.0;  // stochastic depth of both residuals
};

struct ViTBlockImpl : torch::nn::Module {
  explicit ViTBlockImpl(const ViTBlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x, torch::Tensor* cls_attention = nullptr);
  double drop_path_rate;
  torch::nn::LayerNorm norm1{nullptr};
  Attention attn{nullptr};
  torch::nn::LayerNorm norm2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(ViTBlock);

class VisionTransformer : public Backbone {
 public:
  explicit VisionTransformer(ViTConfig config);

  Probe probe(torch::Tensor images, const ProbeRequest& request) override;
  torch::Tensor linear_features(torch::Tensor images, int64_t n_last_blocks,
                                bool avgpool_patchtokens) override;

  const std::string& arch() const override { return config_.name; }
  int64_t embed_dim() const override { return config_.embed_dim; }
  int64_t patch_size() const override { return config_.patch_size; }
  int64_t in_chans() const override { return config_.in_chans; }
  std::string input_conv_weight() const override { return "patch_embed.proj.weight"; }
  int64_t num_heads() const override { return config_.num_heads; }
  int64_t num_blocks() const override { return config_.depth; }
  bool supports_token_mask() const override { return true; }
  int64_t block_prefix_tokens() const override { return 1; }
  std::pair<int64_t, int64_t> token_grid(int64_t height, int64_t width) const override;
  double flops(int64_t height, int64_t width) const override;
  const ViTConfig& config() const { return config_; }

  torch::Tensor cls_token, pos_embed;
  ViTPatchEmbed patch_embed{nullptr};
  std::vector<ViTBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};  // null when num_classes == 0

 private:
  ViTConfig config_;
};

}  // namespace xdino::models
