// `dino knn`: weighted k-NN on frozen features. Flags keep eval_knn.py's names and defaults.
#include "augment/data/open_dataset.h"
#include "eval/knn_eval.h"
#include "launch/command.h"
#include "launch/eval_board.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class KnnCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::KnnEvalOptions& o = opt_;
    f.add("nb_knn", &o.nb_knn, "numbers of nearest neighbours (20 is usually the best)")
        .add("temperature", &o.temperature, "temperature of the voting weights exp(sim / T)");
    declare_use_cuda_flag(f, o.use_cuda);
    declare_model_flags(f, o.model);
    declare_image_input_flags(f, o.input);
    declare_subset_flags(f, o.subset);
    f.add("dump_features", &o.dump_features,
          "folder to save the computed features to (trainfeat.h5, testfeat.h5); empty: none")
        .add("load_features", &o.load_features,
             "folder of features computed before (our .h5 dumps or eval_knn.py's .pth dumps)")
        .add("data_path", &o.data_path,
             "dataset root with both splits: " + augment::dataset_layouts())
        .add("output_dir", &o.output_dir, "where knn.json and config.ini go")
        .add("knn_backend", &o.knn_backend,
             "faiss (exact search, bounded memory) or torch (eval_knn.py's mm + topk)")
        .add("recalibrate_bn", &o.recalibrate_bn,
             "random weights only: also measure them with the BatchNorm running statistics of "
             "this many train images (a class-balanced subset), the reference that a DINO "
             "teacher's margin must beat to show learning (docs/evaluation.md); 0: off");
    declare_tensorboard_flag(f, tensorboard_);
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    return run_in_session(flags, dist_, config_record(flags, opt_.output_dir),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            const eval::KnnEvalResult r =
                                eval::run_knn_eval(opt_, comm, device, checked);
                            if (tensorboard_ && comm.is_main())
                              write_board(opt_.output_dir + "/knn.json",
                                          [&] { write_knn_board(opt_.output_dir, r); });
                          });
  }

 private:
  eval::KnnEvalOptions opt_;
  distributed::DistOptions dist_;
  bool tensorboard_ = true;
};

}  // namespace

std::unique_ptr<Command> make_knn_command() { return std::make_unique<KnnCommand>(); }

}  // namespace xdino::launch
