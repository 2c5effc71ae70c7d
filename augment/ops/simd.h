// Inner loops of the augmentation kernels, compiled twice (AVX2 and baseline) on x86-64 and
// picked at load time, so that one binary runs everywhere and uses AVX2 where it exists.
//
// Contract: plain loops over contiguous uint8 lanes; no allocation, no state, thread-safe.
// Results are integer-exact, identical on every code path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xdino::augment::simd {

// out[j] = clamp((2^21 + sum_t k[t] * in[t * stride + j]) >> 22, 0, 255) for j < n: one
// output line of Pillow's 8-bit resampling (22-bit fixed-point weights, taps > 0).
void weighted_rows(const uint8_t* in, ptrdiff_t stride, const int32_t* k, int taps, uint8_t* out,
                   int n);

// out[j] = (ww * sum_{t=1..inner} src[t][j] + fw * (src[0][j] + src[inner+1][j]) + 2^23) >> 24
// for j < n: one line of Pillow's extended box blur (2^24 fixed point, uint32 arithmetic).
void box_line(const uint8_t* const* src, int inner, uint32_t ww, uint32_t fw, uint8_t* out, int n);

// Pillow's luma of n RGB pixels: (19595 R + 38470 G + 7471 B + 32768) >> 16.
uint64_t luma_sum(const uint8_t* rgb, int n);
void grayscale(uint8_t* rgb, int n);  // every pixel becomes (L, L, L)

// Pillow's blend with factor alpha, in place: v = trunc(clip(d + alpha * (v - d))) in single
// precision, with d a constant (blend_constant, n values) or each pixel's luma (saturate, n
// RGB pixels).
void blend_constant(uint8_t* v, int n, int degenerate, float alpha);
void saturate(uint8_t* rgb, int n, float alpha);

}  // namespace xdino::augment::simd
