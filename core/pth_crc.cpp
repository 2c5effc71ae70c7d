// Two ways to the same CRC-32. Polynomials are kept in reflected bit order throughout: in a
// 32-bit value bit 31 is the coefficient of x^0, and in the 128-bit lanes of the folding code
// bit m of the little-endian lane is the coefficient of x^(127 - m), which is how the bytes of
// the message map onto its polynomial for a reflected CRC.
#include "core/pth_crc.h"

#include <array>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define XDINO_CRC_CLMUL 1
#endif

namespace xdino::pth {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;

using CrcTables = std::array<std::array<uint32_t, 256>, 16>;

CrcTables make_tables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (size_t s = 1; s < 16; ++s)
    for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  return t;
}

const CrcTables& tables() {
  static const CrcTables t = make_tables();
  return t;
}

uint32_t load_le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// The register update without the initial and final inversion.
uint32_t update_tables(uint32_t c, const unsigned char* p, size_t size) {
  const CrcTables& t = tables();
  while (size >= 16) {
    const uint32_t a = load_le32(p) ^ c, b = load_le32(p + 4), d = load_le32(p + 8),
                   e = load_le32(p + 12);
    c = t[15][a & 0xFF] ^ t[14][(a >> 8) & 0xFF] ^ t[13][(a >> 16) & 0xFF] ^ t[12][a >> 24] ^
        t[11][b & 0xFF] ^ t[10][(b >> 8) & 0xFF] ^ t[9][(b >> 16) & 0xFF] ^ t[8][b >> 24] ^
        t[7][d & 0xFF] ^ t[6][(d >> 8) & 0xFF] ^ t[5][(d >> 16) & 0xFF] ^ t[4][d >> 24] ^
        t[3][e & 0xFF] ^ t[2][(e >> 8) & 0xFF] ^ t[1][(e >> 16) & 0xFF] ^ t[0][e >> 24];
    p += 16;
    size -= 16;
  }
  while (size-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return c;
}

uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {  // x^0, x^1, ... of a
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;  // b *= x
  }
  return product;
}

// x^e mod P by squaring.
uint32_t x_pow(uint64_t e) {
  uint32_t result = 1u << 31;  // 1
  uint32_t square = 1u << 30;  // x
  for (; e != 0; e >>= 1) {
    if (e & 1) result = multiply_mod_p(result, square);
    square = multiply_mod_p(square, square);
  }
  return result;
}

#ifdef XDINO_CRC_CLMUL
// Folding a 128-bit lane R = H x^64 + L (H: its low 64 bits, the higher degrees) forward by n
// bits gives H (x^(n+64) mod P) + L (x^n mod P), congruent and of degree < 128. A carry-less
// product of a lane half and a 32-bit constant shifted left by one lands with the lane's
// alignment when the constant is x^(n+64-32) resp. x^(n-32).
struct FoldConstants {
  __m128i by512, by128;
};

uint64_t fold_constant(uint64_t exponent) { return uint64_t(x_pow(exponent)) << 1; }

const FoldConstants& fold_constants() {
  static const FoldConstants k = {
      _mm_set_epi64x(int64_t(fold_constant(512 - 32)), int64_t(fold_constant(512 + 64 - 32))),
      _mm_set_epi64x(int64_t(fold_constant(128 - 32)), int64_t(fold_constant(128 + 64 - 32)))};
  return k;
}

__attribute__((target("pclmul,sse2"))) __m128i fold(__m128i lane, __m128i k, __m128i next) {
  const __m128i high = _mm_clmulepi64_si128(lane, k, 0x00);
  const __m128i low = _mm_clmulepi64_si128(lane, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(high, low), next);
}

// Requires size >= 64. Four lanes fold 64 bytes per step; they then fold into one lane, whose
// 16 bytes (congruent to everything read so far) and the remaining tail go through the tables.
__attribute__((target("pclmul,sse2"))) uint32_t update_clmul(uint32_t c, const unsigned char* p,
                                                             size_t size) {
  const FoldConstants& k = fold_constants();
  const auto load = [](const unsigned char* q) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  };
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  size -= 64;
  for (; size >= 64; p += 64, size -= 64) {
    x0 = fold(x0, k.by512, load(p));
    x1 = fold(x1, k.by512, load(p + 16));
    x2 = fold(x2, k.by512, load(p + 32));
    x3 = fold(x3, k.by512, load(p + 48));
  }
  __m128i r = fold(fold(fold(x0, k.by128, x1), k.by128, x2), k.by128, x3);
  for (; size >= 16; p += 16, size -= 16) r = fold(r, k.by128, load(p));
  alignas(16) unsigned char lane[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(lane), r);
  return update_tables(update_tables(0, lane, 16), p, size);
}

bool has_clmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
  return yes;
}
#endif

}  // namespace

uint32_t crc32_portable(uint32_t crc, const void* data, size_t size) {
  return ~update_tables(~crc, static_cast<const unsigned char*>(data), size);
}

uint32_t crc32(uint32_t crc, const void* data, size_t size) {
#ifdef XDINO_CRC_CLMUL
  if (size >= 64 && has_clmul())
    return ~update_clmul(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return crc32_portable(crc, data, size);
}

// crc(A then B) = crc(A) x^(8 |B|) + crc(B) mod P: the register is linear over GF(2) and the
// inversions at both ends cancel.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  return multiply_mod_p(crc_a, x_pow(8 * size_b)) ^ crc_b;
}

}  // namespace xdino::pth
