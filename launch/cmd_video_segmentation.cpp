// `dino video_segmentation`: eval_video_segmentation.py + DAVIS J&F
// (eval/video/video_segmentation.h).
#include "core/check.h"
#include "eval/video/video_segmentation.h"
#include "launch/command.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class VideoSegmentationCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::video::VideoSegmentationOptions& o = opt_;
    declare_model_flags(f, o.model);
    f.add("output_dir", &o.output_dir,
          "where the segmentations (<video>/<frame>.png), video_segmentation.json and "
          "config.ini go")
        .add("data_path", &o.data_path,
             "DAVIS 2017 root: ImageSets/2017/val.txt, JPEGImages/480p/, Annotations/480p/")
        .add("n_last_frames", &o.n_last_frames, "number of preceding frames")
        .add("size_mask_neighborhood", &o.size_mask_neighborhood,
             "restrict the source patches to this spatial neighbourhood of the target one")
        .add("topk", &o.topk, "accumulate the label from the top k neighbours")
        .add("bs", &o.bs, "batch size (accepted; the official script does not use it either)")
        .add("evaluate", &o.evaluate,
             "compute J&F (davis2017-evaluation's definitions) on the written masks");
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    return run_in_session(flags, dist_, config_record(flags, opt_.output_dir),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            XDINO_CHECK_ARG(comm.world_size() == 1,
                                            "video_segmentation runs in one process (as the "
                                            "official script)");
                            eval::video::run_video_segmentation(opt_, device, checked);
                          });
  }

 private:
  eval::video::VideoSegmentationOptions opt_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_video_segmentation_command() {
  return std::make_unique<VideoSegmentationCommand>();
}

}  // namespace xdino::launch
