#include "augment/color.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"

namespace xdino::augment {
namespace {

void check_rgb(const Image& image, const char* what) {
  XDINO_CHECK(image.type() == CV_8UC3 && image.isContinuous(), what,
              " expects a continuous RGB uint8 image, got cv type ", image.type());
}

// Pillow's ImagingBlend for one value: single precision, clipped, truncated.
inline uint8_t blend(int degenerate, int value, float alpha) {
  const float t = degenerate + alpha * (value - degenerate);
  if (t <= 0.0f) return 0;
  if (t >= 255.0f) return 255;
  return static_cast<uint8_t>(t);
}

void apply_lut(Image& image, const uint8_t* lut) {
  uint8_t* p = image.data;
  const size_t n = image.total() * 3;
  for (size_t i = 0; i < n; ++i) p[i] = lut[p[i]];
}

inline uint8_t clip8(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// Pillow's rgb2hsv_row (Convert.c), float/double mix included.
inline void rgb_to_hsv(const uint8_t* rgb, uint8_t& h, uint8_t& s) {
  const uint8_t r = rgb[0], g = rgb[1], b = rgb[2];
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  if (minc == maxc) {
    h = s = 0;
    return;
  }
  const float cr = static_cast<float>(maxc - minc);
  const float sat = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr;
  const float gc = static_cast<float>(maxc - g) / cr;
  const float bc = static_cast<float>(maxc - b) / cr;
  float hue;
  if (r == maxc) {
    hue = bc - gc;
  } else if (g == maxc) {
    hue = static_cast<float>(2.0 + rc - bc);
  } else {
    hue = static_cast<float>(4.0 + gc - rc);
  }
  hue = static_cast<float>(std::fmod(hue / 6.0 + 1.0, 1.0));
  h = clip8(static_cast<int>(hue * 255.0));
  s = clip8(static_cast<int>(sat * 255.0));
}

// Pillow's hsv2rgb (Convert.c).
inline void hsv_to_rgb(uint8_t h, uint8_t s, uint8_t v, uint8_t* rgb) {
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const int i = static_cast<int>(std::floor(static_cast<float>(h) * 6.0 / 255.0));
  const float f = static_cast<float>(static_cast<float>(h) * 6.0 / 255.0 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const uint8_t p = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs))));
  const uint8_t q = clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * f))));
  const uint8_t t =
      clip8(static_cast<int>(std::round(static_cast<float>(v) * (1.0 - fs * (1.0 - f)))));
  switch (i % 6) {
    case 0: rgb[0] = v, rgb[1] = t, rgb[2] = p; break;
    case 1: rgb[0] = q, rgb[1] = v, rgb[2] = p; break;
    case 2: rgb[0] = p, rgb[1] = v, rgb[2] = t; break;
    case 3: rgb[0] = p, rgb[1] = q, rgb[2] = v; break;
    case 4: rgb[0] = t, rgb[1] = p, rgb[2] = v; break;
    default: rgb[0] = v, rgb[1] = p, rgb[2] = q; break;
  }
}

}  // namespace

void adjust_brightness(Image& image, double factor) {
  check_rgb(image, "adjust_brightness");
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = blend(0, v, static_cast<float>(factor));
  apply_lut(image, lut);
}

void adjust_contrast(Image& image, double factor) {
  check_rgb(image, "adjust_contrast");
  const size_t n = image.total();
  if (n == 0) return;
  const uint8_t* p = image.data;
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i, p += 3) sum += luma(p[0], p[1], p[2]);
  // ImageStat's mean is a double division; ImageEnhance.Contrast rounds it with int(m + 0.5).
  const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(n) + 0.5);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = blend(mean, v, static_cast<float>(factor));
  apply_lut(image, lut);
}

void adjust_saturation(Image& image, double factor) {
  check_rgb(image, "adjust_saturation");
  const float alpha = static_cast<float>(factor);
  uint8_t* p = image.data;
  const size_t n = image.total();
  for (size_t i = 0; i < n; ++i, p += 3) {
    const int grey = luma(p[0], p[1], p[2]);
    p[0] = blend(grey, p[0], alpha);
    p[1] = blend(grey, p[1], alpha);
    p[2] = blend(grey, p[2], alpha);
  }
}

void adjust_hue(Image& image, double hue) {
  check_rgb(image, "adjust_hue");
  XDINO_CHECK(hue >= -0.5 && hue <= 0.5, "hue factor ", hue, " is not in [-0.5, 0.5]");
  // numpy's uint8(hue * 255): truncation toward zero, a negative value wrapping modulo 256.
  const uint8_t shift = static_cast<uint8_t>(static_cast<int>(hue * 255));
  uint8_t* p = image.data;
  const size_t n = image.total();
  for (size_t i = 0; i < n; ++i, p += 3) {
    uint8_t h, s;
    rgb_to_hsv(p, h, s);
    const uint8_t v = std::max(p[0], std::max(p[1], p[2]));
    hsv_to_rgb(static_cast<uint8_t>(h + shift), s, v, p);
  }
}

void to_grayscale(Image& image) {
  check_rgb(image, "to_grayscale");
  uint8_t* p = image.data;
  const size_t n = image.total();
  for (size_t i = 0; i < n; ++i, p += 3) p[0] = p[1] = p[2] = luma(p[0], p[1], p[2]);
}

void solarize(Image& image, int threshold) {
  check_rgb(image, "solarize");
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v < threshold ? v : 255 - v);
  apply_lut(image, lut);
}

void check_color_jitter_options(const ColorJitterOptions& o) {
  XDINO_CHECK_ARG(o.brightness >= 0 && o.contrast >= 0 && o.saturation >= 0,
                  "color jitter brightness, contrast and saturation must be >= 0, got ",
                  o.brightness, ", ", o.contrast, ", ", o.saturation);
  XDINO_CHECK_ARG(o.hue >= 0 && o.hue <= 0.5, "color jitter hue must be in [0, 0.5], got ",
                  o.hue);
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
      case 0: adjust_brightness(image, f); break;
      case 1: adjust_contrast(image, f); break;
      case 2: adjust_saturation(image, f); break;
      default: adjust_hue(image, f); break;
    }
  }
}

}  // namespace xdino::augment
