// PIL-exact resampling of RGB images (Pillow's Image.resize with BILINEAR, BICUBIC or LANCZOS,
// and Image.reduce).
// Hand-written on purpose: cv::resize uses other filter supports and fixed-point rounding, so
// its crops differ from torchvision's by a few levels (docs/architecture.md).
//
// Contract:
//  - resize(src, box, size, filter, dst) gives, bit for bit, what Pillow gives for
//    src.crop(box).resize(size, filter): the crop is a separate image, so filter taps never
//    reach outside `box` (this is torchvision's resized_crop; it is NOT Pillow's resize(box=),
//    which reads pixels around the box).
//  - Pillow's algorithm: separable, horizontal pass then vertical pass, each skipped when that
//    dimension keeps its size, uint8 rounding after each pass; antialiased when downscaling
//    (the filter is stretched by in/out); coefficients normalised in double precision and
//    rounded to 22 fractional bits; bicubic uses a = -0.5 (not OpenCV's or LibTorch's -0.75);
//    lanczos (Pillow's ANTIALIAS) is sinc(x) sinc(x/3) on [-3, 3).
//  - resize_pillow_box(src, box, size, filter, dst) is Pillow's own resize(size, filter, box=):
//    the box edges are floats (rounded to float32, as Pillow parses them) and the filter taps
//    read the pixels around the box, up to the image's edges. Used after reduce() by
//    thumbnail (augment/eval_transforms.h).
//  - reduce(src, fx, fy) is Pillow's Image.reduce((fx, fy)): the mean of each fx x fy block
//    (partial blocks at the right and bottom edges average what they have), rounded with
//    Pillow's fixed-point multiplier; output ceil(W/fx) x ceil(H/fy).
//  - The weights are resample.h's. resize and resize_window also take float images of any
//    channel count (the float pipeline, augment/ops/float_resize.h).
//  - Otherwise src and dst are Images (CV_8UC3, continuous); dst is (re)allocated to `size` and
//    must not share memory with src. box must lie inside src and be non-empty, size positive,
//    window inside size: violations throw xdino::Error.
//  - Thread-safe: scratch buffers are per thread.
#pragma once

#include <array>
#include <opencv2/core.hpp>
#include <vector>

#include "augment/ops/image.h"
#include "augment/ops/resample.h"

namespace xdino::augment {

void resize(const Image& src, const cv::Rect& box, cv::Size size, Interpolation filter, Image& dst);

// Only the pixels of `window` (inside the size x size output) of the same resize, computed
// without the rest: resize-then-crop at the cost of the crop. dst gets window.size().
void resize_window(const Image& src, const cv::Rect& box, cv::Size size, const cv::Rect& window,
                   Interpolation filter, Image& dst);

// box = (x0, y0, x1, y1) in src pixels.
void resize_pillow_box(const Image& src, const std::array<double, 4>& box, cv::Size size,
                       Interpolation filter, Image& dst);

Image reduce(const Image& src, int factor_x, int factor_y);

inline Image resize(const Image& src, cv::Size size, Interpolation filter) {
  Image dst;
  resize(src, cv::Rect(0, 0, src.cols, src.rows), size, filter, dst);
  return dst;
}

}  // namespace xdino::augment
