#include "augment/simd.h"

#include <algorithm>

// target_clones needs GCC/Clang on x86-64 with ifunc support (glibc).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define XDINO_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define XDINO_SIMD_CLONES
#endif

namespace xdino::augment::simd {

XDINO_SIMD_CLONES
void weighted_rows(const uint8_t* in, ptrdiff_t stride, const int32_t* k, int taps,
                   uint8_t* out, int n) {
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
    for (int j = 0; j < m; ++j) out[j0 + j] = static_cast<uint8_t>(std::clamp(acc[j] >> 22, 0, 255));
  }
}

XDINO_SIMD_CLONES
void box_line(const uint8_t* const* src, int inner, uint32_t ww, uint32_t fw, uint8_t* out,
              int n) {
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

}  // namespace xdino::augment::simd
