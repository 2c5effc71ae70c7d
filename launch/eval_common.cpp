#include "launch/eval_common.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/blas.h"
#include "core/log.h"
#include "launch/rendezvous.h"
#include "ssl/distributed.h"

namespace xdino::launch {

void declare_backbone_flags(Flags& f, eval::BackboneSpec& s) {
  f.add("arch", &s.arch,
        "backbone: xcit_{nano,tiny,small,medium,large}_{12,24}_p{16,8}, vit_{tiny,small,base}, "
        "pixels")
      .add("patch_size", &s.patch_size, "ViT patch size (XCiT takes it from --arch)")
      .add("pretrained_weights", &s.pretrained_weights,
           "checkpoint to evaluate (ours or official); empty: random weights (the official "
           "scripts would download reference weights; this build never downloads)")
      .add("checkpoint_key", &s.checkpoint_key,
           "key of the state dict inside the checkpoint (teacher, student)")
      .add("image_size", &s.image_size,
           "evaluation resolution: CenterCrop size, the resize is image_size*256/224");
}

void declare_subset_flags(Flags& f, eval::EvalSubset& s) {
  f.add("max_train_samples", &s.max_train_samples,
        "use a class-balanced subset of this many training images (0: all; quick runs only)")
      .add("max_val_samples", &s.max_val_samples,
           "use a class-balanced subset of this many validation images (0: all)");
}

EvalSession start_session(const DistOptions& options) {
  const ssl::DistConfig config = dist_config_from_env(options);
  EvalSession s;
  s.comm = ssl::connect(config);
  s.device = config.device;
  log::info(blas_summary());
  if (config.world_size > 1)
    log::info("process ", config.rank, " of ", config.world_size, " (", config.launcher,
              "), device ", s.device.str());
  return s;
}

void write_config(const Flags& flags, const std::string& output_dir, const Communicator& comm) {
  if (!comm.is_main()) return;
  std::filesystem::create_directories(output_dir);
  write_file_atomically(std::filesystem::path(output_dir) / "config.ini", flags.to_ini());
}

}  // namespace xdino::launch
