// `dino train`: DINO pretraining. Flags keep main_dino.py's names, meanings and defaults.
#include <iostream>

#include "core/check.h"
#include "launch/command.h"
#include "ssl/train_options.h"

namespace xdino::launch {
namespace {

class TrainCommand : public Command {
 public:
  void declare(Flags& f) override {
    ssl::TrainOptions& o = opt_;
    f.add("arch", &o.arch, "backbone: xcit_{nano,tiny,small,medium,large}_{12,24}_p{16,8}, "
                           "vit_{tiny,small,base}")
        .add("patch_size", &o.patch_size, "ViT patch size (XCiT takes it from --arch)")
        .add("out_dim", &o.out_dim, "dimensionality of the DINO head output")
        .add("norm_last_layer", &o.norm_last_layer,
             "weight-normalise the head's last layer with a fixed unit norm")
        .add("momentum_teacher", &o.momentum_teacher,
             "base EMA momentum of the teacher, raised to 1 by a cosine schedule")
        .add("use_bn_in_head", &o.use_bn_in_head, "BatchNorm in the projection head")
        .add("warmup_teacher_temp", &o.warmup_teacher_temp, "initial teacher temperature")
        .add("teacher_temp", &o.teacher_temp, "teacher temperature after the warmup")
        .add("warmup_teacher_temp_epochs", &o.warmup_teacher_temp_epochs,
             "epochs of linear teacher-temperature warmup")
        .add("use_fp16", &o.use_fp16, "mixed precision (fp16 + loss scaling) on CUDA")
        .add("weight_decay", &o.weight_decay, "initial weight decay")
        .add("weight_decay_end", &o.weight_decay_end, "final weight decay (cosine schedule)")
        .add("clip_grad", &o.clip_grad, "per-parameter gradient norm clip (0 disables)")
        .add("batch_size_per_gpu", &o.batch_size_per_gpu, "images per process and step")
        .add("epochs", &o.epochs, "training epochs")
        .add("freeze_last_layer", &o.freeze_last_layer,
             "epochs during which the head's last layer is not updated")
        .add("lr", &o.lr, "peak learning rate per 256 images (scaled by the total batch)")
        .add("warmup_epochs", &o.warmup_epochs, "epochs of linear learning-rate warmup")
        .add("min_lr", &o.min_lr, "final learning rate of the cosine schedule")
        .add("optimizer", &o.optimizer, "adamw, sgd or lars")
        .add("drop_path_rate", &o.drop_path_rate, "stochastic depth rate of the student")
        .add("global_crops_scale", &o.global_crops_scale,
             "area range of the global crops (RandomResizedCrop scale)")
        .add("local_crops_number", &o.local_crops_number, "number of local crops (0 disables)")
        .add("local_crops_scale", &o.local_crops_scale, "area range of the local crops")
        .add("global_crops_size", &o.global_crops_size, "side of the global crops in pixels")
        .add("local_crops_size", &o.local_crops_size, "side of the local crops in pixels")
        .add("data_path", &o.data_path, "training data (ImageFolder, IDX, HDF5 or flat folder)")
        .add("output_dir", &o.output_dir, "where logs and checkpoints go")
        .add("saveckp_freq", &o.saveckp_freq, "keep checkpointNNNN.pth every this many epochs")
        .add("seed", &o.seed, "random seed")
        .add("num_workers", &o.num_workers, "data loading threads per process")
        .add("dist_url", &o.dist_url, "rendezvous (env:// reads the launcher's variables)")
        .add("local_rank", &o.local_rank, "ignored; the rank comes from the environment");
  }

  int run(const Flags&) override {
    XDINO_FAIL("training is not implemented in this build yet (tracked in issue #5)");
  }

 private:
  ssl::TrainOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace xdino::launch
