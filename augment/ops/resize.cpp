#include "augment/ops/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "augment/ops/float_resize.h"
#include "augment/ops/simd.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

constexpr int kPrecisionBits = 22;  // Pillow: 32 - 8 bits of result - 2 bits of headroom

// The weights of compute_filter_weights in Pillow's 8-bit fixed point.
using Taps = ResampleTaps<int32_t>;

// Input span [in0, in1) of an input of in_size samples (Pillow passes the box edges as floats;
// taps may read past in1 up to in_size).
void compute_taps(int in_size, double in0, double in1, int out_size, Interpolation filter,
                  Taps& taps) {
  thread_local FilterWeights weights;
  compute_filter_weights(in_size, in0, in1, out_size, filter, weights);
  taps.ksize = weights.ksize;
  taps.start = weights.start;
  taps.count = weights.count;
  taps.w.resize(weights.w.size());
  for (size_t i = 0; i < weights.w.size(); ++i) {
    const double v = weights.w[i];
    // Round half away from zero, as Pillow's normalize_coeffs_8bpc.
    taps.w[i] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                      : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
  }
}

// Horizontal pass: rows of RGB pixels are resampled in blocks of kBlockRows rows. A block is
// first transposed to column-major (for every input column, the 3*rows bytes of that column),
// so that each output column is a weighted sum of whole input columns: the same contiguous
// kernel as the vertical pass, vectorised across rows and channels.
constexpr int kBlockRows = 64;
constexpr int kBlockLanes = 3 * kBlockRows;

// Output columns [x0, x0 + out_w) of the resampled rows.
void horizontal_pass(const uint8_t* src, size_t src_step, int rows, int in_w, const Taps& taps,
                     int x0, int out_w, uint8_t* dst, size_t dst_step) {
  thread_local std::vector<uint8_t> columns, out_columns;
  // Only the input columns the window reads are transposed.
  const int c0 = taps.start[x0];
  int c1 = c0;
  for (int x = x0; x < x0 + out_w; ++x) c1 = std::max(c1, taps.start[x] + taps.count[x]);
  columns.resize(static_cast<size_t>(c1 - c0) * kBlockLanes);
  out_columns.resize(static_cast<size_t>(out_w) * kBlockLanes);
  for (int r0 = 0; r0 < rows; r0 += kBlockRows) {
    const int nr = std::min(kBlockRows, rows - r0);
    const int lanes = 3 * nr;
    const uint8_t* block = src + r0 * src_step + 3 * c0;
    uint8_t* col = columns.data();
    for (int x = 0; x < c1 - c0; ++x) {
      for (int r = 0; r < nr; ++r, col += 3) std::memcpy(col, block + r * src_step + 3 * x, 3);
    }
    for (int x = 0; x < out_w; ++x) {
      const uint8_t* in = columns.data() + static_cast<size_t>(taps.start[x0 + x] - c0) * lanes;
      const int32_t* k = &taps.w[static_cast<size_t>(x0 + x) * taps.ksize];
      uint8_t* out = out_columns.data() + static_cast<size_t>(x) * lanes;
      simd::weighted_rows(in, lanes, k, taps.count[x0 + x], out, lanes);
    }
    const uint8_t* out_col = out_columns.data();
    uint8_t* out_block = dst + r0 * dst_step;
    for (int x = 0; x < out_w; ++x) {
      for (int r = 0; r < nr; ++r, out_col += 3)
        std::memcpy(out_block + r * dst_step + 3 * x, out_col, 3);
    }
  }
}

// Output rows [y0, y0 + out_h); src row 0 is input row `src_row0`.
void vertical_pass(const uint8_t* src, size_t src_step, int src_row0, const Taps& taps, int y0,
                   int out_h, int width, uint8_t* dst, size_t dst_step) {
  for (int y = 0; y < out_h; ++y) {
    const int yy = y0 + y;
    simd::weighted_rows(src + (taps.start[yy] - src_row0) * src_step,
                        static_cast<ptrdiff_t>(src_step),
                        &taps.w[static_cast<size_t>(yy) * taps.ksize], taps.count[yy],
                        dst + y * dst_step, 3 * width);
  }
}

void compute_taps(int in_size, int out_size, Interpolation filter, Taps& taps) {
  compute_taps(in_size, 0.0, in_size, out_size, filter, taps);
}

}  // namespace

void resize(const Image& src, const cv::Rect& box, cv::Size size, Interpolation filter,
            Image& dst) {
  resize_window(src, box, size, cv::Rect(0, 0, size.width, size.height), filter, dst);
}

void resize_pillow_box(const Image& src, const std::array<double, 4>& box, cv::Size size,
                       Interpolation filter, Image& dst) {
  XDINO_CHECK(src.type() == CV_8UC3, "resize expects an RGB uint8 image, got cv type ", src.type());
  XDINO_CHECK(box[0] >= 0 && box[1] >= 0 && box[2] > box[0] && box[3] > box[1] &&
                  box[2] <= src.cols && box[3] <= src.rows,
              "resize box is empty or outside the ", src.cols, "x", src.rows, " image");
  XDINO_CHECK(size.width > 0 && size.height > 0, "resize to an empty size ", size);
  XDINO_CHECK(dst.data != src.data || dst.empty(), "resize cannot write into its input");
  const bool need_horizontal = size.width != src.cols || box[0] != 0 || box[2] != src.cols;
  const bool need_vertical = size.height != src.rows || box[1] != 0 || box[3] != src.rows;
  if (!need_horizontal && !need_vertical) {
    dst = src.clone();
    return;
  }
  thread_local Taps htaps, vtaps;
  thread_local std::vector<uint8_t> temp;
  if (need_horizontal) compute_taps(src.cols, box[0], box[2], size.width, filter, htaps);
  if (need_vertical) compute_taps(src.rows, box[1], box[3], size.height, filter, vtaps);
  // Pillow's order: the horizontal pass over the rows the vertical one reads, then vertical.
  const int first = need_vertical ? vtaps.start[0] : 0;
  const int last =
      need_vertical ? vtaps.start[size.height - 1] + vtaps.count[size.height - 1] : src.rows;
  const int width = need_horizontal ? size.width : src.cols;
  const size_t temp_step = 3 * static_cast<size_t>(width);
  temp.resize(temp_step * (last - first));
  if (need_horizontal) {
    horizontal_pass(src.ptr<uint8_t>(first), src.step[0], last - first, src.cols, htaps, 0, width,
                    temp.data(), temp_step);
  } else {
    for (int y = first; y < last; ++y)
      std::memcpy(temp.data() + (y - first) * temp_step, src.ptr<uint8_t>(y), temp_step);
  }
  dst.create(need_vertical ? size.height : last - first, width, CV_8UC3);
  if (!need_vertical) {
    for (int y = 0; y < dst.rows; ++y)
      std::memcpy(dst.ptr<uint8_t>(y), temp.data() + y * temp_step, temp_step);
    return;
  }
  vertical_pass(temp.data(), temp_step, first, vtaps, 0, size.height, width, dst.data, dst.step[0]);
}

Image reduce(const Image& src, int factor_x, int factor_y) {
  XDINO_CHECK(src.type() == CV_8UC3, "reduce expects an RGB uint8 image, got cv type ", src.type());
  XDINO_CHECK(factor_x >= 1 && factor_y >= 1, "reduce factors must be >= 1, got ", factor_x, "x",
              factor_y);
  const int out_w = (src.cols + factor_x - 1) / factor_x;
  const int out_h = (src.rows + factor_y - 1) / factor_y;
  Image dst(out_h, out_w, CV_8UC3);
  for (int y = 0; y < out_h; ++y) {
    const int y0 = y * factor_y, y1 = std::min(y0 + factor_y, src.rows);
    uint8_t* out = dst.ptr<uint8_t>(y);
    for (int x = 0; x < out_w; ++x) {
      const int x0 = x * factor_x, x1 = std::min(x0 + factor_x, src.cols);
      // Pillow's Reduce.c: the block's pixel count n (smaller at the right and bottom edges),
      // sum + n/2, times floor(2^32 / (256 n)) computed in float, shifted by 24: uint32
      // arithmetic throughout, as there.
      const uint32_t n = static_cast<uint32_t>((x1 - x0) * (y1 - y0));
      const uint32_t multiplier = static_cast<uint32_t>(static_cast<float>(1u << 30) * 4.0f /
                                                        static_cast<float>((1u << 8) * n));
      for (int c = 0; c < 3; ++c) {
        uint32_t sum = n / 2;
        for (int yy = y0; yy < y1; ++yy) {
          const uint8_t* row = src.ptr<uint8_t>(yy);
          for (int xx = x0; xx < x1; ++xx) sum += row[3 * xx + c];
        }
        out[3 * x + c] = static_cast<uint8_t>((sum * multiplier) >> 24);
      }
    }
  }
  return dst;
}

void resize_window(const Image& src, const cv::Rect& box, cv::Size size, const cv::Rect& window,
                   Interpolation filter, Image& dst) {
  XDINO_CHECK(src.type() == CV_8UC3 || is_float_image(src),
              "resize expects an RGB uint8 or a float image, got cv type ", src.type());
  XDINO_CHECK(box.width > 0 && box.height > 0 && box.x >= 0 && box.y >= 0 &&
                  box.x + box.width <= src.cols && box.y + box.height <= src.rows,
              "resize box ", box, " is empty or outside the ", src.cols, "x", src.rows, " image");
  XDINO_CHECK(size.width > 0 && size.height > 0, "resize to an empty size ", size);
  XDINO_CHECK(window.width > 0 && window.height > 0 && window.x >= 0 && window.y >= 0 &&
                  window.x + window.width <= size.width && window.y + window.height <= size.height,
              "resize window ", window, " is empty or outside the output size ", size);
  XDINO_CHECK(dst.data != src.data || dst.empty(), "resize cannot write into its input");
  if (is_float_image(src)) return resize_window_float(src, box, size, window, filter, dst);
  dst.create(window.size(), CV_8UC3);

  const uint8_t* base = src.ptr<uint8_t>(box.y) + 3 * box.x;
  const size_t src_step = src.step[0];
  // Pillow skips a pass when that dimension keeps its size (the pass would be the identity).
  const bool need_horizontal = size.width != box.width;
  const bool need_vertical = size.height != box.height;
  const int out_w = window.width, out_h = window.height;

  if (!need_horizontal && !need_vertical) {
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(dst.ptr<uint8_t>(y), base + (window.y + y) * src_step + 3 * window.x,
                  3 * static_cast<size_t>(out_w));
    }
    return;
  }
  thread_local Taps htaps, vtaps;
  thread_local std::vector<uint8_t> temp;
  if (!need_vertical) {
    compute_taps(box.width, size.width, filter, htaps);
    horizontal_pass(base + window.y * src_step, src_step, out_h, box.width, htaps, window.x, out_w,
                    dst.data, dst.step[0]);
    return;
  }
  compute_taps(box.height, size.height, filter, vtaps);
  if (!need_horizontal) {
    vertical_pass(base + 3 * window.x, src_step, 0, vtaps, window.y, out_h, out_w, dst.data,
                  dst.step[0]);
    return;
  }
  // Only the rows the vertical pass reads go through the horizontal pass.
  const int first = vtaps.start[window.y];
  const int last = vtaps.start[window.y + out_h - 1] + vtaps.count[window.y + out_h - 1];
  compute_taps(box.width, size.width, filter, htaps);
  const size_t temp_step = 3 * static_cast<size_t>(out_w);
  temp.resize(temp_step * (last - first));
  horizontal_pass(base + first * src_step, src_step, last - first, box.width, htaps, window.x,
                  out_w, temp.data(), temp_step);
  vertical_pass(temp.data(), temp_step, first, vtaps, window.y, out_h, out_w, dst.data,
                dst.step[0]);
}

}  // namespace xdino::augment
