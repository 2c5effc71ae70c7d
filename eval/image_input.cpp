#include "eval/image_input.h"

#include "augment/data/decode.h"
#include "augment/data/open_dataset.h"
#include "augment/sample_transforms.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::eval {

void ImageInput::check() const {
  XDINO_CHECK_ARG(batch_size >= 1, "--batch_size_per_gpu must be >= 1, got ", batch_size);
  XDINO_CHECK_ARG(num_workers >= 0, "--num_workers must be >= 0, got ", num_workers);
  XDINO_CHECK_ARG(image_size >= 1, "--image_size must be positive, got ", image_size);
  if (in_chans != models::kInChansFromWeights) normalization(in_chans);
}

augment::Normalization ImageInput::normalization(int64_t channels) const {
  return augment::normalization_for(channels, mean, std);
}

ImageInput ImageInput::for_model(int64_t channels, const std::vector<double>& file_mean,
                                 const std::vector<double>& file_std,
                                 const std::string& whose) const {
  ImageInput out = *this;
  out.in_chans = channels;
  XDINO_CHECK_ARG(channels <= augment::kMaxImageChannels, whose, " take ", channels,
                  "-channel images, and the images read here hold at most ",
                  augment::kMaxImageChannels,
                  " channels (OpenCV's TIFF and PNG codecs): this model cannot be evaluated here");
  const bool has_default = channels == 1 || channels == 3;
  if (mean.empty() && std.empty() && !has_default) {
    XDINO_CHECK_ARG(!file_mean.empty() && !file_std.empty(), whose, " take ", channels,
                    "-channel images and record no mean and std: give --mean and --std (the "
                    "per-channel statistics the model was trained with)");
    out.mean = file_mean;
    out.std = file_std;
    log::info("normalising ", channels, "-channel images with the mean and std that ", whose,
              " record");
  }
  out.normalization(channels);  // the counts of --mean/--std against the model's channels
  return out;
}

augment::DatasetPtr ImageInput::open(const std::string& data_path, const std::string& split,
                                     int64_t max_samples) const {
  augment::DatasetOptions o;
  o.decode = augment::float_pixels_if_needed(in_chans);
  o.max_samples = max_samples;
  return augment::open_dataset(data_path, split, o);
}

augment::SampleTransform ImageInput::transform(int64_t channels) const {
  augment::EvalTransformOptions o;
  o.crop_size = image_size;
  o.normalization = normalization(channels);
  return augment::eval_transform(o);
}

augment::LoaderOptions ImageInput::loader(torch::Device device) const {
  augment::LoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = num_workers;
  o.shuffle = false;
  o.drop_last = false;
  o.pin_memory = device.is_cuda();
  return o;
}

}  // namespace xdino::eval
