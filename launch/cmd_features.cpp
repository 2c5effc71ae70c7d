// `dino features`: L2-normalised features of one split to an HDF5 file.
#include <filesystem>

#include "augment/data/open_dataset.h"
#include "eval/extract.h"
#include "launch/command.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class FeaturesCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::FeaturesOptions& o = opt_;
    declare_model_flags(f, o.model);
    declare_image_input_flags(f, o.input);
    f.add("data_path", &o.data_path, "dataset root: " + augment::dataset_layouts())
        .add("split", &o.split, "which split: train or val")
        .add("output", &o.output,
             "HDF5 file to write (features [N,C] float32, labels, paths); its config goes "
             "beside it (feats.h5: feats.config.ini)")
        .add_switch("patch_tokens", &o.patch_tokens,
                    "also write each image's patch tokens from the last block, /patch_tokens "
                    "[N, T, D] float32, streamed to the file batch by batch (dense tasks)")
        .add_switch("force", &o.force,
                    "replace an existing --output that is not a feature file (never a "
                    "checkpoint, config, log or result another command wrote)");
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    // Its own record beside the file (feats.h5 -> feats.config.ini): a folder's config.ini is
    // another run's, or the user's own --config.
    std::filesystem::path record(opt_.output);
    record.replace_extension(".config.ini");
    return run_in_session(flags, dist_, record.string(),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            eval::run_features(opt_, comm, device, checked);
                          });
  }

 private:
  eval::FeaturesOptions opt_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_features_command() { return std::make_unique<FeaturesCommand>(); }

}  // namespace xdino::launch
