// The flags of `dino train`, declared in groups as marian's addOptions* functions do: one
// function per group, each binding its flags to one part of ssl::DinoOptions (or the
// monitor's options). The groups are main_dino.py's argparse groups with ours beside them,
// declared in main_dino.py's order, so config.ini lists the flags as it always did (a
// pipeline's done-marker compares config.ini; docs/architecture.md, "Follow one run"), and
// `dino train --help` shows each group under main_dino.py's title (Flags::group).
//
// Contract:
//  - declare_*_flags(flags, fields) adds the group's flags to `flags`; each field's current
//    value is its default (launch/flags.h), so the defaults stay in the option structs.
//    Nothing here checks a value: what reads a field checks it (ssl::Trainer, the
//    augmentation, launch/train_data.h, launch/learning_monitor.h).
//  - declare_crop_flags is the one declaration of the five crop flags (global_crops_scale,
//    local_crops_number, local_crops_scale, global_crops_size, local_crops_size), shared by
//    `dino train` and `dino preview`: both bind it to a CropSizes (core/crop_sizes.h).
//  - declare_train_flags declares every group of `dino train` in order (not the dist flags,
//    launch/dist_flags.h).
#pragma once

#include "core/crop_sizes.h"
#include "launch/flags.h"
#include "launch/learning_monitor.h"
#include "ssl/dino_options.h"
#include "ssl/loss.h"

namespace xdino::launch {

// main_dino.py's "Model parameters": --arch, --patch_size, the DINO head (DINOHeadOptions:
// --out_dim, --norm_last_layer, --use_bn_in_head, ours --head_hidden_dim and
// --head_bottleneck_dim) and --momentum_teacher, the base of the teacher's EMA schedule.
void declare_dino_model_flags(Flags& flags, ssl::DinoOptions& o);
// main_dino.py's "Temperature teacher parameters": the loss's settings (DINOLossSettings).
void declare_teacher_temp_flags(Flags& flags, ssl::DINOLossSettings& loss);
// main_dino.py's "Training/Optimization parameters" (ours: --precision, --device): precision,
// optimiser, the lr and weight-decay schedules, clipping, batch size, epochs, drop path.
void declare_optimization_flags(Flags& flags, ssl::DinoOptions& o);
// The crops (CropSizes): shared with `dino preview`.
void declare_crop_flags(Flags& flags, CropSizes& crops);
// main_dino.py's "Multi-crop parameters": the crops and (ours) --blur_sigma.
void declare_multi_crop_flags(Flags& flags, ssl::DinoOptions& o);
// main_dino.py's "Misc" (ours: --max_samples, --replicas): data, output, checkpoints, seed,
// loader threads, replicas.
void declare_run_flags(Flags& flags, ssl::DinoOptions& o);
// Ours: the learning monitor (launch/learning_monitor.h).
void declare_monitor_flags(Flags& flags, MonitorOptions& m);
// Ours, under dinov2's config names: KoLeo, Sinkhorn-Knopp centering, iBOT (ssl/recipe.h).
// Last, so that config.ini lists the older flags as it always did.
void declare_recipe_flags(Flags& flags, ssl::RecipeOptions& r);

void declare_train_flags(Flags& flags, ssl::DinoOptions& o, MonitorOptions& m);

}  // namespace xdino::launch
