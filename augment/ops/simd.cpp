#include "augment/ops/simd.h"

#include <algorithm>

// target_clones needs GCC/Clang on x86-64 with ifunc support (glibc).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define XDINO_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XDINO_SIMD_CLONES
#endif

namespace xdino::augment::simd {

XDINO_SIMD_CLONES
void weighted_rows(const uint8_t* in, ptrdiff_t stride, const int32_t* k, int taps, uint8_t* out,
                   int n) {
  // Accumulators in a small array, taps in the outer loop: the inner loops are the shape the
  // vectoriser turns into widen-multiply-add over whole registers.
  constexpr int kChunk = 512;
  int32_t acc[kChunk];
  for (int j0 = 0; j0 < n; j0 += kChunk) {
    const int m = std::min(kChunk, n - j0);
    const uint8_t* p = in + j0;
    const int32_t k0 = k[0];
    for (int j = 0; j < m; ++j) acc[j] = (1 << 21) + p[j] * k0;
    for (int t = 1; t < taps; ++t) {
      p = in + t * stride + j0;
      const int32_t kt = k[t];
      for (int j = 0; j < m; ++j) acc[j] += p[j] * kt;
    }
    for (int j = 0; j < m; ++j)
      out[j0 + j] = static_cast<uint8_t>(std::clamp(acc[j] >> 22, 0, 255));
  }
}

XDINO_SIMD_CLONES
void box_line(const uint8_t* const* src, int inner, uint32_t ww, uint32_t fw, uint8_t* out, int n) {
  constexpr int kChunk = 512;
  uint32_t sum[kChunk];
  for (int j0 = 0; j0 < n; j0 += kChunk) {
    const int m = std::min(kChunk, n - j0);
    const uint8_t* p = src[1] + j0;
    for (int j = 0; j < m; ++j) sum[j] = p[j];
    for (int t = 2; t <= inner; ++t) {
      p = src[t] + j0;
      for (int j = 0; j < m; ++j) sum[j] += p[j];
    }
    const uint8_t* a = src[0] + j0;
    const uint8_t* b = src[inner + 1] + j0;
    for (int j = 0; j < m; ++j) {
      const uint32_t far = static_cast<uint32_t>(a[j]) + b[j];
      out[j0 + j] = static_cast<uint8_t>((sum[j] * ww + far * fw + (1u << 23)) >> 24);
    }
  }
}

namespace {

inline int luma(const uint8_t* p) {
  return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16;
}

inline uint8_t blend_value(int d, int v, float alpha) {
  const float t = static_cast<float>(d) + alpha * static_cast<float>(v - d);
  return static_cast<uint8_t>(static_cast<int>(std::clamp(t, 0.0f, 255.0f)));
}

}  // namespace

XDINO_SIMD_CLONES
uint64_t luma_sum(const uint8_t* rgb, int n) {
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<uint32_t>(luma(rgb + 3 * i));
  return sum;
}

XDINO_SIMD_CLONES
void grayscale(uint8_t* rgb, int n) {
  for (int i = 0; i < n; ++i) {
    const uint8_t l = static_cast<uint8_t>(luma(rgb + 3 * i));
    rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = l;
  }
}

XDINO_SIMD_CLONES
void blend_constant(uint8_t* v, int n, int degenerate, float alpha) {
  for (int i = 0; i < n; ++i) v[i] = blend_value(degenerate, v[i], alpha);
}

XDINO_SIMD_CLONES
void saturate(uint8_t* rgb, int n, float alpha) {
  for (int i = 0; i < n; ++i) {
    const int l = luma(rgb + 3 * i);
    rgb[3 * i] = blend_value(l, rgb[3 * i], alpha);
    rgb[3 * i + 1] = blend_value(l, rgb[3 * i + 1], alpha);
    rgb[3 * i + 2] = blend_value(l, rgb[3 * i + 2], alpha);
  }
}

}  // namespace xdino::augment::simd
