#include "launch/train_data.h"

#include "augment/data/open_dataset.h"
#include "augment/sample_transforms.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::launch {

LoaderSource::LoaderSource(augment::DatasetPtr dataset, augment::SampleTransform transform,
                           augment::LoaderOptions options, int rank, int world)
    : loader_(std::move(dataset), std::move(transform), options, rank, world) {}

void LoaderSource::start_epoch(int64_t epoch, int64_t first_batch) {
  loader_.start_epoch(epoch, first_batch);
}

std::vector<torch::Tensor> LoaderSource::next_batch() {
  auto batch = loader_.next();
  XDINO_CHECK(batch.has_value(), "the data loader ended the epoch before batch ",
              loader_.batches_per_epoch());
  return std::move(batch->views);
}

augment::MultiCropOptions multi_crop_options(const ssl::DinoOptions& o) {
  augment::MultiCropOptions mo;
  static_cast<CropSizes&>(mo) = o;  // the crop flags, one assignment
  XDINO_CHECK_ARG(
      o.blur_sigma.size() == 2 && o.blur_sigma[0] > 0 && o.blur_sigma[0] <= o.blur_sigma[1],
      "--blur_sigma takes two values 0 < min <= max (pixels), got ", o.blur_sigma.size(),
      " values");
  mo.blur_sigma_min = o.blur_sigma[0];
  mo.blur_sigma_max = o.blur_sigma[1];
  mo.normalization = augment::normalization_for(o.in_chans, o.mean, o.std);
  return mo;
}

std::shared_ptr<ssl::DataSource> open_train_data(const ssl::DinoOptions& o,
                                                 const Communicator& comm) {
  // The transform first: a bad crop flag or --in_chans fails before any data is opened.
  augment::SampleTransform transform = augment::multi_crop_transform(multi_crop_options(o));
  augment::DatasetOptions dataset_options;
  dataset_options.max_samples = o.max_samples;
  dataset_options.decode = augment::float_pixels_if_needed(o.in_chans);
  const auto dataset = augment::open_dataset(o.data_path, "train", dataset_options);
  log::info("Data loaded: ", dataset->describe());
  augment::LoaderOptions lo;
  lo.batch_size = o.batch_size_per_gpu;
  lo.num_workers = o.num_workers;
  lo.seed = o.seed;
  return std::make_shared<LoaderSource>(dataset, std::move(transform), lo, comm.rank(),
                                        comm.world_size());
}

}  // namespace xdino::launch
