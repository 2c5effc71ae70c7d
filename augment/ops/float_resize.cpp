#include "augment/ops/float_resize.h"

#include <algorithm>
#include <vector>

#include "core/check.h"

namespace xdino::augment {
namespace {

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

void resize_window_float(const Image& src, const cv::Rect& box, cv::Size size,
                         const cv::Rect& window, Interpolation filter, Image& dst) {
  check_float_image(src, "resize");
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

}  // namespace xdino::augment
