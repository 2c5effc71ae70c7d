// Our backbones as timm names and lays them out (`dino export --format timm`, and timm's own
// files given to --pretrained_weights).
//
// Contract:
//  - timm_twin(arch, patch_size): timm's model name and the create_model keyword arguments
//    that make our architecture (`arch` as the registry names it; patch_size the ViTs' flag):
//      xcit_<size>_<depth>_p16/p8  xcit_<size>_<depth>_p16/p8_224
//      vit_tiny/small/base         vit_<size>_patch16_224, or _patch8_224 where timm has it
//                                  (vit_tiny with patch 8: vit_tiny_patch16_224, patch_size 8)
//      resnet*, resnext*, wide_*   timm's name, the same
//    and nullopt for what timm cannot build, with `why` saying so: the small-image XCiTs
//    (xcit_*_p4: timm's XCiT embeds patches of 16 or 8 only), X-ViT (ours, no timm family)
//    and pixels (no weights).
//  - to_timm_layout(state, arch): our (the official) state-dict names as timm's model of that
//    family holds them. Only XCiT differs, as timm's checkpoint_filter_fn describes it:
//    pos_embeder.* is pos_embed.*, and each class-attention block's qkv is split into q, k
//    and v (rows [0, C), [C, 2C), [2C, 3C) of the weight and bias). Every other family, and
//    every other key, is the same.
//  - from_timm_layout(state): the reverse, for a file in timm's layout (any family; a state
//    in the official layout comes back unchanged). Tensors are not copied but concatenated
//    where q, k and v meet. A file with q but not k and v throws xdino::UsageError naming the
//    key.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "core/json.h"
#include "models/state_dict.h"

namespace xdino::models {

struct TimmTwin {
  std::string architecture;          // timm's model name
  Json model_args = Json::object();  // create_model keyword arguments beyond timm's defaults
};

std::optional<TimmTwin> timm_twin(const std::string& arch, int64_t patch_size, std::string* why);

StateDict to_timm_layout(const StateDict& state, const std::string& arch);
StateDict from_timm_layout(const StateDict& state);

}  // namespace xdino::models
