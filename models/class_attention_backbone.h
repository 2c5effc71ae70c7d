// The shell both class-attention families share (XCiT, models/xcit.h; X-ViT, models/xvit.h):
// a convolutional stem, Fourier positions, `depth` main blocks over the patch tokens, CLS
// appended, class-attention blocks, the final norm of CLS and an optional head. A family says
// only what differs: its block types, the name of its blocks in messages, its options, and
// the order its state_dict registers the parts in.
//
// Contract:
//  - Members carry the official names (cls_token, patch_embed, pos_embeder, blocks,
//    cls_attn_blocks, norm, head); they are registered by the register_* steps, which a
//    family's constructor calls in its state_dict order, then init_weights(). Module
//    construction draws random numbers (LibTorch's default init), so that order is also
//    the order of the random stream: a family must keep it to keep its checkpoints.
//  - probe()/forward() as models/backbone.h: tokens = patch_embed(images) (masked patches
//    replaced by the mask token) + pos_embeder(grid),
//    then probe_class_attention_model (models/class_attention_probe.h). capabilities(): the
//    class-attention layers and |Q|/|K| maps every member has, labelled as the family says.
//  - head is null when shape.num_classes == 0. Nothing here throws; the families check their
//    options before registering anything.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "models/backbone.h"
#include "models/class_attention_probe.h"
#include "models/init.h"
#include "models/layers.h"
#include "models/xcit_layers.h"

namespace xdino::models {

// What the shell needs to know of a family's options.
struct ClassAttentionShape {
  std::string name;
  int64_t patch_size = 16, embed_dim = 384, depth = 12, num_heads = 8, cls_attn_layers = 2,
          num_classes = 0, in_chans = 3;
};

template <typename Block, typename CaBlock>
class ClassAttentionBackbone : public Backbone {
 public:
  Probe probe(torch::Tensor images, const ProbeRequest& request) override {
    auto [tokens, grid] = patch_embed(images);
    const auto [rows, cols] = grid;
    tokens = apply_token_mask(tokens, request.token_mask);
    const auto steps =
        class_attention_steps(blocks, cls_attn_blocks, norm, head, rows, cols, block_kind_.c_str());
    return probe_class_attention_model(tokens + pos_embeder(rows, cols), cls_token, request, steps);
  }

  const std::string& arch() const override { return shape_.name; }
  int64_t embed_dim() const override { return shape_.embed_dim; }
  int64_t patch_size() const override { return shape_.patch_size; }
  int64_t in_chans() const override { return shape_.in_chans; }
  std::string input_conv_weight() const override { return "patch_embed.proj.0.0.weight"; }
  int64_t num_heads() const override { return shape_.num_heads; }
  int64_t num_blocks() const override { return shape_.depth; }
  std::pair<int64_t, int64_t> token_grid(int64_t height, int64_t width) const override {
    return ConvPatchEmbedImpl::grid(height, width, shape_.patch_size);
  }
  Capabilities capabilities() const override { return capabilities_; }
  bool supports_token_mask() const override { return true; }

  torch::Tensor cls_token;
  ConvPatchEmbed patch_embed{nullptr};
  FourierPositionalEncoding pos_embeder{nullptr};
  std::vector<Block> blocks;
  std::vector<CaBlock> cls_attn_blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};  // null when num_classes == 0

 protected:
  // block_label names the main blocks in captions ("XCA") and errors ("XCA block");
  // unit_queries: see Capabilities.
  ClassAttentionBackbone(ClassAttentionShape shape, const std::string& block_label,
                         bool unit_queries)
      : shape_(std::move(shape)), block_kind_(block_label + " block") {
    capabilities_.class_attention_layers = shape_.cls_attn_layers;
    capabilities_.qk_norms = true;
    capabilities_.unit_queries = unit_queries;
    capabilities_.block_label = block_label;
  }

  // cls_token, then patch_embed: both families start so.
  void register_stem() {
    cls_token = register_parameter("cls_token", torch::zeros({1, 1, shape_.embed_dim}));
    patch_embed = register_module(
        "patch_embed", ConvPatchEmbed(shape_.patch_size, shape_.embed_dim, shape_.in_chans));
  }
  void register_positions() {
    pos_embeder = register_module("pos_embeder", FourierPositionalEncoding(shape_.embed_dim));
  }
  // `depth` blocks from make_block(), then cls_attn_layers from make_ca_block().
  void register_blocks(const std::function<Block()>& make_block,
                       const std::function<CaBlock()>& make_ca_block) {
    auto block_list = torch::nn::ModuleList();
    for (int64_t i = 0; i < shape_.depth; ++i) {
      blocks.push_back(make_block());
      block_list->push_back(blocks.back());
    }
    register_module("blocks", block_list);
    auto ca_list = torch::nn::ModuleList();
    for (int64_t i = 0; i < shape_.cls_attn_layers; ++i) {
      cls_attn_blocks.push_back(make_ca_block());
      ca_list->push_back(cls_attn_blocks.back());
    }
    register_module("cls_attn_blocks", ca_list);
  }
  void register_norm_and_head(torch::nn::LayerNorm final_norm) {
    norm = register_module("norm", std::move(final_norm));
    if (shape_.num_classes > 0)
      head = register_module("head", torch::nn::Linear(shape_.embed_dim, shape_.num_classes));
  }
  // The official initialisation, once everything is registered.
  void init_weights() {
    trunc_normal_(cls_token, 0.0, 0.02, -2.0, 2.0);
    init_linear_and_layernorm(*this);
  }

 private:
  ClassAttentionShape shape_;
  std::string block_kind_;
  Capabilities capabilities_;
};

}  // namespace xdino::models
