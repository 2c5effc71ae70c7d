#include "augment/ops/hue.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define XDINO_HUE_AVX2 1
#endif

namespace xdino::augment {
namespace {

inline uint8_t clip8(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// C's round() (half away from zero) for x >= 0 without a libm call: the fractional part of a
// double is exact, so comparing it with 0.5 decides as round() does.
inline int round_nonnegative(double x) {
  const int i = static_cast<int>(x);
  return x - i >= 0.5 ? i + 1 : i;
}

// Pillow's rgb2hsv_row with its float/double mix. fmod(x, 1) for x in [5/6, 11/6] is x or
// x - 1, both exact.
inline void rgb_to_hsv(const uint8_t* rgb, uint8_t& h, uint8_t& s) {
  const uint8_t r = rgb[0], g = rgb[1], b = rgb[2];
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  if (minc == maxc) {
    h = s = 0;
    return;
  }
  const float cr = static_cast<float>(maxc - minc);
  const float sat = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr;
  const float gc = static_cast<float>(maxc - g) / cr;
  const float bc = static_cast<float>(maxc - b) / cr;
  float hue;
  if (r == maxc) {
    hue = bc - gc;
  } else if (g == maxc) {
    hue = static_cast<float>(2.0 + rc - bc);
  } else {
    hue = static_cast<float>(4.0 + gc - rc);
  }
  double turn = hue / 6.0 + 1.0;
  if (turn >= 1.0) turn -= 1.0;
  hue = static_cast<float>(turn);
  h = clip8(static_cast<int>(hue * 255.0));
  s = clip8(static_cast<int>(sat * 255.0));
}

// Pillow's hsv2rgb; h * 6 / 255 >= 0, so its floor is a truncation.
inline void hsv_to_rgb(uint8_t h, uint8_t s, uint8_t v, uint8_t* rgb) {
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const double h6 = static_cast<float>(h) * 6.0 / 255.0;
  const int i = static_cast<int>(h6);
  const float f = static_cast<float>(h6 - static_cast<float>(i));
  const float fs = static_cast<float>(static_cast<float>(s) / 255.0);
  const float fv = static_cast<float>(v);
  const uint8_t p = clip8(round_nonnegative(fv * (1.0 - fs)));
  const uint8_t q = clip8(round_nonnegative(fv * (1.0 - fs * f)));
  const uint8_t t = clip8(round_nonnegative(fv * (1.0 - fs * (1.0 - f))));
  switch (i % 6) {
    case 0:
      rgb[0] = v, rgb[1] = t, rgb[2] = p;
      break;
    case 1:
      rgb[0] = q, rgb[1] = v, rgb[2] = p;
      break;
    case 2:
      rgb[0] = p, rgb[1] = v, rgb[2] = t;
      break;
    case 3:
      rgb[0] = p, rgb[1] = q, rgb[2] = v;
      break;
    case 4:
      rgb[0] = t, rgb[1] = p, rgb[2] = v;
      break;
    default:
      rgb[0] = v, rgb[1] = p, rgb[2] = q;
      break;
  }
}

// hsv_to_rgb's values that depend on the H byte (sector i % 6 and fraction f) or the S byte
// (fs), computed by the same expressions.
struct HsvTables {
  int32_t sector[256];
  float f[256];
  float fs[256];
};

const HsvTables& hsv_tables() {
  static const HsvTables tables = [] {
    HsvTables t;
    for (int v = 0; v < 256; ++v) {
      const double h6 = static_cast<float>(v) * 6.0 / 255.0;
      const int i = static_cast<int>(h6);
      t.sector[v] = i % 6;
      t.f[v] = static_cast<float>(h6 - static_cast<float>(i));
      t.fs[v] = static_cast<float>(static_cast<float>(v) / 255.0);
    }
    return t;
  }();
  return tables;
}

#ifdef XDINO_HUE_AVX2
#define XDINO_AVX2 __attribute__((target("avx2")))

// round() of non-negative doubles, as round_nonnegative.
XDINO_AVX2 inline __m256d round_half_up(__m256d x) {
  const __m256d i = _mm256_round_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256d up = _mm256_cmp_pd(_mm256_sub_pd(x, i), _mm256_set1_pd(0.5), _CMP_GE_OQ);
  return _mm256_add_pd(i, _mm256_and_pd(up, _mm256_set1_pd(1.0)));
}

// 8 float lanes -> two halves of 4 doubles and back.
XDINO_AVX2 inline __m256d lo_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
XDINO_AVX2 inline __m256d hi_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }
XDINO_AVX2 inline __m256 join_ps(__m256d lo, __m256d hi) {
  return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}
XDINO_AVX2 inline __m256i join_trunc(__m256d lo, __m256d hi) {
  return _mm256_set_m128i(_mm256_cvttpd_epi32(hi), _mm256_cvttpd_epi32(lo));
}
XDINO_AVX2 inline __m256d lo_pd(__m256i x) { return _mm256_cvtepi32_pd(_mm256_castsi256_si128(x)); }
XDINO_AVX2 inline __m256d hi_pd(__m256i x) {
  return _mm256_cvtepi32_pd(_mm256_extracti128_si256(x, 1));
}

// value where mask is set, base elsewhere.
XDINO_AVX2 inline __m256i pick(__m256i base, __m256i mask, __m256i value) {
  return _mm256_blendv_epi8(base, value, mask);
}

// The same arithmetic as rgb_to_hsv + hsv_to_rgb on 8 pixels (r, g, b as int32 lanes).
// Which of rc, gc, bc is 1 is known from the min channel, so one division x = d / cr gives
// the hue: h = A + sign * x, exact in double, rounded once to float as Pillow's expressions
// are (ties between channels give the same h whichever formula is taken).
XDINO_AVX2 void hue_8(__m256i& r, __m256i& g, __m256i& b, __m256i shift) {
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  const __m256i maxc = _mm256_max_epi32(r, _mm256_max_epi32(g, b));
  const __m256i minc = _mm256_min_epi32(r, _mm256_min_epi32(g, b));
  const __m256i cr = _mm256_sub_epi32(maxc, minc);
  const __m256i mid =
      _mm256_sub_epi32(_mm256_add_epi32(r, _mm256_add_epi32(g, b)), _mm256_add_epi32(maxc, minc));
  const __m256i grey = _mm256_cmpeq_epi32(cr, zero);
  const __m256 crf = _mm256_cvtepi32_ps(_mm256_max_epi32(cr, one));
  const __m256 x = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(maxc, mid)), crf);
  const __m256 sat =
      _mm256_div_ps(_mm256_cvtepi32_ps(cr), _mm256_cvtepi32_ps(_mm256_max_epi32(maxc, one)));
  // Cases: r max (then b min: h = 1 - x, else h = x - 1); g max (b min: 1 + x, else 3 - x);
  // b max (g min: 5 - x, else 3 + x).
  const __m256i r_max = _mm256_cmpeq_epi32(r, maxc);
  const __m256i g_max = _mm256_andnot_si256(r_max, _mm256_cmpeq_epi32(g, maxc));
  const __m256i b_min = _mm256_cmpeq_epi32(b, minc);
  const __m256i g_min = _mm256_cmpeq_epi32(g, minc);
  const __m256 neg = _mm256_set1_ps(-1.0f), pos = _mm256_set1_ps(1.0f);
  const __m256 a_r = _mm256_blendv_ps(neg, pos, _mm256_castsi256_ps(b_min));
  const __m256 s_r = _mm256_blendv_ps(pos, neg, _mm256_castsi256_ps(b_min));
  const __m256 a_g = _mm256_blendv_ps(_mm256_set1_ps(3.0f), pos, _mm256_castsi256_ps(b_min));
  const __m256 s_g = _mm256_blendv_ps(neg, pos, _mm256_castsi256_ps(b_min));
  const __m256 a_b =
      _mm256_blendv_ps(_mm256_set1_ps(3.0f), _mm256_set1_ps(5.0f), _mm256_castsi256_ps(g_min));
  const __m256 s_b = _mm256_blendv_ps(pos, neg, _mm256_castsi256_ps(g_min));
  __m256 a = _mm256_blendv_ps(a_b, a_g, _mm256_castsi256_ps(g_max));
  __m256 sign = _mm256_blendv_ps(s_b, s_g, _mm256_castsi256_ps(g_max));
  a = _mm256_blendv_ps(a, a_r, _mm256_castsi256_ps(r_max));
  sign = _mm256_blendv_ps(sign, s_r, _mm256_castsi256_ps(r_max));
  const __m256 h = _mm256_add_ps(a, _mm256_mul_ps(sign, x));

  // turn = fmod(h / 6 + 1, 1) in double; H = trunc(float(turn) * 255.0), S = trunc(sat * 255.0).
  const __m256d six = _mm256_set1_pd(6.0), oned = _mm256_set1_pd(1.0), d255 = _mm256_set1_pd(255.0);
  __m256d turn_lo = _mm256_add_pd(_mm256_div_pd(lo_pd(h), six), oned);
  __m256d turn_hi = _mm256_add_pd(_mm256_div_pd(hi_pd(h), six), oned);
  turn_lo = _mm256_sub_pd(turn_lo, _mm256_and_pd(_mm256_cmp_pd(turn_lo, oned, _CMP_GE_OQ), oned));
  turn_hi = _mm256_sub_pd(turn_hi, _mm256_and_pd(_mm256_cmp_pd(turn_hi, oned, _CMP_GE_OQ), oned));
  const __m256 turn = join_ps(turn_lo, turn_hi);
  __m256i hq = join_trunc(_mm256_mul_pd(lo_pd(turn), d255), _mm256_mul_pd(hi_pd(turn), d255));
  __m256i sq = join_trunc(_mm256_mul_pd(lo_pd(sat), d255), _mm256_mul_pd(hi_pd(sat), d255));
  const __m256i max8 = _mm256_set1_epi32(255);
  hq = _mm256_andnot_si256(grey, _mm256_min_epi32(hq, max8));
  sq = _mm256_andnot_si256(grey, _mm256_min_epi32(sq, max8));
  hq = _mm256_and_si256(_mm256_add_epi32(hq, shift), max8);

  // hsv2rgb. Sector, fraction f and s / 255 depend on one byte each: looked up.
  const HsvTables& tables = hsv_tables();
  const __m256i sector = _mm256_i32gather_epi32(tables.sector, hq, 4);
  const __m256 f = _mm256_i32gather_ps(tables.f, hq, 4);
  const __m256 fs = _mm256_i32gather_ps(tables.fs, sq, 4);
  const __m256 fsf = _mm256_mul_ps(fs, f);
  __m256d out_lo[3], out_hi[3];  // p, q, t
  for (int half = 0; half < 2; ++half) {
    const __m256d v = half ? hi_pd(maxc) : lo_pd(maxc);
    const __m256d fsd = half ? hi_pd(fs) : lo_pd(fs);
    const __m256d fd = half ? hi_pd(f) : lo_pd(f);
    const __m256d fsfd = half ? hi_pd(fsf) : lo_pd(fsf);
    __m256d* out = half ? out_hi : out_lo;
    out[0] = round_half_up(_mm256_mul_pd(v, _mm256_sub_pd(oned, fsd)));
    out[1] = round_half_up(_mm256_mul_pd(v, _mm256_sub_pd(oned, fsfd)));
    out[2] = round_half_up(
        _mm256_mul_pd(v, _mm256_sub_pd(oned, _mm256_mul_pd(fsd, _mm256_sub_pd(oned, fd)))));
  }
  const __m256i p = _mm256_min_epi32(join_trunc(out_lo[0], out_hi[0]), max8);
  const __m256i q = _mm256_min_epi32(join_trunc(out_lo[1], out_hi[1]), max8);
  const __m256i t = _mm256_min_epi32(join_trunc(out_lo[2], out_hi[2]), max8);
  __m256i is[6];
  for (int k = 0; k < 6; ++k) is[k] = _mm256_cmpeq_epi32(sector, _mm256_set1_epi32(k));
  // Sectors 0..5: (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q).
  const __m256i ro = pick(pick(pick(p, _mm256_or_si256(is[0], is[5]), maxc), is[1], q), is[4], t);
  const __m256i go = pick(pick(pick(p, _mm256_or_si256(is[1], is[2]), maxc), is[0], t), is[3], q);
  const __m256i bo = pick(pick(pick(p, _mm256_or_si256(is[3], is[4]), maxc), is[2], t), is[5], q);
  const __m256i unsaturated = _mm256_cmpeq_epi32(sq, zero);
  r = pick(ro, unsaturated, maxc);
  g = pick(go, unsaturated, maxc);
  b = pick(bo, unsaturated, maxc);
}

XDINO_AVX2 void hue_shift_avx2(uint8_t* rgb, size_t n, uint8_t shift) {
  const __m256i vshift = _mm256_set1_epi32(shift);
  hsv_tables();
  // 24 interleaved bytes (16 + 8 loaded) -> 8 bytes per channel.
  const __m128i r_lo = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i r_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i g_lo = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i g_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i b_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i b_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  // After packing, each 128-bit lane holds r0-3 g0-3 b0-3 (bytes 0-11): back to r g b order.
  const __m256i interleave = _mm256_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1,
                                              0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -1, -1, -1, -1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint8_t* px = rgb + 3 * i;
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(px));
    const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(px + 16));
    __m256i r =
        _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, r_lo), _mm_shuffle_epi8(hi, r_hi)));
    __m256i g =
        _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, g_lo), _mm_shuffle_epi8(hi, g_hi)));
    __m256i b =
        _mm256_cvtepu8_epi32(_mm_or_si128(_mm_shuffle_epi8(lo, b_lo), _mm_shuffle_epi8(hi, b_hi)));
    hue_8(r, g, b, vshift);
    // int32 -> bytes: lane k of each 128-bit half becomes [r g b 0] x 4 pixels.
    const __m256i rg = _mm256_packus_epi32(r, g);
    const __m256i b0 = _mm256_packus_epi32(b, _mm256_setzero_si256());
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_packus_epi16(rg, b0), interleave);
    const __m128i first = _mm256_castsi256_si128(bytes);
    const __m128i second = _mm256_extracti128_si256(bytes, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(px), first);
    const uint32_t first_tail = static_cast<uint32_t>(_mm_extract_epi32(first, 2));
    std::memcpy(px + 8, &first_tail, 4);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(px + 12), second);
    const uint32_t second_tail = static_cast<uint32_t>(_mm_extract_epi32(second, 2));
    std::memcpy(px + 20, &second_tail, 4);
  }
  hue_shift_reference(rgb + 3 * i, n - i, shift);
}
#endif

}  // namespace

void hue_shift_reference(uint8_t* rgb, size_t n, uint8_t shift) {
  for (size_t i = 0; i < n; ++i, rgb += 3) {
    uint8_t h, s;
    rgb_to_hsv(rgb, h, s);
    const uint8_t v = std::max(rgb[0], std::max(rgb[1], rgb[2]));
    hsv_to_rgb(static_cast<uint8_t>(h + shift), s, v, rgb);
  }
}

void hue_shift(uint8_t* rgb, size_t n, uint8_t shift) {
#ifdef XDINO_HUE_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return hue_shift_avx2(rgb, n, shift);
#endif
  hue_shift_reference(rgb, n, shift);
}

}  // namespace xdino::augment
