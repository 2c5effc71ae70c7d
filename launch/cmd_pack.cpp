// `dino pack`: an image folder split → encoded-image HDF5 shards (layout in
// augment/data/h5_dataset.h).
#include "augment/data/open_dataset.h"
#include "augment/data/pack.h"
#include "core/log.h"
#include "launch/command.h"

namespace xdino::launch {
namespace {

class PackCommand : public Command {
 public:
  void declare(Flags& f) override {
    augment::PackOptions& o = opt_;
    f.add("data_path", &o.data_path,
          "dataset root, an ImageFolder or flat folder: " + augment::dataset_layouts())
        .add("split", &o.split, "train or val")
        .add("output_dir", &o.output_dir,
             "where <split>.h5 (or <split>-00000-of-0000N.h5 shards) go; give the data root "
             "to have training find them")
        .add("shard_size_mb", &o.shard_size_mb, "most megabytes of images per shard file")
        .add("check_images", &o.check_images,
             "decode every image first and leave out the unreadable ones")
        .add("max_samples", &o.max_samples,
             "pack a class-balanced subset of this many images (0: all)")
        .add("num_workers", &o.num_workers, "decoding threads for --check_images (0: all cores)");
  }

  int run(const Flags&) override {
    const augment::PackResult r = augment::pack_image_folder(opt_);
    log::info("packed ", r.images, " images (", r.bytes, " bytes) into ", r.files.size(), " file",
              r.files.size() == 1 ? "" : "s", r.skipped ? " (" : "",
              r.skipped ? std::to_string(r.skipped) + " unreadable left out)" : "");
    for (const auto& f : r.files) log::info("  ", f.string());
    return 0;
  }

 private:
  augment::PackOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_pack_command() { return std::make_unique<PackCommand>(); }

}  // namespace xdino::launch
