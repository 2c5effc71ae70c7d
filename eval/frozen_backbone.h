// The model under evaluation: built by name, weights loaded as eval_knn.py / eval_linear.py
// load them, frozen.
//
// Contract:
//  - BackboneSpec names the model the way the official scripts' flags do (--arch,
//    --patch_size, --pretrained_weights, --checkpoint_key) plus the seed of random weights;
//    how the model reads images (size, channels, normalisation) is the ImageInput's
//    (eval/image_input.h).
//  - load_frozen_backbone(spec, input, device): create_backbone(arch, num_classes 0, drop path
//    0, input.image_size for pixels, input.in_chans) on `device`,
//    in eval mode (BatchNorm running statistics, no drop path), every parameter with
//    requires_grad false. With pretrained_weights: models::load_pretrained(..., strict=false),
//    as the official loader (prefixes module./backbone. removed, DINO head ignored), logging
//    what was loaded and what was missing. Without: random initial weights, said loudly (the
//    official scripts would download reference weights; this build never downloads). The
//    global torch generator is seeded with spec.seed first, so random weights are the same in
//    every process of a run and in every run. The pixels baseline has no weights to load.
//    A missing weights file is a UsageError. The model is built for its weights
//    (models::create_backbone_for: a ViT takes the checkpoint's position table, and with
//    in_chans kInChansFromWeights the channel count of its input conv; random weights: 3).
//    A model of other than 3 channels is logged in one line ("vit_small reads 1-channel
//    images"); `rgb_only` names a protocol whose data pipeline is RGB only (copy detection,
//    retrieval, video segmentation, visualize): such a model is then one UsageError line.
//    Returns the model and `input` for it (ImageInput::for_model: its channel count, and the
//    weights file's mean and std where no flag gave them and the count has no default).
//  - add_model_fields() records the model in a result JSON (knn.json, linear.json):
//    arch, patch_size (the model's: XCiT/X-ViT names carry it, models::patch_size_of), image_size
//    (the evaluation's),
//    pretrained_weights, checkpoint_key, weights
//    ("pretrained" | "random" | "none"); set_model_attributes() the same in a feature file.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "augment/ops/tensor.h"
#include "core/json.h"
#include "eval/features_io.h"
#include "eval/image_input.h"
#include "models/backbone.h"
#include "models/registry.h"
#include "models/weights.h"

namespace xdino::eval {

struct BackboneSpec {
  std::string arch = "vit_small";
  int64_t patch_size = 16;
  std::string pretrained_weights;  // "" = random weights
  std::string checkpoint_key = "teacher";
  int64_t seed = 0;  // ours: the random initial weights when no weights are given
};

// The model as the official evaluation scripts build it: num_classes 0, no drop path, ViT
// position grid of 224 (checkpoints hold it; other resolutions interpolate), pixels resized to
// image_size.
models::BackboneOptions eval_backbone_options(const std::string& arch, int64_t patch_size,
                                              int64_t image_size);

struct FrozenBackbone {
  std::shared_ptr<models::Backbone> model;
  ImageInput input;  // the evaluation's input, for this model
};

FrozenBackbone load_frozen_backbone(const BackboneSpec& spec, const ImageInput& input,
                                    torch::Device device, const char* rgb_only = nullptr);

// "pretrained", "random" (no weights given) or "none" (pixels: nothing to learn).
std::string weights_kind(const BackboneSpec& spec);

void add_model_fields(Json& json, const BackboneSpec& spec, int64_t image_size);

// The model fields of a feature file (features_io.h): arch, checkpoint, checkpoint_key, the
// model's patch size; `split` names the set ("val", "queries", ...).
void set_model_attributes(FeatureAttributes& attributes, const BackboneSpec& spec,
                          const std::string& split);

}  // namespace xdino::eval
