// Building backbones by name.
//
// Contract: create_backbone(arch, options) returns a freshly initialised model (official init,
// docs/architecture.md) or throws xdino::UsageError naming the unknown arch and listing the
// known ones. Names: xcit_{nano_12,tiny_12,small_12,tiny_24,small_24,medium_24,large_24}_p{16,8},
// xcit_{nano_12,tiny_12,nano_6,nano_4}_p4 (ours, small images),
// vit_{tiny,small,base} (patch from options.patch_size, as in DINO),
// xvit_{tiny,small,medium,base}[_p8] (models/xvit.h), torchvision's
// resnet{18,34,50,101,152}, wide_resnet{50,101}_2 and resnext50_32x4d, resnext101_{32x8d,64x4d}
// (models/resnet.h, fc removed), pixels. Every family takes options.in_chans (>= 1, else
// UsageError).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/layers.h"

namespace xdino::models {

// BackboneOptions::in_chans for "not given": create_backbone_for takes the count the weights'
// input conv has (else 3); create_backbone refuses it.
inline constexpr int64_t kInChansFromWeights = 0;

struct BackboneOptions {
  int64_t num_classes = 0;                           // 0: forward() returns the (B, C) feature
  double drop_path_rate = 0.0;                       // stochastic depth (student: 0.1 in DINO)
  int64_t patch_size = 16;                           // ViT only; XCiT names carry their patch size
  int64_t img_size = 224;                            // ViT position grid / pixels resize target
  XcaAttention xca_attention = XcaAttention::kAuto;  // XCiT only (models/backbone.h)
  LayerKernels layer_kernels = LayerKernels::kAuto;  // XCiT only (models/layers.h)
  // Channels of the input images (timm's and the official VisionTransformer's in_chans): the
  // input conv of XCiT/X-ViT (patch_embed.proj.0.0), ViT (patch_embed.proj) and ResNet
  // (conv1) takes this many; pixels' feature is in_chans * img_size^2 wide. Any count >= 1;
  // kInChansFromWeights only for create_backbone_for (models/weights.h).
  int64_t in_chans = 3;
};

std::shared_ptr<Backbone> create_backbone(const std::string& arch,
                                          const BackboneOptions& options = {});

// What a command checks before it opens any data: `arch` is a registered name (else the
// UsageError of create_backbone), and, when `needs_patch_tokens` names a protocol (e.g.
// "copy detection (eval_copy_detection.py: ViTs only)"), one whose patch_tokens() exists (not
// the ResNets): else one UsageError line naming both.
void check_arch(const std::string& arch, const char* needs_patch_tokens = nullptr);

std::vector<std::string> backbone_names();

// main_dino.py's own renaming: "we changed the name DeiT-S for ViT-S to avoid confusions", so
// deit_small is vit_small, deit_tiny vit_tiny; any other name is itself.
std::string training_arch_name(const std::string& arch);
// The state_dict key of the input conv a model of this name has (Backbone::input_conv_weight,
// without building it): "" for pixels and unknown names.
std::string input_conv_weight_of(const std::string& arch);
// The patch size a model of this name has: from the name for XCiT and X-ViT, `flag` for ViT
// (DINO's --patch_size), 32 (the output stride) for ResNets, 1 for pixels. Unknown names return
// `flag`.
int64_t patch_size_of(const std::string& arch, int64_t flag);
// The names, comma-separated, for help texts and error messages; `pixels` (no parameters,
// nothing to train) left out unless asked for.
std::string backbone_list(bool with_pixels = true);
// The model as the papers write it ("XCiT-S12/16", "X-ViT-T/16", "ViT-B/8" for vit_base with
// patch_flag 8, "Pixels"); an unknown name is returned as it is.
std::string paper_name(const std::string& arch, int64_t patch_flag);
// The --patch_size help of every command, from the names that take it from the flag.
std::string patch_size_help();

}  // namespace xdino::models
