#include "augment/ops/float_blur.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "augment/ops/box_blur_radius.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

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

}  // namespace

void gaussian_blur_float(Image& image, double sigma) {
  check_float_image(image, "gaussian_blur");
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

}  // namespace xdino::augment
