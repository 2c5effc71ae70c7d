// The float pipeline's resize (augment/ops/float_image.h): Pillow's separable filter with the
// weights of resample.h in double, applied in float32 without rounding between the passes,
// which is what torch.nn.functional.interpolate(antialias=True) computes on the cropped tensor.
//
// Contract: resize_window_float takes resize_window's arguments (resize.h) on a continuous
// float image of any channel count; dst becomes CV_32FC(C) of window.size(). resize.h's
// resize and resize_window send float images here. Thread-safe (per-thread scratch).
#pragma once

#include <opencv2/core.hpp>

#include "augment/ops/image.h"
#include "augment/ops/resample.h"

namespace xdino::augment {

void resize_window_float(const Image& src, const cv::Rect& box, cv::Size size,
                         const cv::Rect& window, Interpolation filter, Image& dst);

}  // namespace xdino::augment
