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

// One pass of Pillow's extended box over `count` lines of `width` values each, the lines
// `step` floats apart, along the lines' order (out[i] from in[i - r - 1 .. i + r + 1], edges
// repeated): inner taps of weight ww, the two outer ones fw. Running sums in double, one
// vector of them across the `width` values, so both directions read memory in order.
void box_pass(const float* in, float* out, int count, ptrdiff_t step, int width, int radius,
              double ww, double fw, std::vector<double>& sum) {
  const auto line = [&](int i) { return in + std::clamp(i, 0, count - 1) * step; };
  sum.assign(width, 0.0);
  for (int t = -radius; t <= radius; ++t) {
    const float* l = line(t);
    for (int j = 0; j < width; ++j) sum[j] += l[j];
  }
  for (int i = 0; i < count; ++i) {
    const float *before = line(i - radius - 1), *after = line(i + radius + 1);
    float* o = out + i * step;
    for (int j = 0; j < width; ++j)
      o[j] = static_cast<float>(ww * sum[j] + fw * (before[j] + after[j]));
    // Slide the window: i - radius leaves, i + radius + 1 enters.
    const float* leaving = line(i - radius);
    for (int j = 0; j < width; ++j) sum[j] += static_cast<double>(after[j]) - leaving[j];
  }
}

// One dimension's weights as float32, the precision the passes multiply in.
using FloatTaps = ResampleTaps<float>;

void to_float_taps(const FilterWeights& in, FloatTaps& out) {
  out.ksize = in.ksize;
  out.start = in.start;
  out.count = in.count;
  out.w.assign(in.w.begin(), in.w.end());
}

// Rows [0, rows) of a float image region: out[y][x] = sum of weights * in[y][start + t]. C
// channels known at compile time keep the sums in registers (kC 0: c at run time).
template <int kC>
void horizontal_float(const float* src, ptrdiff_t src_step, int rows, int c, const FloatTaps& ft,
                      int x0, int out_w, float* dst, ptrdiff_t dst_step) {
  const int channels = kC > 0 ? kC : c;
  std::vector<float> dynamic(kC > 0 ? 0 : c);
  float fixed[kC > 0 ? kC : 1];
  float* acc = kC > 0 ? fixed : dynamic.data();
  for (int y = 0; y < rows; ++y) {
    const float* in = src + y * src_step;
    float* out = dst + y * dst_step;
    for (int x = 0; x < out_w; ++x) {
      const int xx = x0 + x;
      const float* w = &ft.w[static_cast<size_t>(xx) * ft.ksize];
      const float* px = in + static_cast<ptrdiff_t>(ft.start[xx]) * channels;
      for (int k = 0; k < channels; ++k) acc[k] = 0.0f;
      for (int t = 0; t < ft.count[xx]; ++t, px += channels)
        for (int k = 0; k < channels; ++k) acc[k] += w[t] * px[k];
      for (int k = 0; k < channels; ++k) out[static_cast<ptrdiff_t>(x) * channels + k] = acc[k];
    }
  }
}

using HorizontalPass = void (*)(const float*, ptrdiff_t, int, int, const FloatTaps&, int, int,
                                float*, ptrdiff_t);

HorizontalPass horizontal_pass_for(int c) {
  switch (c) {
    case 1:
      return horizontal_float<1>;
    case 3:
      return horizontal_float<3>;
    case 4:
      return horizontal_float<4>;
    default:
      return horizontal_float<0>;
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
  thread_local FilterWeights weights;
  thread_local FloatTaps hw, vw;
  thread_local std::vector<float> temp;
  // The input rows the output window reads (relative to the box), through the vertical pass.
  int first = window.y, last = window.y + out_h;
  if (need_vertical) {
    compute_filter_weights(box.height, 0.0, box.height, size.height, filter, weights);
    to_float_taps(weights, vw);
    first = vw.start[window.y];
    last = vw.start[window.y + out_h - 1] + vw.count[window.y + out_h - 1];
  }
  const ptrdiff_t temp_step = static_cast<ptrdiff_t>(out_w) * c;
  temp.resize(static_cast<size_t>(temp_step) * (last - first));
  if (need_horizontal) {
    compute_filter_weights(box.width, 0.0, box.width, size.width, filter, weights);
    to_float_taps(weights, hw);
    horizontal_pass_for(c)(base + first * src_step, src_step, last - first, c, hw, window.x, out_w,
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
    // Whole rows times each weight, in order: contiguous and vectorisable.
    const int yy = window.y + y;
    const float* w = &vw.w[static_cast<size_t>(yy) * vw.ksize];
    const float* in = temp.data() + (vw.start[yy] - first) * temp_step;
    std::fill(out, out + temp_step, 0.0f);
    for (int t = 0; t < vw.count[yy]; ++t, in += temp_step)
      for (ptrdiff_t j = 0; j < temp_step; ++j) out[j] += w[t] * in[j];
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
  const double ww = 1.0 / (static_cast<double>(radius) * 2 + 1);
  const double fw = (1.0 - (2 * r + 1) * ww) / 2;
  if (image.elemSize() > 32) {  // more than cv::transpose takes: channel by channel
    std::vector<cv::Mat> planes;
    cv::split(image, planes);
    for (cv::Mat& p : planes) gaussian_blur_float(p, sigma);
    cv::merge(planes, image);
    return;
  }
  const int c = image.channels(), w = image.cols, h = image.rows;
  const ptrdiff_t row = static_cast<ptrdiff_t>(w) * c;
  thread_local std::vector<double> sum;
  thread_local std::vector<float> column;
  float* data = image.ptr<float>();
  // Along the rows first, as Pillow: the passes of the columns of the transposed image.
  const auto three_passes = [&](float* lines, int count, int width) {
    column.resize(static_cast<size_t>(count) * width);
    box_pass(lines, column.data(), count, width, width, r, ww, fw, sum);
    box_pass(column.data(), lines, count, width, width, r, ww, fw, sum);
    box_pass(lines, column.data(), count, width, width, r, ww, fw, sum);
    std::copy(column.begin(), column.end(), lines);
  };
  cv::Mat transposed;
  cv::transpose(image, transposed);  // w rows of h pixels
  three_passes(transposed.ptr<float>(), w, h * c);
  cv::transpose(transposed, image);
  // Along the columns: h lines of a whole row each, read row by row.
  three_passes(data, h, static_cast<int>(row));
}

void solarize_float(Image& image, float threshold) {
  check_float(image, "solarize");
  float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    if (v[i] >= threshold) v[i] = 1.0f - v[i];
}

}  // namespace xdino::augment
