// `dino visualize`: attention maps, masks and |Q|/|K| maps as pictures
// (flags of visualize_attention.py, plus the XCiT-specific ones).
#include "augment/data/open_dataset.h"
#include "core/blas.h"
#include "core/log.h"
#include "eval/visualize.h"
#include "launch/command.h"
#include "launch/eval_common.h"

namespace xdino::launch {
namespace {

class VisualizeCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::VisualizeOptions& o = opt_;
    declare_backbone_flags(f, o.arch, o.patch_size, o.pretrained_weights, o.checkpoint_key);
    f.add("image_path", &o.image_path,
          "images to visualise; a folder is a video's frames (one attn-<frame> each, then "
          "video.mp4); a video file is cut into frames first (video_generation.py)")
        .add("data_path", &o.data_path,
             "instead of --image_path: a dataset to take --sample_indices from: " +
                 augment::dataset_layouts())
        .add("split", &o.split, "split of --data_path: train or val")
        .add("sample_indices", &o.sample_indices, "indices of the --data_path images to visualise")
        .add("image_size", &o.image_size, "resize to H W (or one size), 0 keeps each image's size")
        .add("output_dir", &o.output_dir, "where the pictures go")
        .add("threshold", &o.threshold,
             "masks keep this fraction of the attention mass, e.g. 0.6 (0: no masks)")
        .add("ca_layer", &o.ca_layer,
             "class-attention layer shown (XCiT, X-ViT), or block (ViT); negative: from the end")
        .add("qk_block", &o.qk_block,
             "block of the |Q|/|K| maps (XCiT's XCA, X-ViT's XNorm); negative: from the end")
        .add("qk_norms", &o.qk_norms, "|Q|/|K| maps after normalisation (hat), raw, both or none")
        .add("fps", &o.fps,
             "frame rate of the attention video made from a folder of frames (a video file "
             "gives its own)")
        .add("video_format", &o.video_format, "attention video format: mp4 or avi")
        .add_switch("video_only", &o.video_only,
                    "--image_path is a folder of attn-*.jpg pictures: only make the video");
  }

  int run(const Flags& flags) override {
    log::info(blas_summary());
    const int64_t n = eval::visualize(opt_);
    log::info("visualised ", n, " image(s) in ", opt_.output_dir);
    return 0;
  }

 private:
  eval::VisualizeOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_visualize_command() { return std::make_unique<VisualizeCommand>(); }

}  // namespace xdino::launch
