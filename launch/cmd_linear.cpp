// `dino linear`: linear probe on a frozen backbone. Flags keep eval_linear.py's names and
// defaults; --cached_features selects the fast (non-official) mode.
#include "augment/data/open_dataset.h"
#include "eval/linear_eval.h"
#include "launch/command.h"
#include "launch/eval_board.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class LinearCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::LinearEvalOptions& o = opt_;
    f.add("n_last_blocks", &o.n_last_blocks,
          "ViT: concatenate the CLS tokens of the last n blocks (4 for ViT-S, 1 for ViT-B); "
          "XCiT ignores it")
        .add("avgpool_patchtokens", &o.avgpool_patchtokens,
             "ViT: also the average of the patch tokens (true for ViT-B); XCiT ignores it");
    declare_weights_flags(f, o.model);
    declare_image_input_flags(f, o.input);
    declare_subset_flags(f, o.subset);
    f.add("epochs", &o.epochs, "training epochs")
        .add("lr", &o.lr, "learning rate per 256 images (scaled by the total batch size)")
        .add("data_path", &o.data_path,
             "dataset root with both splits: " + augment::dataset_layouts())
        .add("val_freq", &o.val_freq, "validate every this many epochs (and at the last)")
        .add("output_dir", &o.output_dir, "where log.txt, checkpoint.pth and linear.json go")
        .add("num_labels", &o.num_labels, "outputs of the linear classifier")
        .add_switch("evaluate", &o.evaluate,
                    "only evaluate the classifier of --linear_weights on the validation set")
        .add("cached_features", &o.cached_features,
             "fast mode: train on features computed once without augmentation (NOT the "
             "official protocol; labelled as such in every output)")
        .add("load_features", &o.load_features,
             "cached mode: folder with trainfeat.h5 and testfeat.h5 from --dump_features")
        .add("dump_features", &o.dump_features,
             "cached mode: folder to save the unnormalised features to")
        .add("linear_weights", &o.linear_weights,
             "--evaluate: classifier checkpoint (default <output_dir>/checkpoint.pth)")
        .add("seed", &o.seed, "seed of the training shuffle and augmentation");
    declare_tensorboard_flag(f, tensorboard_);
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    // --evaluate only reads: it leaves the training run's config.ini as it is.
    return run_in_session(flags, dist_, opt_.evaluate ? "" : config_record(flags, opt_.output_dir),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            eval::run_linear_eval(opt_, comm, device, checked);
                            if (tensorboard_ && !opt_.evaluate && comm.is_main())
                              write_board(opt_.output_dir + "/linear.json",
                                          [&] { write_linear_board(opt_.output_dir); });
                          });
  }

 private:
  eval::LinearEvalOptions opt_;
  distributed::DistOptions dist_;
  bool tensorboard_ = true;
};

}  // namespace

std::unique_ptr<Command> make_linear_command() { return std::make_unique<LinearCommand>(); }

}  // namespace xdino::launch
