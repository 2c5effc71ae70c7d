// `dino preview`: a PNG of the augmented views of a few images, one row per image, so that an
// augmentation can be checked by eye. Multi-crop flags keep main_dino.py's names.
#include "augment/data/open_dataset.h"
#include "augment/preview.h"
#include "core/log.h"
#include "launch/command.h"

namespace xdino::launch {
namespace {

class PreviewCommand : public Command {
 public:
  void declare(Flags& f) override {
    augment::PreviewOptions& o = opt_;
    augment::MultiCropOptions& m = o.multi_crop;
    f.add("data_path", &o.data_path, "dataset root: " + augment::dataset_layouts())
        .add("split", &o.split, "train or val")
        .add("output", &o.output, "PNG file to write")
        .add("num_images", &o.num_images, "images to draw, picked class-balanced")
        .add("indices", &o.indices, "dataset indices to draw instead (overrides --num_images)")
        .add("seed", &o.seed, "random seed, as `dino train --seed`")
        .add("epoch", &o.epoch, "epoch whose crops to draw (each epoch has its own)")
        .add("transform", &o.transform,
             "multicrop (DINO training), eval, or linear (linear-probe training)")
        .add("global_crops_scale", &m.global_crops_scale, "area range of the global crops")
        .add("local_crops_number", &m.local_crops_number, "number of local crops")
        .add("local_crops_scale", &m.local_crops_scale, "area range of the local crops")
        .add("global_crops_size", &m.global_crops_size, "side of the global crops in pixels")
        .add("local_crops_size", &m.local_crops_size, "side of the local crops in pixels");
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
