// XCiT (Cross-Covariance Image Transformer), checkpoint-compatible with facebookresearch/xcit
// (docs/architecture.md, "XCiT"). The 14 official variants come from xcit_variants(), our patch-4
// ones from xcit_small_image_variants(); any other XCiTConfig works too (tests build tiny ones).
//
// Contract:
//  - Construction initialises the weights as the official code does (docs/architecture.md, "XCiT").
//  - Modules, parameters and buffers carry the official names in the official state_dict
//    order: cls_token, patch_embed.proj.{0,2,4[,6]}.{0,1}.* (proj.0.0 takes in_chans channels),
//    blocks.i.*, cls_attn_blocks.j.*, norm.*, [head.* when num_classes > 0],
//    pos_embeder.token_projection.*.
//  - probe()/forward(): see models/backbone.h. CLS token appended after the XCA blocks, never
//    given a position encoding; forward returns norm(CLS) after the class-attention blocks
//    (then head when num_classes > 0).
//  - xcit_flops(config, H, W): FLOPs of one eval-mode forward in fvcore's convention (one
//    multiply-add = 1; LayerNorm 5, eval BatchNorm 2 per element), as the XCiT paper's tables
//    count them (tests/models/test_xcit_model.cpp holds the published figures).
//  - Bad configurations (patch not 4/8/16, C not divisible by heads or 8) throw UsageError.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/class_attention_backbone.h"
#include "models/xcit_layers.h"

namespace xdino::models {

struct XCiTConfig {
  std::string name = "xcit";
  std::string paper_name = "XCiT";  // as the papers write it: "XCiT-S12/16"
  int64_t patch_size = 16;
  int64_t embed_dim = 384;
  int64_t depth = 12;
  int64_t num_heads = 8;
  double eta = 1.0;         // layer-scale init of every gamma
  bool tokens_norm = true;  // class-attention norm2 on all tokens (false: CLS only, nano)
  int64_t cls_attn_layers = 2;
  int64_t num_classes = 0;      // 0: no head, forward returns the (B, C) feature
  double drop_path_rate = 0.0;  // constant over the XCA blocks
  int64_t in_chans = 3;         // channels of the input images (the stem's first conv)
  XcaAttention xca_attention = XcaAttention::kAuto;  // how XCA computes (models/backbone.h)
  LayerKernels layer_kernels = LayerKernels::kAuto;  // their normalisations (models/layers.h)
};

// xcit_{nano_12,tiny_12,small_12,tiny_24,small_24,medium_24,large_24}_p{16,8}.
const std::vector<XCiTConfig>& xcit_variants();
// Ours, not in the official family: xcit_{nano_12,tiny_12,nano_6,nano_4}_p4 for 28-32 px
// images (Fashion-MNIST, CIFAR): 2 stem units, so a 28 px image is a 7x7 token grid.
const std::vector<XCiTConfig>& xcit_small_image_variants();
std::optional<XCiTConfig> find_xcit_variant(const std::string& name);

double xcit_flops(const XCiTConfig& config, int64_t height, int64_t width);

class XCiT : public ClassAttentionBackbone<XCABlock, ClassAttentionBlock> {
 public:
  explicit XCiT(XCiTConfig config);

  double flops(int64_t height, int64_t width) const override;
  const XCiTConfig& config() const { return config_; }

 private:
  XCiTConfig config_;
};

}  // namespace xdino::models
