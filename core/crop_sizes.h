// How many crops DINO takes of an image, how large and from how much of it, and how much it
// blurs them: the one place for these defaults (main_dino.py's), shared by the augmentation
// (augment::MultiCropOptions) and the training options (ssl::DinoOptions), which both derive
// from CropSizes so that the flags of `dino train` and the augmentation cannot disagree. In
// core/, the lowest tier both use.
//
// Contract: a plain value type, std only (the LibTorch-only tiers include it without OpenCV).
// Scales are fractions of the image area, two numbers 0 < min <= max; sizes are the output
// side in pixels, > 0; local_crops_number >= 0. Nothing here checks them: the augmentation's
// constructor (augment/multicrop.h) throws xdino::UsageError for values outside those ranges.
#pragma once

#include <cstdint>
#include <vector>

namespace xdino {

// GaussianBlur's sigma range in pixels, hard-coded (0.1, 2.0) in main_dino.py and meant for
// 224-pixel crops: MultiCropOptions' blur_sigma_min/max and `dino train --blur_sigma`.
inline constexpr double kBlurSigmaMin = 0.1;
inline constexpr double kBlurSigmaMax = 2.0;

struct CropSizes {
  std::vector<double> global_crops_scale = {0.4, 1.0};  // RandomResizedCrop area range
  std::vector<double> local_crops_scale = {0.05, 0.4};
  int64_t local_crops_number = 8;
  int64_t global_crops_size = 224;  // hard-coded 224 in main_dino.py
  int64_t local_crops_size = 96;    // hard-coded 96 in main_dino.py
};

}  // namespace xdino
