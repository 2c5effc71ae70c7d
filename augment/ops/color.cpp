#include "augment/ops/color.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <utility>
#include <vector>

#include "augment/ops/float_image.h"
#include "augment/ops/hue.h"
#include "augment/ops/simd.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

void check_rgb(const Image& image, const char* what) {
  XDINO_CHECK(image.type() == CV_8UC3 && image.isContinuous(), what,
              " expects a continuous RGB uint8 image, got cv type ", image.type());
}

}  // namespace

void adjust_brightness(Image& image, double factor) {
  if (is_float_image(image)) return adjust_brightness_float(image, factor);
  check_rgb(image, "adjust_brightness");
  simd::blend_constant(image.data, static_cast<int>(3 * image.total()), 0,
                       static_cast<float>(factor));
}

void adjust_contrast(Image& image, double factor) {
  if (is_float_image(image)) return adjust_contrast_float(image, factor);
  check_rgb(image, "adjust_contrast");
  const size_t n = image.total();
  if (n == 0) return;
  const uint64_t sum = simd::luma_sum(image.data, static_cast<int>(n));
  // ImageStat's mean is a double division; ImageEnhance.Contrast rounds it with int(m + 0.5).
  const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5);
  simd::blend_constant(image.data, static_cast<int>(3 * n), mean, static_cast<float>(factor));
}

void adjust_saturation(Image& image, double factor) {
  if (is_float_image(image)) return adjust_saturation_float(image, factor);
  check_rgb(image, "adjust_saturation");
  simd::saturate(image.data, static_cast<int>(image.total()), static_cast<float>(factor));
}

void adjust_hue(Image& image, double hue) {
  if (is_float_image(image)) return adjust_hue_float(image, hue);
  check_rgb(image, "adjust_hue");
  XDINO_CHECK(hue >= -0.5 && hue <= 0.5, "hue factor ", hue, " is not in [-0.5, 0.5]");
  // numpy's uint8(hue * 255): truncation toward zero, a negative value wrapping modulo 256.
  const uint8_t shift = static_cast<uint8_t>(static_cast<int>(hue * 255));
  hue_shift(image.data, image.total(), shift);
}

void to_grayscale(Image& image) {
  if (is_float_image(image)) return to_grayscale_float(image);
  check_rgb(image, "to_grayscale");
  simd::grayscale(image.data, static_cast<int>(image.total()));
}

void solarize(Image& image, int threshold) {
  if (is_float_image(image)) return solarize_float(image, static_cast<float>(threshold) / 255.0f);
  check_rgb(image, "solarize");
  // A 256-entry table: OpenCV's LUT is vectorised, and a table is exact by construction.
  cv::Mat table(1, 256, CV_8U);
  for (int v = 0; v < 256; ++v)
    table.at<uint8_t>(v) = static_cast<uint8_t>(v >= threshold ? 255 - v : v);
  cv::LUT(image, table, image);
}

void check_color_jitter_options(const ColorJitterOptions& o) {
  XDINO_CHECK_ARG(o.brightness >= 0 && o.contrast >= 0 && o.saturation >= 0,
                  "color jitter brightness, contrast and saturation must be >= 0, got ",
                  o.brightness, ", ", o.contrast, ", ", o.saturation);
  XDINO_CHECK_ARG(o.hue >= 0 && o.hue <= 0.5, "color jitter hue must be in [0, 0.5], got ", o.hue);
}

ColorJitterParams sample_color_jitter(const ColorJitterOptions& o, Rng& rng) {
  ColorJitterParams params;
  for (int i = 3; i > 0; --i) std::swap(params.order[i], params.order[rng.randint(0, i)]);
  const double amount[4] = {o.brightness, o.contrast, o.saturation, o.hue};
  for (const int op : params.order) {
    if (amount[op] == 0) continue;
    params.enabled[op] = true;
    params.factor[op] = op == 3 ? rng.uniform(-amount[op], amount[op])
                                : rng.uniform(std::max(0.0, 1 - amount[op]), 1 + amount[op]);
  }
  return params;
}

void apply_color_jitter(Image& image, const ColorJitterParams& params) {
  for (const int op : params.order) {
    if (!params.enabled[op]) continue;
    const double f = params.factor[op];
    switch (op) {
      case 0:
        adjust_brightness(image, f);
        break;
      case 1:
        adjust_contrast(image, f);
        break;
      case 2:
        adjust_saturation(image, f);
        break;
      default:
        adjust_hue(image, f);
        break;
    }
  }
}

}  // namespace xdino::augment
