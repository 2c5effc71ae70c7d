#include "launch/eval_flags.h"

#include "models/registry.h"

namespace xdino::launch {

void declare_weights_flags(Flags& f, eval::BackboneSpec& s, const std::string& arch_note) {
  f.add("arch", &s.arch,
        (arch_note.empty() ? "" : "(" + arch_note + ") ") + "backbone: " + models::backbone_list())
      .add("patch_size", &s.patch_size, models::patch_size_help())
      .add("pretrained_weights", &s.pretrained_weights,
           "checkpoint to load (ours or official); empty: random weights (the official "
           "scripts would download reference weights; this build never downloads)")
      .add("checkpoint_key", &s.checkpoint_key,
           "key of the state dict inside the checkpoint (teacher, student)");
}

void declare_model_flags(Flags& f, eval::BackboneSpec& s) {
  declare_weights_flags(f, s);
  f.add("seed", &s.seed, "seed of the random initial weights (no --pretrained_weights)");
}

void declare_image_input_flags(Flags& f, eval::ImageInput& in) {
  f.add("batch_size_per_gpu", &in.batch_size, "images per process and batch")
      .add("num_workers", &in.num_workers, "data loading threads per process")
      .add("image_size", &in.image_size,
           "evaluation resolution: CenterCrop size, the resize is image_size*256/224")
      .add("in_chans", &in.in_chans,
           "channels of the images: 3 (RGB), 1 (grayscale, converted to L as Pillow's "
           "convert(\"L\") does) or up to 4 (16-bit or multispectral TIFF/PNG, the float "
           "pipeline); timm's in_chans, which the official scripts lack. 0: those of "
           "--pretrained_weights' input conv, 3 for random weights. 3-channel weights are "
           "adapted as timm's adapt_input_conv does")
      .add("mean", &in.mean,
           "normalisation mean per channel, on the [0, 1] scale (one value or one per channel; "
           "timm's --mean); default ImageNet's, needed for other than 1 or 3 channels")
      .add("std", &in.std, "normalisation std per channel, as --mean");
}

void declare_use_cuda_flag(Flags& f, bool& use_cuda) {
  f.add("use_cuda", &use_cuda,
        "keep the features on the GPU for the search (on a CPU run: ignored)");
}

void declare_subset_flags(Flags& f, eval::EvalSubset& s) {
  f.add("max_train_samples", &s.max_train_samples,
        "use a class-balanced subset of this many training images (0: all; quick runs only)")
      .add("max_val_samples", &s.max_val_samples,
           "use a class-balanced subset of this many validation images (0: all)");
}

}  // namespace xdino::launch
