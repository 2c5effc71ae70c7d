#include "launch/train_flags.h"

#include "augment/data/open_dataset.h"
#include "models/registry.h"

namespace xdino::launch {

void declare_dino_model_flags(Flags& f, ssl::DinoOptions& o) {
  f.group("Model parameters");
  f.add("arch", &o.arch, "backbone: " + models::backbone_list(/*with_pixels=*/false))
      .add("patch_size", &o.patch_size, models::patch_size_help())
      .add("in_chans", &o.in_chans,
           "channels of the images: 3 (RGB), 1 (grayscale, each image converted to L as "
           "Pillow's convert(\"L\") does) or any other (multispectral TIFF/PNG: the float "
           "pipeline, which also reads 16-bit images at full depth); timm's in_chans, which "
           "main_dino.py lacks. 3-channel --pretrained_weights are adapted as timm's "
           "adapt_input_conv does")
      .add("mean", &o.mean,
           "normalisation mean per channel, on the [0, 1] scale (one value or --in_chans; "
           "timm's --mean); default ImageNet's, needed for other than 1 or 3 channels")
      .add("std", &o.std, "normalisation std per channel, as --mean")
      .add("out_dim", &o.head.out_dim, "dimensionality of the DINO head output")
      .add("norm_last_layer", &o.head.norm_last_layer,
           "weight-normalise the head's last layer with a fixed unit norm")
      .add("pretrained_weights", &o.pretrained_weights,
           "start student and teacher from these weights (continued pretraining; a DINO "
           "checkpoint's head too); empty: random init. A checkpoint.pth in --output_dir wins")
      .add("checkpoint_key", &o.checkpoint_key,
           "key of --pretrained_weights to take (teacher, student; a flat file is taken whole)")
      .add("momentum_teacher", &o.momentum_teacher,
           "base EMA momentum of the teacher, raised to 1 by a cosine schedule")
      .add("use_bn_in_head", &o.head.use_bn, "BatchNorm in the projection head")
      .add("head_hidden_dim", &o.head.hidden_dim,
           "width of the head's hidden layers (main_dino.py: 2048; smaller for CPU runs)")
      .add("head_bottleneck_dim", &o.head.bottleneck_dim,
           "width of the head's L2-normalised bottleneck (main_dino.py: 256)");
}

void declare_teacher_temp_flags(Flags& f, ssl::DINOLossSettings& loss) {
  f.group("Temperature teacher parameters");
  f.add("warmup_teacher_temp", &loss.warmup_teacher_temp, "initial teacher temperature")
      .add("teacher_temp", &loss.teacher_temp, "teacher temperature after the warmup")
      .add("warmup_teacher_temp_epochs", &loss.warmup_teacher_temp_epochs,
           "epochs of linear teacher-temperature warmup");
}

void declare_optimization_flags(Flags& f, ssl::DinoOptions& o) {
  f.group("Training/Optimization parameters");
  f.add("use_fp16", &o.use_fp16,
        "mixed precision on CUDA: fp16 autocast + dynamic loss scaling (ignored on CPU)")
      .add("precision", &o.precision,
           "auto (use_fp16 decides on CUDA, fp32 on CPU), fp32, bf16 (autocast, no loss "
           "scaling; CPU or CUDA) or fp16 (CUDA); overrides use_fp16 unless auto")
      .add("device", &o.device, "auto (this process's GPU if any, else the CPU), cpu, cuda:N")
      .add("weight_decay", &o.weight_decay, "initial weight decay")
      .add("weight_decay_end", &o.weight_decay_end, "final weight decay (cosine schedule)")
      .add("clip_grad", &o.clip_grad, "per-parameter gradient norm clip (0 disables)")
      .add("batch_size_per_gpu", &o.batch_size_per_gpu, "images per process and micro-batch")
      .add("accum_iter", &o.accum_iter,
           "micro-batches per optimiser, EMA and center step (gradient accumulation: an "
           "effective batch of batch_size_per_gpu * accum_iter per process)")
      .add("epochs", &o.epochs, "training epochs")
      .add("freeze_last_layer", &o.freeze_last_layer,
           "epochs during which the head's last layer is not updated")
      .add("lr", &o.lr, "peak learning rate per 256 images (scaled by the total batch)")
      .add("warmup_epochs", &o.warmup_epochs, "epochs of linear learning-rate warmup")
      .add("min_lr", &o.min_lr, "final learning rate of the cosine schedule")
      .add("optimizer", &o.optimizer, "adamw, sgd or lars")
      .add("drop_path_rate", &o.drop_path_rate, "stochastic depth rate of the student");
}

void declare_crop_flags(Flags& f, CropSizes& c) {
  f.add("global_crops_scale", &c.global_crops_scale,
        "area range of the global crops (RandomResizedCrop scale)")
      .add("local_crops_number", &c.local_crops_number, "number of local crops (0 disables)")
      .add("local_crops_scale", &c.local_crops_scale, "area range of the local crops")
      .add("global_crops_size", &c.global_crops_size, "side of the global crops in pixels")
      .add("local_crops_size", &c.local_crops_size, "side of the local crops in pixels");
}

void declare_multi_crop_flags(Flags& f, ssl::DinoOptions& o) {
  f.group("Multi-crop parameters");
  declare_crop_flags(f, o);
  f.add("blur_sigma", &o.blur_sigma,
        "Gaussian blur sigma range in pixels (main_dino.py: 0.1 2.0, for 224-pixel crops; "
        "scale it with the crop size)");
}

void declare_run_flags(Flags& f, ssl::DinoOptions& o) {
  f.group("Misc");
  f.add("data_path", &o.data_path, "training data: " + augment::dataset_layouts())
      .add("max_samples", &o.max_samples,
           "train on a class-balanced subset of this many images (0: all)")
      .add("output_dir", &o.output_dir,
           "where logs and checkpoints go; rerunning with a checkpoint.pth there resumes")
      .add("saveckp_freq", &o.saveckp_freq, "keep checkpointNNNN.pth every this many epochs")
      .add("saveckp_minutes", &o.saveckp_minutes,
           "also save checkpoint.pth mid-epoch every this many minutes, for an exact resume "
           "after a crash (0: at the end of each epoch only)")
      .add("seed", &o.seed, "random seed")
      .add("num_workers", &o.num_workers, "data loading threads per process")
      .add("replicas", &o.replicas,
           "CPU: split each process's batch over this many threads that share the networks "
           "(the same step, computed on that many cores at once; 0: one per core)")
      .add("cuda_graph", &o.cuda_graph,
           "CUDA, one process: replay each step's forward and backward as one CUDA graph "
           "after 3 eager steps (one launch instead of a thousand; --accum_iter 1, no iBOT)");
}

void declare_monitor_flags(Flags& f, MonitorOptions& m) {
  f.group("Watching the run learn (ours)");
  f.add("knn_every", &m.knn_every,
        "online k-NN of the teacher every this many epochs and after the last (0: off); "
        "log.txt gets knn_top1, curves.png the curve")
      .add("knn_train_samples", &m.knn_train_samples,
           "online k-NN: class-balanced training images in its bank")
      .add("knn_val_samples", &m.knn_val_samples,
           "online k-NN: class-balanced val images it classifies")
      .add("knn_data_path", &m.knn_data_path,
           "online k-NN: labelled data with train and val splits (default: --data_path)")
      .add("tensorboard", &m.tensorboard,
           "write TensorBoard event files beside log.txt (train/ every 10 iterations, epoch/ "
           "and knn/ per epoch; tensorboard --logdir)");
}

void declare_recipe_flags(Flags& f, ssl::RecipeOptions& r) {
  f.group("DINOv2's additions (ours, under dinov2's config names; off by default)");
  f.add("koleo_loss_weight", &r.koleo_loss_weight,
        "weight of the KoLeo regulariser on the student's class tokens, per global view "
        "(dinov2: 0.1; 0: off)")
      .add("centering", &r.centering,
           "how the teacher's outputs become targets: centering (DINO's running centre) or "
           "sinkhorn_knopp (3 iterations over every process's batch), for DINO and iBOT both")
      .add("ibot_loss_weight", &r.ibot_loss_weight,
           "weight of iBOT's masked-patch loss (dinov2: 1.0; 0: off); needs patch tokens "
           "(xcit_*, xvit_*, vit_*)")
      .add("mask_ratio_min_max", &r.mask_ratio_min_max,
           "iBOT: range of the share of patches masked in a masked image")
      .add("mask_sample_probability", &r.mask_sample_probability,
           "iBOT: share of the global crops that get a mask (a fixed count per batch)")
      .add("ibot_separate_head", &r.ibot_separate_head,
           "iBOT: its own projection head instead of the DINO head")
      .add("ibot_out_dim", &r.ibot_out_dim, "iBOT: outputs of the separate head (0: --out_dim)");
}

void declare_train_flags(Flags& f, ssl::DinoOptions& o, MonitorOptions& m) {
  declare_dino_model_flags(f, o);
  declare_teacher_temp_flags(f, o.loss);
  declare_optimization_flags(f, o);
  declare_multi_crop_flags(f, o);
  declare_run_flags(f, o);
  declare_monitor_flags(f, m);
  declare_recipe_flags(f, o.recipe);
}

}  // namespace xdino::launch
