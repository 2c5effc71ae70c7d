// The fractional box radius of Pillow's Gaussian blur, shared by the 8-bit blur (blur.h) and
// the float one (float_blur.h): Pillow's _gaussian_blur_radius for one of `passes` passes, with
// its mix of float and double arithmetic (the radius must round as Pillow's does).
#pragma once

#include <cmath>

namespace xdino::augment {

inline float box_blur_radius(float sigma, int passes) {
  const float sigma2 = sigma * sigma / passes;
  const float box_length = static_cast<float>(std::sqrt(12.0 * sigma2 + 1.0));
  const float l = static_cast<float>(std::floor((box_length - 1.0) / 2.0));
  float a = (2 * l + 1) * (l * (l + 1) - 3 * sigma2);
  a /= 6 * (sigma2 - (l + 1) * (l + 1));
  return l + a;
}

}  // namespace xdino::augment
