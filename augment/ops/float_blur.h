// The float pipeline's Gaussian blur (augment/ops/float_image.h): Pillow's extended box blur
// (three box passes per axis, blur.h) with exact weights instead of its 24-bit fixed point,
// since DINO blurs with Pillow.
//
// Contract: gaussian_blur_float blurs a continuous float image of any channel count in place,
// rows first, edges repeated; sigma < 0 or non-finite throws xdino::Error, 0 changes nothing.
// blur.h's gaussian_blur sends float images here. Thread-safe (per-thread scratch).
#pragma once

#include "augment/ops/image.h"

namespace xdino::augment {

void gaussian_blur_float(Image& image, double sigma);

}  // namespace xdino::augment
