#include "augment/ops/float_image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace xdino::augment {
namespace {

// torchvision's _blend: (ratio * v + (1 - ratio) * other).clamp(0, 1), the ratio and its
// complement as float32 scalars.
inline float blend(float v, float other, float ratio, float complement) {
  return std::clamp(ratio * v + complement * other, 0.0f, 1.0f);
}

// rgb_to_grayscale's luma, in its float32 operation order.
inline float luma(const float* p) { return 0.2989f * p[0] + 0.587f * p[1] + 0.114f * p[2]; }

}  // namespace

void convert_channels(Image& image, int64_t channels, const std::string& name) {
  check_float_image(image, "convert_channels");
  const int stored = image.channels();
  if (stored == channels) return;
  if (stored == 1 && channels == 3) {
    cv::cvtColor(image, image, cv::COLOR_GRAY2RGB);
  } else if (stored == 4 && channels == 3) {
    cv::cvtColor(image, image, cv::COLOR_RGBA2RGB);
  } else if ((stored == 3 || stored == 4) && channels == 1) {
    Image gray(image.size(), CV_32FC1);
    const float* p = image.ptr<float>();
    float* out = gray.ptr<float>();
    for (size_t i = 0, n = image.total(); i < n; ++i, p += stored)
      out[i] = 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
    image = gray;
  } else {
    XDINO_FAIL(name, " has ", stored, " channels and --in_chans is ", channels,
               " (only 1 -> 3, 4 -> 3 and 3 or 4 -> 1 are converted)");
  }
}

void adjust_brightness_float(Image& image, double factor) {
  check_float_image(image, "adjust_brightness");
  const float f = static_cast<float>(factor), complement = static_cast<float>(1.0 - factor);
  float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    v[i] = blend(v[i], 0.0f, f, complement);
}

void adjust_contrast_float(Image& image, double factor) {
  check_float_image(image, "adjust_contrast");
  const int c = image.channels();
  const size_t pixels = image.total(), n = pixels * c;
  if (n == 0) return;
  float* v = image.ptr<float>();
  double sum = 0.0;
  if (c == 3) {
    for (size_t p = 0; p < pixels; ++p) sum += luma(v + 3 * p);
    sum /= static_cast<double>(pixels);
  } else {
    for (size_t i = 0; i < n; ++i) sum += v[i];
    sum /= static_cast<double>(n);
  }
  const float mean = static_cast<float>(sum);
  const float f = static_cast<float>(factor), complement = static_cast<float>(1.0 - factor);
  for (size_t i = 0; i < n; ++i) v[i] = blend(v[i], mean, f, complement);
}

void adjust_saturation_float(Image& image, double factor) {
  check_float_image(image, "adjust_saturation");
  if (image.channels() != 3) return;
  const float f = static_cast<float>(factor), complement = static_cast<float>(1.0 - factor);
  float* v = image.ptr<float>();
  for (size_t p = 0, n = image.total(); p < n; ++p, v += 3) {
    const float gray = luma(v);
    for (int k = 0; k < 3; ++k) v[k] = blend(v[k], gray, f, complement);
  }
}

void adjust_hue_float(Image& image, double hue) {
  check_float_image(image, "adjust_hue");
  XDINO_CHECK(hue >= -0.5 && hue <= 0.5, "hue factor ", hue, " is not in [-0.5, 0.5]");
  if (image.channels() != 3) return;
  const float shift = static_cast<float>(hue);
  float* px = image.ptr<float>();
  for (size_t p = 0, n = image.total(); p < n; ++p, px += 3) {
    // torchvision's _rgb2hsv, operation by operation.
    const float r = px[0], g = px[1], b = px[2];
    const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0f : maxc);
    const float divisor = eqc ? 1.0f : cr;
    const float rc = (maxc - r) / divisor, gc = (maxc - g) / divisor, bc = (maxc - b) / divisor;
    float h = maxc == r ? bc - gc : maxc == g ? 2.0f + rc - bc : 4.0f + gc - rc;
    h = std::fmod(h / 6.0f + 1.0f, 1.0f);
    // (h + hue) % 1.0, Python's modulo (the sign of the divisor).
    h += shift;
    h -= std::floor(h);
    // _hsv2rgb.
    const float v = maxc;
    const float i_f = std::floor(h * 6.0f);
    const float f = h * 6.0f - i_f;
    const int i = ((static_cast<int>(i_f) % 6) + 6) % 6;
    const float pp = std::clamp(v * (1.0f - s), 0.0f, 1.0f);
    const float q = std::clamp(v * (1.0f - s * f), 0.0f, 1.0f);
    const float t = std::clamp(v * (1.0f - s * (1.0f - f)), 0.0f, 1.0f);
    const float table[6][3] = {{v, t, pp}, {q, v, pp}, {pp, v, t},
                               {pp, q, v}, {t, pp, v}, {v, pp, q}};
    for (int k = 0; k < 3; ++k) px[k] = table[i][k];
  }
}

void to_grayscale_float(Image& image) {
  check_float_image(image, "to_grayscale");
  if (image.channels() != 3) return;
  float* v = image.ptr<float>();
  for (size_t p = 0, n = image.total(); p < n; ++p, v += 3) v[0] = v[1] = v[2] = luma(v);
}

void solarize_float(Image& image, float threshold) {
  check_float_image(image, "solarize");
  float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    if (v[i] >= threshold) v[i] = 1.0f - v[i];
}

}  // namespace xdino::augment
