// The evaluation-side transforms of eval_knn.py / eval_linear.py.
//
// Contract:
//  - EvalTransform: Resize(resize_size, BICUBIC) of the shorter side (the longer one becomes
//    int(resize_size * long / short)), CenterCrop(crop_size) with Python rounding, ToTensor,
//    Normalize. resize_size 0 means crop_size * 256 / 224 (integer division: 256 for 224, as
//    the official scripts; timm's crop_pct 0.875 otherwise). Only the centre window of the
//    resized image is computed; the result equals resize-then-crop exactly.
//  - LinearTrainTransform: RandomResizedCrop(crop_size, scale (0.08, 1), ratio (3/4, 4/3),
//    BILINEAR), flip if u < 0.5, ToTensor, Normalize. Rng order: the box
//    (random_resized_crop_box's order), then u for the flip.
//  - thumbnail(image, s): what eval_image_retrieval.py's loader does, Pillow 9's
//    Image.thumbnail((s, s), ANTIALIAS) on a decoded image (convert("RGB") came first, so no
//    JPEG draft): never enlarges; the size keeps the aspect ratio with Pillow's rounding (the
//    floor or ceil whose aspect is nearer, at least 1); Image.reduce by int(side / target / 2)
//    when that is >= 2 (reducing_gap 2.0), then a Lanczos resample of the float box.
//    Bit-exact with Pillow 9.4 (tests/augment/test_thumbnail.cpp runs PIL on the same pixels).
//  - Outputs are float32 (C, crop_size, crop_size), C = normalization.channels (1: the image
//    converted RGB -> L -> RGB first, one gray plane, augment/ops/tensor.h); crop() gives the
//    uint8 crop of the image as given. The float* overloads write C*S*S floats the caller owns, the
//    tensor overloads check shape/dtype/contiguity (xdino::Error). Bad options throw
//    xdino::UsageError from the constructors. Const methods are thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "augment/ops/image.h"
#include "augment/ops/random.h"
#include "augment/ops/tensor.h"

namespace xdino::augment {

struct EvalTransformOptions {
  int64_t crop_size = 224;
  int64_t resize_size = 0;  // 0: crop_size * 256 / 224
  Normalization normalization;
};

class EvalTransform {
 public:
  explicit EvalTransform(EvalTransformOptions options = {});

  int64_t crop_size() const { return options_.crop_size; }
  int64_t resize_size() const { return resize_size_; }
  int64_t channels() const { return normalizer_.channels(); }
  // The uint8 centre crop of the resized image.
  void crop(const Image& image, Image& out) const;
  void operator()(const Image& image, float* dst) const;
  void operator()(const Image& image, const torch::Tensor& dst) const;
  torch::Tensor operator()(const Image& image) const;

 private:
  EvalTransformOptions options_;
  int64_t resize_size_;
  Normalizer normalizer_;
};

// The size thumbnail() gives a width x height image.
cv::Size thumbnail_size(int width, int height, int max_size);
Image thumbnail(const Image& image, int max_size);

struct LinearTrainOptions {
  int64_t crop_size = 224;
  std::vector<double> scale = {0.08, 1.0};
  std::vector<double> ratio = {3.0 / 4.0, 4.0 / 3.0};
  double flip_p = 0.5;
  Normalization normalization;
};

class LinearTrainTransform {
 public:
  explicit LinearTrainTransform(LinearTrainOptions options = {});

  int64_t crop_size() const { return options_.crop_size; }
  int64_t channels() const { return normalizer_.channels(); }
  void crop(const Image& image, Rng& rng, Image& out) const;
  void operator()(const Image& image, Rng& rng, float* dst) const;
  void operator()(const Image& image, Rng& rng, const torch::Tensor& dst) const;
  torch::Tensor operator()(const Image& image, Rng& rng) const;

 private:
  LinearTrainOptions options_;
  Normalizer normalizer_;
};

}  // namespace xdino::augment
