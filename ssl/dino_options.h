// Options of DINO pretraining (`dino train`), with the defaults of the official main_dino.py.
//
// Contract: a plain value type; the library reads it, launch/ binds command-line flags to its
// fields (the member initialisers below, CropSizes', DINOHeadOptions' and DINOLossOptions' are
// the defaults users see in `dino train --help`; each is written once).
// Flag names follow main_dino.py exactly, and so do the fields here; the head's and the loss's
// fields keep their own names (head.use_bn is --use_bn_in_head, head.hidden_dim
// --head_hidden_dim, head.bottleneck_dim --head_bottleneck_dim). Fields marked "ours" have no
// official counterpart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/crop_sizes.h"
#include "ssl/head.h"
#include "ssl/loss.h"
#include "ssl/recipe.h"
#include "train/update_path.h"

namespace xdino::ssl {

struct DinoOptions : CropSizes {
  // Model.
  std::string arch = "vit_small";
  int64_t patch_size = 16;  // ViT only; XCiT carries the patch size in its name
  // ours (timm's in_chans): channels of the images, 3 (RGB), 1 (grayscale: the data pipeline
  // converts to L, augment/ops/tensor.h) or any other count (the float pipeline,
  // augment/ops/float_image.h). Recorded in the checkpoint's args.
  int64_t in_chans = 3;
  // ours (timm's --mean/--std): the normalisation, one value or in_chans each; empty: ImageNet's
  // (3 channels) or its average (1). Required for other channel counts. In the checkpoint's args.
  std::vector<double> mean, std;
  // The DINO head: out_dim, norm_last_layer, use_bn and (ours: main_dino.py fixes them)
  // hidden_dim, bottleneck_dim. in_dim and nlayers are not options: the trainer sets in_dim to
  // the backbone's width, nlayers keeps main_dino.py's 3.
  DINOHeadOptions head;
  double momentum_teacher = 0.996;
  // ours (the evaluation scripts' names): continued pretraining. Student and teacher start
  // from these weights (ssl/warm_start.h); empty: random initialisation. A checkpoint.pth in
  // output_dir to resume from takes precedence.
  std::string pretrained_weights;
  std::string checkpoint_key = "teacher";

  // The loss's own settings; its out_dim, ncrops and epochs are the run's (head.out_dim,
  // local_crops_number + 2 and `epochs` below, which the schedules read too).
  DINOLossSettings loss;
  // ours (dinov2's config keys): KoLeo, Sinkhorn-Knopp centering, iBOT; all off by default.
  RecipeOptions recipe;

  // Optimisation.
  bool use_fp16 = true;            // official: fp16 autocast + loss scaling (CUDA only here)
  std::string precision = "auto";  // ours: auto|fp32|bf16|fp16, see train/precision.h
  std::string device = "auto";     // ours: auto|cpu|cuda|cuda:N
  double weight_decay = 0.04;
  double weight_decay_end = 0.4;
  double clip_grad = 3.0;
  int64_t batch_size_per_gpu = 64;
  // ours (MAE's name): micro-batches of batch_size_per_gpu per optimiser step. One step, one
  // EMA update and one center update per accum_iter micro-batches; the lr scales with the
  // effective batch batch_size_per_gpu * accum_iter * processes (docs/dino.md, "Gradient
  // accumulation").
  int64_t accum_iter = 1;
  int64_t epochs = 100;
  int64_t freeze_last_layer = 1;
  double lr = 0.0005;
  int64_t warmup_epochs = 10;
  double min_lr = 1e-6;
  std::string optimizer = "adamw";
  double drop_path_rate = 0.1;
  // ours, no flag: how optimiser, clipping, unscale and EMA walk the parameters (tests run the
  // reference kPerTensor beside the default).
  train::UpdatePath update_path = train::UpdatePath::kAuto;
  // ours: after a few eager steps, each step's forward, loss and backward replay as one CUDA
  // graph (train/cuda_graph.h; docs/dino.md, "The step as a CUDA graph"). One process per
  // GPU, one micro-batch per step, no iBOT.
  bool cuda_graph = false;

  // Multi-crop: global_crops_scale, local_crops_number, local_crops_scale and (ours)
  // global_crops_size, local_crops_size come from CropSizes (core/crop_sizes.h), with their
  // defaults. ours: GaussianBlur's sigma range in pixels, hard-coded in main_dino.py (default
  // in core/crop_sizes.h); it is meant for 224-pixel crops, so small crops need it scaled down.
  std::vector<double> blur_sigma = {kBlurSigmaMin, kBlurSigmaMax};

  // Run.
  std::string data_path = "/path/to/imagenet/train/";
  int64_t max_samples = 0;  // ours: train on a class-balanced subset of this many images (0: all)
  std::string output_dir = ".";
  int64_t saveckp_freq = 20;
  // ours: also replace checkpoint.pth mid-epoch once this many minutes have passed since the
  // last save (0: only at the end of each epoch), so a lost process costs at most that much
  // work (docs/dino.md, "Timed checkpoints").
  double saveckp_minutes = 30;
  int64_t seed = 0;
  int64_t num_workers = 10;
  // ours: data-parallel replicas of the step inside this process, each on 1/replicas of
  // batch_size_per_gpu (docs/dino.md, "Replicas"); CPU only. 0: `dino train` picks one per
  // core of this process (launch/session.h), the library takes 0 as 1.
  int64_t replicas = 0;
};

}  // namespace xdino::ssl
