// The float pipeline: images of any channel count and bit depth (16-bit PNG or TIFF, 4-channel
// multispectral TIFF) as float32 values in [0, 1], with torchvision's tensor semantics
// (docs/architecture.md, "The float pipeline").
//
// Contract:
//  - A float image is a continuous cv::Mat of depth CV_32F and C >= 1 interleaved channels
//    (CV_32FC(C)), values in [0, 1]: decode divides 8-bit samples by 255 and 16-bit ones by
//    65535 (augment/data/decode.h). is_float_image() (augment/ops/image.h) tells it from the
//    8-bit RGB Image.
//  - The DINO ops take float images through the same functions as 8-bit ones (resize,
//    hflip, adjust_*, to_grayscale, gaussian_blur, solarize dispatch on the type), computed as
//    below in float32 with no rounding to 8 bits between them. This is what torchvision's
//    tensor ops give on a float tensor, so the 16-bit path has a reference to be tested against
//    (tests/augment/test_float_pipeline.cpp runs torchvision on the same values):
//      resize        Pillow's filters (float_resize.h), = interpolate(antialias=True) on the
//                    crop;
//      brightness    (f * v).clamp(0, 1);
//      contrast      blend with the mean of the grayscale image (3 channels) or of all values
//                    (torchvision's formula; its function refuses counts other than 1 and 3);
//      saturation    blend with the per-pixel grayscale (3 channels); other counts unchanged;
//      hue           torchvision's float HSV round trip (3 channels); other counts unchanged
//                    (torchvision has no hue for them and refuses; we skip, so the Rng stream
//                    stays that of the RGB pipeline);
//      grayscale     every channel := 0.2989 R + 0.587 G + 0.114 B (3 channels); other counts
//                    unchanged, as torchvision's rgb_to_grayscale returns them;
//      blur          Pillow's extended box blur with exact weights (float_blur.h);
//      solarize      v >= 128/255 becomes 1 - v: DINO's threshold of 128 on the same scale.
//    On an 8-bit image divided by 255, each op agrees with the 8-bit path to within that path's
//    rounding (a few levels of 255; tested).
//  - Blends clamp to [0, 1]; bicubic resize may overshoot it slightly, as torch's does.
//  - Ops edit in place (resize writes dst); wrong types throw xdino::Error. Thread-safe.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "augment/ops/image.h"

namespace xdino::augment {

// A float image of `channels` channels from one of another count, as Pillow's convert() would:
// 1 -> 3 replicated, 4 -> 3 alpha dropped, 3 or 4 -> 1 by the luma 0.299 R + 0.587 G + 0.114 B
// (convert("L")'s weights). Equal counts: unchanged. Others throw xdino::Error naming `name`,
// both counts and --in_chans.
void convert_channels(Image& image, int64_t channels, const std::string& name);

void adjust_brightness_float(Image& image, double factor);
void adjust_contrast_float(Image& image, double factor);
void adjust_saturation_float(Image& image, double factor);
void adjust_hue_float(Image& image, double hue);
void to_grayscale_float(Image& image);
void solarize_float(Image& image, float threshold);

}  // namespace xdino::augment
