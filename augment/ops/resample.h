// Pillow's resampling filters and their weights along one dimension, shared by the 8-bit resize
// (resize.h, in Pillow's fixed point) and the float pipeline's (float_resize.h, in float32).
//
// Contract: compute_filter_weights(in_size, in0, in1, out_size, filter, weights) fills, for
// each of out_size outputs over the input span [in0, in1) of in_size samples (the box edges as
// Pillow passes them, rounded to float32), the first input index, the number of taps and their
// weights, normalised in double precision to sum 1 (zero-padded to ksize), antialiased when
// downscaling (the filter stretched by in/out), as Pillow's precompute_coeffs. Bicubic uses
// a = -0.5; lanczos (Pillow's ANTIALIAS) is sinc(x) sinc(x/3) on [-3, 3). Thread-safe.
#pragma once

#include <vector>

namespace xdino::augment {

// Pillow's filter ids: LANCZOS (ANTIALIAS) = 1, BILINEAR = 2, BICUBIC = 3.
enum class Interpolation { kBilinear, kBicubic, kLanczos };

// Pillow's resampling weights of one dimension: output index i reads count[i] inputs from
// start[i] with weights w[i * ksize ..] (normalised to sum 1, zero-padded to ksize). The input
// span is [in0, in1) of in_size samples.
template <typename Weight>
struct ResampleTaps {
  int ksize = 0;
  std::vector<int> start;
  std::vector<int> count;
  std::vector<Weight> w;
};
using FilterWeights = ResampleTaps<double>;
void compute_filter_weights(int in_size, double in0, double in1, int out_size, Interpolation filter,
                            FilterWeights& weights);

}  // namespace xdino::augment
