// The flags the evaluation subcommands (features, knn, linear, copy_detection, retrieval,
// video_segmentation, visualize, export) share, each bound to the library's option struct it fills.
//
// Contract:
//  - declare_model_flags() binds the official model flags (--arch, --patch_size,
//    --pretrained_weights, --checkpoint_key) and --seed (random weights) to a BackboneSpec;
//    declare_weights_flags() the four alone (dino linear, whose --seed is its shuffle's;
//    dino export, whose empty --arch means the checkpoint's: `arch_note` says so in --help).
//  - declare_image_input_flags() binds how the images are read (--batch_size_per_gpu,
//    --num_workers, --image_size, --in_chans, --mean, --std) to an eval::ImageInput (features,
//    knn, linear); a new input option is one field there and one flag here.
//  - declare_use_cuda_flag(), declare_subset_flags(): eval_knn.py's --use_cuda, our
//    class-balanced subsets.
//  Sessions (processes, device, config.ini) are launch/session.h's, shared with `dino train`.
#pragma once

#include "eval/extract.h"
#include "eval/frozen_backbone.h"
#include "eval/image_input.h"
#include "launch/flags.h"
#include "launch/session.h"

namespace xdino::launch {

void declare_model_flags(Flags& flags, eval::BackboneSpec& spec);
void declare_weights_flags(Flags& flags, eval::BackboneSpec& spec,
                           const std::string& arch_note = "");
void declare_image_input_flags(Flags& flags, eval::ImageInput& input);
void declare_use_cuda_flag(Flags& flags, bool& use_cuda);
void declare_subset_flags(Flags& flags, eval::EvalSubset& subset);

}  // namespace xdino::launch
