// What the evaluation subcommands (features, knn, linear, copy_detection, retrieval,
// video_segmentation, visualize) share on the command-line side.
//
// Contract:
//  - declare_backbone_flags() binds the official model flags (--arch, --patch_size,
//    --pretrained_weights, --checkpoint_key) and our --image_size and --in_chans to a
//    BackboneSpec (the commands whose data pipeline reads grayscale: features, knn, linear);
//    declare_model_flags() binds the model flags and --seed, for the subcommands whose input
//    size is a flag of their own.
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
// The four model flags and --seed (random weights), without --image_size: for the tools whose
// input size is a flag of their own (copy detection, retrieval, video segmentation, visualize).
void declare_model_flags(Flags& flags, eval::BackboneSpec& spec);
// The official --use_cuda of eval_knn.py, eval_copy_detection.py and eval_image_retrieval.py:
// the features stay on the GPU for the search (a CPU run ignores it).
void declare_use_cuda_flag(Flags& flags, bool& use_cuda);
// --max_train_samples, --max_val_samples (ours): class-balanced subsets for quick runs.
void declare_subset_flags(Flags& flags, eval::EvalSubset& subset);

}  // namespace xdino::launch
