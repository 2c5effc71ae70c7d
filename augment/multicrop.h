// DINO's multi-crop augmentation (main_dino.py's DataAugmentationDINO) on uint8 RGB images.
//
// Contract:
//  - One image and one Rng (seed it per sample with sample_seed) give num_crops() tensors:
//    [global 1, global 2, local 1 .. local L], each float32 (3, S, S), S = global_crops_size
//    or local_crops_size. Every crop is sampled independently from the original image:
//      RandomResizedCrop(S, scale, ratio (3/4, 4/3), BICUBIC) -> flip (p 0.5) ->
//      ColorJitter(0.4, 0.4, 0.2, 0.1) with p 0.8 -> grayscale (p 0.2) ->
//      GaussianBlur(sigma ~ U(0.1, 2)) with p 1.0 / 0.1 / 0.5 (global 1 / global 2 / local) ->
//      solarize (global 2 only, p 0.2) -> ToTensor -> Normalize (ImageNet mean/std).
//    With normalization.channels 1 (--in_chans 1) the image is first converted RGB -> L -> RGB
//    and every crop is (1, S, S): torchvision's pipeline on the L image (augment/ops/tensor.h).
//  - Decisions follow the official comparisons: flip, grayscale and solarize apply if
//    u < p; colour jitter (RandomApply) and blur apply if u <= p.
//  - Rng order: crop after crop; within a crop, plan() draws the box
//    (random_resized_crop_box's order), then u for flip, u for jitter (then its
//    sample_color_jitter draws if applied), u for grayscale, u for blur (then sigma if
//    applied), and for global 2 only u for solarize.
//  - Deterministic given the Rng; const methods are thread-safe (scratch images are per
//    thread). Bad options throw xdino::UsageError from the constructor.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "augment/ops/color.h"
#include "augment/ops/image.h"
#include "augment/ops/random.h"
#include "augment/ops/tensor.h"
#include "core/crop_sizes.h"

namespace xdino::augment {

// The crop counts, sizes and scales are CropSizes' (core/crop_sizes.h).
struct MultiCropOptions : CropSizes {
  std::vector<double> crop_ratio = {3.0 / 4.0, 4.0 / 3.0};
  double flip_p = 0.5;
  double color_jitter_p = 0.8;
  ColorJitterOptions color_jitter;
  double grayscale_p = 0.2;
  double global1_blur_p = 1.0;
  double global2_blur_p = 0.1;
  double local_blur_p = 0.5;
  double blur_sigma_min = kBlurSigmaMin;  // core/crop_sizes.h
  double blur_sigma_max = kBlurSigmaMax;
  double global2_solarize_p = 0.2;
  Normalization normalization;
};

// Everything random about one crop, drawn before any pixel is touched.
struct CropPlan {
  cv::Rect box;
  int size = 0;
  bool flip = false;
  bool jitter = false;
  ColorJitterParams jitter_params;
  bool grayscale = false;
  bool blur = false;
  double sigma = 0.0;
  bool solarize = false;
};

class MultiCropAugmentation {
 public:
  explicit MultiCropAugmentation(MultiCropOptions options = {});

  const MultiCropOptions& options() const { return options_; }
  int64_t num_crops() const { return 2 + options_.local_crops_number; }
  int64_t channels() const { return normalizer_.channels(); }  // of every crop: 1 or 3
  // Side of crop `index` (0, 1: global; 2..: local).
  int64_t crop_size(int64_t index) const;

  // The random part of crop `index` for an image of size `image`.
  CropPlan plan(int64_t index, cv::Size image, Rng& rng) const;
  // The uint8 crop a plan describes (before ToTensor/Normalize).
  static void render(const Image& image, const CropPlan& plan, Image& out);

  // All crops, normalised into out[index] (C * S * S floats each, owned by the caller).
  void operator()(const Image& image, Rng& rng, float* const* out) const;
  // The same into tensors: out[index] is a contiguous float32 (C, S, S) tensor, e.g. the
  // slot batch_index[i] of a (B, C, S, S) batch.
  void operator()(const Image& image, Rng& rng, const std::vector<torch::Tensor>& out) const;
  std::vector<torch::Tensor> operator()(const Image& image, Rng& rng) const;

 private:
  MultiCropOptions options_;
  Normalizer normalizer_;
};

}  // namespace xdino::augment
