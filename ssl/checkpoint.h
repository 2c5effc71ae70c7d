// DINO training checkpoints: the official main_dino.py layout plus what an exact resume needs.
//
// Layout of the dict (keys in this order; the first seven are main_dino.py's):
//   student       {"module.backbone.*", "module.head.*"} tensors (DDP state_dict)
//   teacher       same keys; "module." only when the model has BatchNorm (XCiT always does),
//                 because only then is the official teacher DDP-wrapped
//   optimizer     torch.optim state_dict: {"state": {i: {step, exp_avg, exp_avg_sq}},
//                 "param_groups": [{lr, betas, eps, weight_decay, amsgrad, params}, ...]}
//   epoch         the epoch to run next (epoch + 1 after a finished epoch; the current epoch
//                 when saved mid-epoch on a stop signal)
//   args          the run's options as a plain dict {name: value} (the official file holds a
//                 pickled argparse.Namespace; a dict loads anywhere without it)
//   dino_loss     {"center": [1, out_dim]}
//   ibot_patch_loss  {"center": [1, K]}, only with iBOT (ssl/ibot_loss.h)
//   fp16_scaler   {scale, growth_factor, backoff_factor, growth_interval, _growth_tracker},
//                 only when loss scaling is on
//   xdino_resume  ours: ssl/training_state.h's TrainingState: {iteration (global index of
//                 the next step), iterations_per_epoch, world_size, rng_cpu: [uint8 state per
//                 rank], rng_cuda: [...] (CUDA runs), epoch_stats: partial sums of the
//                 interrupted epoch, rank_epoch_stats: [float64 sums and count per rank]}
// All tensors are on the CPU.
//
// Contract:
//  - make_checkpoint(...) builds that dict from live objects (tensors are not copied when
//    already on the CPU: save it before the next step).
//  - args carry the DINOv2 options that differ from their defaults (ssl/recipe.h); restoring
//    with parts.recipe set first refuses, in one UsageError line, a checkpoint whose args ask
//    for another recipe, before anything is loaded.
//  - restore_checkpoint(...) loads student and teacher non-strictly (missing/unexpected keys
//    are reported on the log, shape mismatches throw xdino::Error naming the key), the
//    optimiser (a mismatch is reported and leaves a fresh optimiser, as main_dino.py does),
//    the scaler and center when present, and returns where to continue. Official checkpoints
//    (no xdino_resume) resume at the start of `epoch` with exact = false.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include <vector>

#include "core/ivalue.h"
#include "ssl/dino_options.h"
#include "ssl/loss.h"
#include "ssl/metrics.h"
#include "ssl/training_state.h"
#include "train/grad_scaler.h"
#include "train/optim.h"

namespace xdino::ssl {

struct CheckpointParts {
  torch::nn::Module* student = nullptr;
  torch::nn::Module* teacher = nullptr;
  bool teacher_ddp_prefix = true;
  train::Optimizer* optimizer = nullptr;
  DINOLossImpl* loss = nullptr;
  torch::nn::Module* ibot_loss = nullptr;  // null without iBOT
  train::GradScaler* scaler = nullptr;     // null when loss scaling is off
  const RecipeOptions* recipe = nullptr;   // what a restored checkpoint must have been run with
};

c10::IValue make_checkpoint(const CheckpointParts& parts, const DinoOptions& options,
                            const TrainingState& where);

TrainingState restore_checkpoint(const c10::IValue& checkpoint, const CheckpointParts& parts,
                                 const std::string& source);

// DinoOptions as {flag name: value} (the checkpoint's `args`).
IDict options_dict(const DinoOptions& o);

}  // namespace xdino::ssl
