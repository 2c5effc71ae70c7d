#include "launch/eval_common.h"

#include "models/registry.h"

namespace xdino::launch {

void declare_backbone_flags(Flags& f, std::string& arch, int64_t& patch_size,
                            std::string& pretrained_weights, std::string& checkpoint_key) {
  f.add("arch", &arch, "backbone: " + models::backbone_list())
      .add("patch_size", &patch_size, models::patch_size_help())
      .add("pretrained_weights", &pretrained_weights,
           "checkpoint to load (ours or official); empty: random weights (the official "
           "scripts would download reference weights; this build never downloads)")
      .add("checkpoint_key", &checkpoint_key,
           "key of the state dict inside the checkpoint (teacher, student)");
}

void declare_backbone_flags(Flags& f, eval::BackboneSpec& s) {
  declare_backbone_flags(f, s.arch, s.patch_size, s.pretrained_weights, s.checkpoint_key);
  f.add("image_size", &s.image_size,
        "evaluation resolution: CenterCrop size, the resize is image_size*256/224");
}

void declare_model_flags(Flags& f, eval::BackboneSpec& s) {
  declare_backbone_flags(f, s.arch, s.patch_size, s.pretrained_weights, s.checkpoint_key);
  f.add("seed", &s.seed, "seed of the random initial weights (no --pretrained_weights)");
}

void declare_subset_flags(Flags& f, eval::EvalSubset& s) {
  f.add("max_train_samples", &s.max_train_samples,
        "use a class-balanced subset of this many training images (0: all; quick runs only)")
      .add("max_val_samples", &s.max_val_samples,
           "use a class-balanced subset of this many validation images (0: all)");
}

}  // namespace xdino::launch
