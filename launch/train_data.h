// The training data of `dino train`: the multi-crop loader of augment/ seen through the
// trainer's ssl::DataSource (ssl/data_source.h).
//
// In launch/ because it is the one tier that sees both: ssl/ takes any DataSource so that it
// does not depend on augment/ (tests feed it synthetic crops), and augment/ knows nothing of
// the trainer.
//
// Contract:
//  - multi_crop_options(o): the crop flags (CropSizes) and --blur_sigma of `o` as the
//    augmentation's options, the rest at DINO's defaults. --blur_sigma other than two values
//    0 < min <= max throws xdino::UsageError.
//  - open_train_data(o, comm): opens the train split of o.data_path (at most o.max_samples
//    images, class-balanced), logs what it found, and returns a LoaderSource over this
//    process's shard (o.batch_size_per_gpu, o.num_workers, o.seed), in the multi-crop
//    augmentation's view order.
//  - LoaderSource::next_batch throws xdino::Error if the loader ends an epoch early.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "augment/data/loader.h"
#include "augment/multicrop.h"
#include "distributed/communicator.h"
#include "ssl/data_source.h"
#include "ssl/dino_options.h"

namespace xdino::launch {

class LoaderSource : public ssl::DataSource {
 public:
  LoaderSource(augment::DatasetPtr dataset, augment::SampleTransform transform,
               augment::LoaderOptions options, int rank, int world);
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  void start_epoch(int64_t epoch, int64_t first_batch) override;
  std::vector<torch::Tensor> next_batch() override;

 private:
  augment::DataLoader loader_;
};

augment::MultiCropOptions multi_crop_options(const ssl::DinoOptions& o);

std::shared_ptr<ssl::DataSource> open_train_data(const ssl::DinoOptions& o,
                                                 const Communicator& comm);

}  // namespace xdino::launch
