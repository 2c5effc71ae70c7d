#include "augment/ops/float_image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "augment/ops/blur.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

void check_float(const Image& image, const char* what) {
  XDINO_CHECK(is_float_image(image) && image.isContinuous(), what,
              " expects a continuous float32 image, got cv type ", image.type());
}

// torchvision's _blend: (ratio * v + (1 - ratio) * other).clamp(0, 1), the ratio and its
// complement as float32 scalars.
inline float blend(float v, float other, float ratio, float complement) {
  return std::clamp(ratio * v + complement * other, 0.0f, 1.0f);
}

// rgb_to_grayscale's luma, in its float32 operation order.
inline float luma(const float* p) { return 0.2989f * p[0] + 0.587f * p[1] + 0.114f * p[2]; }

// One line of n pixels of c channels, `stride` floats apart: three passes of Pillow's extended
// box (inner taps of weight ww, one edge tap of weight fw on each side, edge pixels repeated).
void box_line(float* line, int n, int c, ptrdiff_t stride, int radius, float ww, float fw,
              std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(n) * c);
  for (int pass = 0; pass < 3; ++pass) {
    for (int x = 0; x < n; ++x)
      for (int k = 0; k < c; ++k) scratch[static_cast<size_t>(x) * c + k] = line[x * stride + k];
    const auto at = [&](int x, int k) {
      return scratch[static_cast<size_t>(std::clamp(x, 0, n - 1)) * c + k];
    };
    for (int x = 0; x < n; ++x) {
      for (int k = 0; k < c; ++k) {
        float inner = 0.0f;
        for (int t = -radius; t <= radius; ++t) inner += at(x + t, k);
        line[x * stride + k] = ww * inner + fw * (at(x - radius - 1, k) + at(x + radius + 1, k));
      }
    }
  }
}

// Rows [0, rows) of a float image region: out[y][x] = sum of weights * in[y][start + t].
void horizontal_float(const float* src, ptrdiff_t src_step, int rows, int c,
                      const FilterWeights& fw, int x0, int out_w, float* dst, ptrdiff_t dst_step) {
  for (int y = 0; y < rows; ++y) {
    const float* in = src + y * src_step;
    float* out = dst + y * dst_step;
    for (int x = 0; x < out_w; ++x) {
      const int xx = x0 + x;
      const double* w = &fw.w[static_cast<size_t>(xx) * fw.ksize];
      for (int k = 0; k < c; ++k) {
        float sum = 0.0f;
        for (int t = 0; t < fw.count[xx]; ++t)
          sum += static_cast<float>(w[t]) * in[(fw.start[xx] + t) * c + k];
        out[x * c + k] = sum;
      }
    }
  }
}

}  // namespace

void convert_channels(Image& image, int64_t channels, const std::string& name) {
  check_float(image, "convert_channels");
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

void resize_window_float(const Image& src, const cv::Rect& box, cv::Size size,
                         const cv::Rect& window, Interpolation filter, Image& dst) {
  check_float(src, "resize");
  const int c = src.channels();
  const bool need_horizontal = size.width != box.width;
  const bool need_vertical = size.height != box.height;
  const int out_w = window.width, out_h = window.height;
  const ptrdiff_t src_step = static_cast<ptrdiff_t>(src.step[0] / sizeof(float));
  const float* base = src.ptr<float>(box.y) + static_cast<ptrdiff_t>(box.x) * c;
  thread_local FilterWeights hw, vw;
  thread_local std::vector<float> temp;
  // The input rows the output window reads (relative to the box), through the vertical pass.
  int first = window.y, last = window.y + out_h;
  if (need_vertical) {
    compute_filter_weights(box.height, 0.0, box.height, size.height, filter, vw);
    first = vw.start[window.y];
    last = vw.start[window.y + out_h - 1] + vw.count[window.y + out_h - 1];
  }
  const ptrdiff_t temp_step = static_cast<ptrdiff_t>(out_w) * c;
  temp.resize(static_cast<size_t>(temp_step) * (last - first));
  if (need_horizontal) {
    compute_filter_weights(box.width, 0.0, box.width, size.width, filter, hw);
    horizontal_float(base + first * src_step, src_step, last - first, c, hw, window.x, out_w,
                     temp.data(), temp_step);
  } else {
    for (int y = first; y < last; ++y)
      std::copy_n(base + y * src_step + static_cast<ptrdiff_t>(window.x) * c, temp_step,
                  temp.data() + (y - first) * temp_step);
  }
  dst.create(window.size(), CV_MAKETYPE(CV_32F, c));
  for (int y = 0; y < out_h; ++y) {
    float* out = dst.ptr<float>(y);
    if (!need_vertical) {
      std::copy_n(temp.data() + (window.y + y - first) * temp_step, temp_step, out);
      continue;
    }
    const int yy = window.y + y;
    const double* w = &vw.w[static_cast<size_t>(yy) * vw.ksize];
    const float* in = temp.data() + (vw.start[yy] - first) * temp_step;
    for (ptrdiff_t j = 0; j < temp_step; ++j) {
      float sum = 0.0f;
      for (int t = 0; t < vw.count[yy]; ++t)
        sum += static_cast<float>(w[t]) * in[t * temp_step + j];
      out[j] = sum;
    }
  }
}

void adjust_brightness_float(Image& image, double factor) {
  check_float(image, "adjust_brightness");
  const float f = static_cast<float>(factor), complement = static_cast<float>(1.0 - factor);
  float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    v[i] = blend(v[i], 0.0f, f, complement);
}

void adjust_contrast_float(Image& image, double factor) {
  check_float(image, "adjust_contrast");
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
  check_float(image, "adjust_saturation");
  if (image.channels() != 3) return;
  const float f = static_cast<float>(factor), complement = static_cast<float>(1.0 - factor);
  float* v = image.ptr<float>();
  for (size_t p = 0, n = image.total(); p < n; ++p, v += 3) {
    const float gray = luma(v);
    for (int k = 0; k < 3; ++k) v[k] = blend(v[k], gray, f, complement);
  }
}

void adjust_hue_float(Image& image, double hue) {
  check_float(image, "adjust_hue");
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
  check_float(image, "to_grayscale");
  if (image.channels() != 3) return;
  float* v = image.ptr<float>();
  for (size_t p = 0, n = image.total(); p < n; ++p, v += 3) v[0] = v[1] = v[2] = luma(v);
}

void gaussian_blur_float(Image& image, double sigma) {
  check_float(image, "gaussian_blur");
  XDINO_CHECK(std::isfinite(sigma) && sigma >= 0, "gaussian_blur sigma must be >= 0, got ", sigma);
  if (image.empty()) return;
  const float radius = box_blur_radius(static_cast<float>(sigma), 3);
  if (radius == 0) return;
  // Pillow's weights without its fixed point: 2R+1 inner taps of 1/(2r+1) and the remainder
  // shared by the two edge taps.
  const int r = static_cast<int>(radius);
  const float ww = 1.0f / (radius * 2 + 1);
  const float fw = (1.0f - static_cast<float>(2 * r + 1) * ww) / 2;
  const int c = image.channels();
  const ptrdiff_t row = static_cast<ptrdiff_t>(image.cols) * c;
  thread_local std::vector<float> scratch;
  float* data = image.ptr<float>();
  for (int y = 0; y < image.rows; ++y)
    box_line(data + y * row, image.cols, c, c, r, ww, fw, scratch);
  for (int x = 0; x < image.cols; ++x)
    box_line(data + static_cast<ptrdiff_t>(x) * c, image.rows, c, row, r, ww, fw, scratch);
}

void solarize_float(Image& image, float threshold) {
  check_float(image, "solarize");
  float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    if (v[i] >= threshold) v[i] = 1.0f - v[i];
}

}  // namespace xdino::augment
