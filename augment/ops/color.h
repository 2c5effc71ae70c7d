// Colour transforms with Pillow's arithmetic (torchvision's PIL backend), and ColorJitter.
// Hand-written on purpose: OpenCV's colour conversions round differently from Pillow's
// (docs/architecture.md); where OpenCV is exact (cv::LUT for solarize) it is used.
//
// Contract:
//  - Every function edits an Image (CV_8UC3 RGB) in place; a wrong type throws xdino::Error.
//    A float image (augment/ops/float_image.h) goes to the float pipeline's version instead.
//  - brightness/contrast/saturation are Pillow's Image.blend(degenerate, image, factor) in
//    single precision with truncation to uint8 (clipped to [0, 255] first): degenerate is black,
//    the mean grey (int(mean luma + 0.5)), and the per-pixel grey respectively.
//  - adjust_hue goes through Pillow's 8-bit HSV: H += uint8(hue * 255) modulo 256 (a negative
//    shift wraps, as numpy's cast does on x86), S and V kept. hue must be in [-0.5, 0.5].
//  - Luma is Pillow's L = (19595 R + 38470 G + 7471 B + 32768) >> 16.
//  - ColorJitter consumes the Rng in this order: randperm(4) (Fisher-Yates, randint(0, i) for
//    i = 3, 2, 1), then for each op in that order and enabled, uniform(lo, hi) for its factor
//    just before it is applied (torchvision 0.8; later versions draw the four up front, which is
//    the same distribution).
#pragma once

#include <array>
#include <cstdint>

#include "augment/ops/image.h"
#include "augment/ops/random.h"

namespace xdino::augment {

inline uint8_t luma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

void adjust_brightness(Image& image, double factor);
void adjust_contrast(Image& image, double factor);
void adjust_saturation(Image& image, double factor);
void adjust_hue(Image& image, double hue);
// RGB -> L -> RGB (RandomGrayscale with 3 output channels).
void to_grayscale(Image& image);
// ImageOps.solarize: every value v >= threshold becomes 255 - v.
void solarize(Image& image, int threshold = 128);

// torchvision ColorJitter(brightness, contrast, saturation, hue): factors uniform in
// [max(0, 1 - x), 1 + x] for the first three, [-hue, hue] for hue; 0 disables an op.
struct ColorJitterOptions {
  double brightness = 0.4;
  double contrast = 0.4;
  double saturation = 0.2;
  double hue = 0.1;
};

// One draw of ColorJitter: the order of the ops (0 brightness, 1 contrast, 2 saturation,
// 3 hue) and their factors; a disabled op keeps enabled[op] = false.
struct ColorJitterParams {
  std::array<int, 4> order{0, 1, 2, 3};
  std::array<double, 4> factor{1.0, 1.0, 1.0, 0.0};
  std::array<bool, 4> enabled{false, false, false, false};
};

// Validates the options (negative values, hue > 0.5: xdino::UsageError).
void check_color_jitter_options(const ColorJitterOptions& options);
ColorJitterParams sample_color_jitter(const ColorJitterOptions& options, Rng& rng);
void apply_color_jitter(Image& image, const ColorJitterParams& params);

}  // namespace xdino::augment
