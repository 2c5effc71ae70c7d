// `dino preview`: a PNG of the augmented views of a few images, one row per image, so that an
// augmentation can be checked by eye. The crop flags are `dino train`'s (launch/train_flags.h).
#include "augment/data/open_dataset.h"
#include "augment/preview.h"
#include "core/log.h"
#include "launch/command.h"
#include "launch/train_flags.h"

namespace xdino::launch {
namespace {

class PreviewCommand : public Command {
 public:
  void declare(Flags& f) override {
    augment::PreviewOptions& o = opt_;
    f.add("data_path", &o.data_path, "dataset root: " + augment::dataset_layouts())
        .add("split", &o.split, "train or val")
        .add("output", &o.output, "PNG file to write")
        .add("num_images", &o.num_images, "images to draw, picked class-balanced")
        .add("indices", &o.indices, "dataset indices to draw instead (overrides --num_images)")
        .add("seed", &o.seed, "random seed, as `dino train --seed`")
        .add("epoch", &o.epoch, "epoch whose crops to draw (each epoch has its own)")
        .add("transform", &o.transform,
             "multicrop (DINO training), eval, or linear (linear-probe training)");
    declare_crop_flags(f, o.multi_crop);  // the crop flags of `dino train`, declared once
  }

  int run(const Flags&) override {
    const std::vector<int64_t> drawn = augment::write_preview(opt_);
    log::info("wrote ", opt_.output, ": ", drawn.size(), " images, one row each (", opt_.transform,
              " views, left to right)");
    return 0;
  }

 private:
  augment::PreviewOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_preview_command() { return std::make_unique<PreviewCommand>(); }

}  // namespace xdino::launch
