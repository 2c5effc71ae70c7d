#include "launch/eval_common.h"

#include "models/registry.h"

namespace xdino::launch {

void declare_backbone_flags(Flags& f, eval::BackboneSpec& s) {
  f.add("arch", &s.arch, "backbone: " + models::backbone_list())
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

}  // namespace xdino::launch
