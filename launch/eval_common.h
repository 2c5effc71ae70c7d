// What the evaluation subcommands (features, knn, linear) share on the command-line side.
//
// Contract:
//  - declare_backbone_flags() binds the official model flags (--arch, --patch_size,
//    --pretrained_weights, --checkpoint_key) and our --image_size to a BackboneSpec; the
//    overload of four fields binds the model flags alone (`dino visualize`, whose
//    --image_size is an H W resize).
//  Sessions (processes, device, config.ini) are launch/session.h's, shared with `dino train`.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "eval/extract.h"
#include "eval/frozen_backbone.h"
#include "launch/flags.h"
#include "launch/session.h"

namespace xdino::launch {

void declare_backbone_flags(Flags& flags, eval::BackboneSpec& spec);
void declare_backbone_flags(Flags& flags, std::string& arch, int64_t& patch_size,
                            std::string& pretrained_weights, std::string& checkpoint_key);
// The four model flags and --seed (random weights), without --image_size: for the tools whose
// input size is a flag of their own (copy detection, retrieval, video segmentation).
void declare_model_flags(Flags& flags, eval::BackboneSpec& spec);
// --max_train_samples, --max_val_samples (ours): class-balanced subsets for quick runs.
void declare_subset_flags(Flags& flags, eval::EvalSubset& subset);

}  // namespace xdino::launch
