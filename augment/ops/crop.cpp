#include "augment/ops/crop.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace xdino::augment {

int64_t round_half_even(double x) {
  // nearbyint rounds ties to even in the default rounding mode, as Python's round() does.
  return static_cast<int64_t>(std::nearbyint(x));
}

cv::Rect random_resized_crop_box(cv::Size image, double scale_min, double scale_max,
                                 double ratio_min, double ratio_max, Rng& rng) {
  const int64_t width = image.width, height = image.height;
  XDINO_CHECK(width > 0 && height > 0, "random resized crop of an empty image");
  XDINO_CHECK(0 < scale_min && scale_min <= scale_max && 0 < ratio_min && ratio_min <= ratio_max,
              "random resized crop needs 0 < scale_min <= scale_max and 0 < ratio_min <= "
              "ratio_max, got scale (",
              scale_min, ", ", scale_max, ") ratio (", ratio_min, ", ", ratio_max, ")");
  const double area = static_cast<double>(width * height);
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = rng.randint(0, height - h);
      const int64_t left = rng.randint(0, width - w);
      return cv::Rect(static_cast<int>(left), static_cast<int>(top), static_cast<int>(w),
                      static_cast<int>(h));
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio_min) {
    h = round_half_even(static_cast<double>(w) / ratio_min);
  } else if (in_ratio > ratio_max) {
    w = round_half_even(static_cast<double>(h) * ratio_max);
  }
  return cv::Rect(static_cast<int>((width - w) / 2), static_cast<int>((height - h) / 2),
                  static_cast<int>(w), static_cast<int>(h));
}

cv::Rect center_crop_box(cv::Size image, cv::Size crop) {
  XDINO_CHECK(
      crop.width > 0 && crop.height > 0 && crop.width <= image.width && crop.height <= image.height,
      "center crop ", crop, " does not fit in the ", image, " image");
  const int64_t top = round_half_even((image.height - crop.height) / 2.0);
  const int64_t left = round_half_even((image.width - crop.width) / 2.0);
  return cv::Rect(static_cast<int>(left), static_cast<int>(top), crop.width, crop.height);
}

cv::Size resize_shorter_side(cv::Size image, int64_t size) {
  XDINO_CHECK(image.width > 0 && image.height > 0 && size > 0, "cannot resize the ", image,
              " image to shorter side ", size);
  const bool portrait = image.width <= image.height;
  const int64_t shorter = portrait ? image.width : image.height;
  const int64_t longer = portrait ? image.height : image.width;
  // Python: int(size * long / short), a true division then truncation.
  const int64_t new_long =
      static_cast<int64_t>(static_cast<double>(size * longer) / static_cast<double>(shorter));
  return portrait ? cv::Size(static_cast<int>(size), static_cast<int>(new_long))
                  : cv::Size(static_cast<int>(new_long), static_cast<int>(size));
}

void hflip(Image& image) {
  XDINO_CHECK(image.type() == CV_8UC3 || image.depth() == CV_32F,
              "hflip expects an RGB uint8 or a float image, got cv type ", image.type());
  cv::flip(image, image, 1);  // around the vertical axis; in place
}

}  // namespace xdino::augment
