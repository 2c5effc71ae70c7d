#include "augment/ops/blur.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "augment/ops/box_blur_radius.h"
#include "augment/ops/float_blur.h"
#include "augment/ops/simd.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

// One pass's weights: 2R+1 inner taps of weight ww and two edge taps of weight fw, 2^24 in all.
struct BoxWeights {
  int radius;
  uint32_t ww, fw;
};

BoxWeights box_weights(float radius) {
  BoxWeights b;
  b.radius = static_cast<int>(radius);
  // Pillow divides in single precision and truncates.
  b.ww = static_cast<uint32_t>(static_cast<float>(1u << 24) / (radius * 2 + 1));
  b.fw = ((1u << 24) - static_cast<uint32_t>(b.radius * 2 + 1) * b.ww) / 2;
  return b;
}

// Three passes along every row; each row stays in L1 through its passes.
void blur_rows(Image& image, const BoxWeights& b, int passes) {
  const int w = image.cols, pad = b.radius + 1, inner = 2 * b.radius + 1;
  thread_local std::vector<uint8_t> padded;
  padded.resize(3 * static_cast<size_t>(w + 2 * pad));
  thread_local std::vector<const uint8_t*> taps;
  taps.resize(inner + 2);
  for (int i = 0; i < inner + 2; ++i) taps[i] = padded.data() + 3 * i;
  for (int y = 0; y < image.rows; ++y) {
    uint8_t* row = image.ptr<uint8_t>(y);
    for (int pass = 0; pass < passes; ++pass) {
      std::memcpy(padded.data() + 3 * pad, row, 3 * static_cast<size_t>(w));
      for (int i = 0; i < pad; ++i) {
        std::memcpy(padded.data() + 3 * i, row, 3);
        std::memcpy(padded.data() + 3 * (pad + w + i), row + 3 * (w - 1), 3);
      }
      simd::box_line(taps.data(), inner, b.ww, b.fw, row, 3 * w);
    }
  }
}

// Three passes along every column, whole image per pass (ping-pong buffers).
void blur_columns(Image& image, const BoxWeights& b, int passes) {
  const int h = image.rows, inner = 2 * b.radius + 1;
  const size_t line = 3 * static_cast<size_t>(image.cols);
  thread_local std::vector<uint8_t> buffer_a, buffer_b;
  buffer_a.resize(line * h);
  buffer_b.resize(line * h);
  thread_local std::vector<const uint8_t*> taps;
  taps.resize(inner + 2);
  const uint8_t* in = image.data;
  for (int pass = 0; pass < passes; ++pass) {
    uint8_t* out = pass == passes - 1 ? image.data : (pass % 2 == 0 ? buffer_a : buffer_b).data();
    for (int y = 0; y < h; ++y) {
      for (int i = 0; i < inner + 2; ++i) {
        const int src_y = std::clamp(y - b.radius - 1 + i, 0, h - 1);
        taps[i] = in + src_y * line;
      }
      simd::box_line(taps.data(), inner, b.ww, b.fw, out + y * line, static_cast<int>(line));
    }
    in = out;
  }
}

}  // namespace

void gaussian_blur(Image& image, double sigma) {
  if (is_float_image(image)) return gaussian_blur_float(image, sigma);
  XDINO_CHECK(image.type() == CV_8UC3 && image.isContinuous(),
              "gaussian_blur expects a continuous RGB uint8 image, got cv type ", image.type());
  XDINO_CHECK(std::isfinite(sigma) && sigma >= 0, "gaussian_blur sigma must be >= 0, got ", sigma);
  if (image.empty()) return;
  constexpr int kPasses = 3;
  const float radius = box_blur_radius(static_cast<float>(sigma), kPasses);
  if (radius == 0) return;
  const BoxWeights b = box_weights(radius);
  blur_rows(image, b, kPasses);
  blur_columns(image, b, kPasses);
}

}  // namespace xdino::augment
