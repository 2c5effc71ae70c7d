#include "augment/ops/resample.h"

#include <algorithm>
#include <cmath>

namespace xdino::augment {
namespace {

// Pillow's kernels, with its operation order (results must round the same way).
double bilinear_kernel(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic_kernel(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos_kernel(double x) {
  if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
  return 0.0;
}

}  // namespace

void compute_filter_weights(int in_size, double in0, double in1, int out_size, Interpolation filter,
                            FilterWeights& weights) {
  double (*kernel)(double) = filter == Interpolation::kBicubic   ? bicubic_kernel
                             : filter == Interpolation::kLanczos ? lanczos_kernel
                                                                 : bilinear_kernel;
  const double filter_support = filter == Interpolation::kBicubic   ? 2.0
                                : filter == Interpolation::kLanczos ? 3.0
                                                                    : 1.0;
  in0 = static_cast<float>(in0);
  in1 = static_cast<float>(in1);
  const double scale = (in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = filter_support * filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  const double ss = 1.0 / filterscale;

  weights.ksize = ksize;
  weights.start.resize(out_size);
  weights.count.resize(out_size);
  weights.w.assign(static_cast<size_t>(out_size) * ksize, 0.0);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = xmax - xmin;
    double* w = &weights.w[static_cast<size_t>(xx) * ksize];
    double sum = 0.0;
    for (int x = 0; x < n; ++x) {
      w[x] = kernel((x + xmin - center + 0.5) * ss);
      sum += w[x];
    }
    if (sum != 0.0)
      for (int x = 0; x < n; ++x) w[x] /= sum;
    weights.start[xx] = xmin;
    weights.count[xx] = n;
  }
}

}  // namespace xdino::augment
