// `dino export`: a trained backbone out of this project, as a folder that timm and the Hugging
// Face hub load (`timm.create_model("local-dir:DIR", pretrained=True)`), or as safetensors in
// our own (the official) layout. docs/checkpoints.md, "Weights out and in".
//
// Contract:
//  - The weights are read as every command reads --pretrained_weights (models::read_pretrained:
//    a training checkpoint's --checkpoint_key, or a flat .pth or .safetensors file), into the
//    architecture `arch` (default: the checkpoint's args), built for them
//    (models::create_backbone_for) and loaded strictly: a file that does not fill the model is
//    one line, exit 1. The DINO head is left out unless with_head.
//  - format "timm": DIR/model.safetensors in timm's layout for timm's twin of the architecture
//    (models/timm_names.h; one without a twin is one UsageError line saying why, and that
//    --format safetensors works), DIR/config.json (timm's: architecture, num_classes 0,
//    num_features, global_pool, model_args with in_chans and img_size, pretrained_cfg with
//    input_size, mean, std, interpolation bicubic, crop_pct 0.875 as DINO's evaluations crop,
//    first_conv, classifier), DIR/README.md (a model card: how to load it, the evaluation table
//    of `runs` as `dino report` renders it, with the training curves it links copied in as
//    curves.png (curves_1.png, ... for other runs), the training flags the checkpoint
//    records), and with with_head DIR/dino_head.safetensors (timm's model has no DINO head to
//    load it into).
//  - format "safetensors": DIR/model.safetensors in the official layout (what
//    --pretrained_weights reads back), with arch, patch_size, in_chans, mean and std in its
//    metadata; README.md as above.
//  - image_size 0: the checkpoint's --global_crops_size, else 224; a ViT's is its position
//    table's; otherwise 1 to 65536. in_chans, mean and std come from the checkpoint's args, or
//    a safetensors file's metadata (an export exports again): ImageNet's, or their average
//    for 1 channel, when it has none; any channel count (the loaders' limit of 4 channels is
//    not the exporter's), but one without a default needs the recorded mean and std.
//  - Written safely: into a temporary folder beside DIR, renamed into place at the end. DIR is
//    --output without a trailing '/'. An existing DIR is a UsageError unless force; with
//    force it is replaced whole, never mixed with the new files, and only if it is a folder
//    that an export wrote: export files alone (model.safetensors, config.json, README.md,
//    dino_head.safetensors, curves*.png) with this project's model card. Any other folder
//    (a run folder holding the very checkpoint, say) is one UsageError line naming what it
//    holds, and stays as it is. A curves.png that is a link is not copied (a warning says so).
//    Returns one line for the log saying what was written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/frozen_backbone.h"

namespace xdino::eval {

struct ExportOptions {
  ExportOptions() { model.arch = ""; }  // "": the checkpoint's (its args, or the file's metadata)
  BackboneSpec model;  // what to export: the weights, their key, the architecture (seed unused)
  std::string format = "timm";  // timm | safetensors
  std::string output;
  bool force = false;
  bool with_head = false;
  int64_t image_size = 0;
  std::vector<std::string> runs;  // evaluation run folders for the model card (dino report's)
};

std::string export_weights(const ExportOptions& options);

}  // namespace xdino::eval
