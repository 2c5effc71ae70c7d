// Crop geometry with torchvision's semantics: RandomResizedCrop's box sampling, CenterCrop's
// and Resize(int)'s arithmetic, and the horizontal flip.
//
// Contract:
//  - Boxes are cv::Rect(x = left j, y = top i, width w, height h) inside the image.
//  - random_resized_crop_box consumes the Rng in this order: per attempt (at most 10)
//    uniform() for the area fraction then uniform() for the log aspect ratio; on success
//    randint for the top, then randint for the left. The fallback draws nothing more.
//  - Rounding is Python's round() (half to even) where torchvision rounds, int() (truncation)
//    where it truncates.
//  - Invalid arguments (empty image, scale/ratio ranges not 0 < lo <= hi, a crop larger than
//    the image) throw xdino::Error.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>

#include "augment/ops/image.h"
#include "augment/ops/random.h"

namespace xdino::augment {

// Python's round(x) for the values torchvision rounds (ties go to the even integer).
int64_t round_half_even(double x);

// RandomResizedCrop.get_params: area fraction in [scale_min, scale_max], aspect ratio
// log-uniform in [ratio_min, ratio_max]; after 10 misses, the centred crop of the largest box
// whose aspect ratio is clamped to [ratio_min, ratio_max].
cv::Rect random_resized_crop_box(cv::Size image, double scale_min, double scale_max,
                                 double ratio_min, double ratio_max, Rng& rng);

// CenterCrop: top = int(round((H - h) / 2)), left = int(round((W - w) / 2)).
cv::Rect center_crop_box(cv::Size image, cv::Size crop);

// Resize(size) with an int: the shorter side becomes `size`, the longer one
// int(size * long / short); a square stays square.
cv::Size resize_shorter_side(cv::Size image, int64_t size);

// RandomHorizontalFlip's flip, in place.
void hflip(Image& image);

}  // namespace xdino::augment
