// `dino visualize`: attention maps, masks and |Q|/|K| maps as pictures (the flags of
// visualize_attention.py, plus the XCiT-specific ones) and attention videos (the flags of
// video_generation.py). eval/visualize.h says what each input gives.
#include "augment/data/open_dataset.h"
#include "core/blas.h"
#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "eval/visualize.h"
#include "launch/command.h"
#include "launch/eval_board.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class VisualizeCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::VisualizeOptions& o = opt_;
    declare_model_flags(f, o.model);
    f.add("image_path", &o.image_path,
          "images to visualise (visualize_attention.py); a folder of frames or a video file "
          "makes an attention video as --input_path does")
        .add("data_path", &o.data_path,
             "instead of --image_path: a dataset to take --sample_indices from: " +
                 augment::dataset_layouts())
        .add("split", &o.split, "split of --data_path: train or val")
        .add("sample_indices", &o.sample_indices, "indices of the --data_path images to visualise")
        .add("image_size", &o.image_size,
             "resize to H W, or the shorter side to one size (torchvision's Resize); 0 keeps "
             "each image's size")
        .add("output_dir", &o.output_dir, "where the pictures of --image_path/--data_path go")
        .add("threshold", &o.threshold,
             "masks keep this fraction of the attention mass, e.g. 0.6 (0: no masks)")
        .add("ca_layer", &o.ca_layer,
             "class-attention layer shown (XCiT, X-ViT), or block (ViT); negative: from the end")
        .add("qk_block", &o.qk_block,
             "block of the |Q|/|K| maps (XCiT's XCA, X-ViT's XNorm); negative: from the end")
        .add("qk_norms", &o.qk_norms, "|Q|/|K| maps after normalisation (hat), raw, both or none")
        .add("input_path", &o.input_path,
             "video_generation.py: a video file (cut into <output_path>/frames), a folder of "
             "frames, or with --video_only a folder of attn-*.jpg pictures")
        .add("output_path", &o.output_path,
             "video_generation.py: where frames/, attention/ and video.<video_format> go")
        .add("resize", &o.resize,
             "video_generation.py: resize the frames to H W, or their shorter side to one size; "
             "empty: their own size")
        .add("fps", &o.fps,
             "frame rate of the attention video made from a folder of frames (a video file "
             "gives its own)")
        .add("video_format", &o.video_format, "attention video format: mp4 or avi")
        .add_switch("video_only", &o.video_only,
                    "the input is a folder of attn-*.jpg pictures: only make the video");
    declare_tensorboard_flag(f, tensorboard_);
  }

  int run(const Flags& flags) override {
    // Each script's flags go with its own input, as each script refuses the other's.
    if (flags.is_set("input_path")) {
      for (const char* other : {"image_path", "data_path", "output_dir", "image_size"})
        XDINO_CHECK_ARG(!flags.is_set(other), "--", other,
                        " goes with --image_path (visualize_attention.py); with --input_path "
                        "(video_generation.py) use --output_path and --resize");
    } else {
      for (const char* other : {"output_path", "resize"})
        XDINO_CHECK_ARG(!flags.is_set(other), "--", other,
                        " goes with --input_path (video_generation.py); with --image_path or "
                        "--data_path (visualize_attention.py) use --output_dir and --image_size");
    }
    log::info(blas_summary());
    if (compat::cuda_available()) opt_.device = torch::Device(torch::kCUDA, 0);
    log::info("the model runs on ", opt_.device.str());
    const int64_t n = eval::visualize(opt_);
    if (tensorboard_ && opt_.input_path.empty())
      write_board(opt_.output_dir + "/*/overview.png",
                  [&] { write_picture_board(opt_.output_dir); });
    log::info("visualised ", n, " image(s) in ",
              opt_.input_path.empty() ? opt_.output_dir : opt_.output_path);
    return 0;
  }

 private:
  eval::VisualizeOptions opt_;
  bool tensorboard_ = true;
};

}  // namespace

std::unique_ptr<Command> make_visualize_command() { return std::make_unique<VisualizeCommand>(); }

}  // namespace xdino::launch
