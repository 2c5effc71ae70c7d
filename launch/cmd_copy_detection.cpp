// `dino copy_detection`: eval_copy_detection.py (eval/retrieval/copy_detection.h).
#include "eval/retrieval/copy_detection.h"
#include "launch/command.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class CopyDetectionCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::retrieval::CopyDetectionOptions& o = opt_;
    f.add("data_path", &o.data_path,
          "Copydays root: original/, strong/, jpegqual/<q>/, crops/<p>/ of .jpg images")
        .add("whitening_path", &o.whitening_path,
             "folder of images to learn the PCA whitening on (the paper: 20k YFCC100M images); "
             "empty: no whitening")
        .add("distractors_path", &o.distractors_path,
             "folder of distractor images added to the database (the paper: 10k YFCC100M "
             "images); empty: none")
        .add("imsize", &o.input.image_size, "image size (square image)")
        .add("batch_size_per_gpu", &o.input.batch_size, "per-process batch size");
    declare_model_flags(f, o.model);
    declare_use_cuda_flag(f, o.use_cuda);
    f.add("num_workers", &o.input.num_workers, "data loading threads per process")
        .add("output_dir", &o.output_dir,
             "where copy_detection.json, the feature files and config.ini go");
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    return run_in_session(flags, dist_, config_record(flags, opt_.output_dir),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            eval::retrieval::run_copy_detection(opt_, comm, device, checked);
                          });
  }

 private:
  eval::retrieval::CopyDetectionOptions opt_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_copy_detection_command() {
  return std::make_unique<CopyDetectionCommand>();
}

}  // namespace xdino::launch
