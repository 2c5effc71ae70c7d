// Pillow's ImageFilter.GaussianBlur(radius=sigma), bit for bit. Hand-written on purpose:
// cv::GaussianBlur samples a Gaussian kernel, Pillow does not (docs/architecture.md).
//
// Contract:
//  - Not a sampled Gaussian: Pillow approximates it by three passes of an "extended box blur"
//    (a box of fractional radius r, derived from sigma in single precision) along the rows,
//    then three along the columns, rounding to uint8 after every pass; pixels beyond the edge
//    repeat the edge pixel. gaussian_blur reproduces that integer arithmetic exactly.
//  - sigma is rounded to float first, as Pillow's C API takes it. sigma < 0 or non-finite
//    throws xdino::Error; sigma = 0 leaves the image unchanged.
//  - The image (CV_8UC3; a float image takes the float pipeline's exact-weight version,
//    augment/ops/float_blur.h) is blurred in place; thread-safe (per-thread scratch buffers).
//  - The box radius is box_blur_radius.h's.
#pragma once

#include "augment/ops/image.h"

namespace xdino::augment {

void gaussian_blur(Image& image, double sigma);

}  // namespace xdino::augment
