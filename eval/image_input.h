// How an evaluation reads its images: one value every protocol that extracts features takes
// whole (faiss's SearchParameters: what every search shares, in one struct), built once from
// the flags (launch/eval_flags.h, declare_image_input_flags). A new input option is one field
// here and one flag there.
//
// Contract:
//  - Fields: images per batch and process (--batch_size_per_gpu), loader threads
//    (--num_workers), the evaluation crop (--image_size; the resize is image_size * 256 / 224,
//    eval_knn.py's), the images' channels (--in_chans; kInChansFromWeights: the weights'
//    input conv's, 3 for random weights) and the normalisation (--mean / --std, timm's).
//  - check(): an explicit in_chans without the normalisation it needs (--mean and --std for
//    other than 1 or 3 channels), a channel count no image holds, or a bad batch, worker count
//    or size is one UsageError line, for the commands to call before they open anything.
//  - normalization(channels): the one place --mean/--std become an augment::Normalization, for
//    a model of `channels` channels (normalization_for: empty is the default of that count).
//  - for_model(channels, file_mean, file_std, whose): this input for a model of `channels`
//    input channels (in_chans set to it): --mean/--std when given, else the weights file's
//    (file_mean/file_std, dino export's metadata or a checkpoint's args) for a count without
//    a default, else the count's default. A count no image read here holds (more than
//    augment::kMaxImageChannels), or one without a normalisation, is one UsageError line
//    naming `whose` ("the weights 'w.pth'"): the count is the model's, not a flag's.
//  - open(data_path, split, max_samples): the split (augment::open_dataset), decoded for
//    in_chans channels (8-bit, or the float pipeline), limited to a class-balanced subset
//    (0: all).
//  - transform(channels): the official evaluation transform (Resize, CenterCrop, ToTensor,
//    Normalize) for a model of `channels` channels; loader(device): batches in dataset order,
//    nothing dropped, pinned for a GPU.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/loader.h"
#include "augment/data/sample_transform.h"
#include "augment/ops/tensor.h"
#include "models/registry.h"

namespace xdino::eval {

struct ImageInput {
  ImageInput() = default;
  ImageInput(int64_t batch, int64_t workers, int64_t size,
             int64_t channels = models::kInChansFromWeights)
      : batch_size(batch), num_workers(workers), image_size(size), in_chans(channels) {}

  int64_t batch_size = 128;
  int64_t num_workers = 10;
  int64_t image_size = 224;
  int64_t in_chans = models::kInChansFromWeights;
  std::vector<double> mean{}, std{};

  void check() const;
  augment::Normalization normalization(int64_t channels) const;
  ImageInput for_model(int64_t channels, const std::vector<double>& file_mean,
                       const std::vector<double>& file_std, const std::string& whose) const;
  augment::DatasetPtr open(const std::string& data_path, const std::string& split,
                           int64_t max_samples = 0) const;
  augment::SampleTransform transform(int64_t channels) const;
  augment::LoaderOptions loader(torch::Device device) const;
};

}  // namespace xdino::eval
