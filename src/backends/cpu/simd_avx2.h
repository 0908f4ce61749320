// Small AVX2 helpers shared by the *_avx2.cc kernels. Include only from files compiled with
// -mavx2 -mfma -mf16c (the *_avx2.cc files), which run only after the run-time CPU check.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace nexus::cpu::avx2 {

// Sum of the 8 lanes.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Per 128-bit half, the sums of the four int32 of a, b, c and d: lanes [a, b, c, d] of the low
// half, then of the high half (two levels of hadd).
inline __m256i sum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}

// Lane j = the sum of the 8 lanes of a_j: per vector the pairs, then the pairs of pairs (hadd, in
// each 128-bit half), then the two halves; every caller that sums this way gets the same bits.
inline __m256 sum8_ps(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                      __m256 a7) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Hides a value from the optimiser so that a separate multiply and add are not fused into an FMA:
// dequantization must round exactly like the scalar reference (which has no FMA).
inline __m256 opaque(__m256 v) {
  __asm__("" : "+x"(v));
  return v;
}

// The 32 nibbles of a 16-byte block as 32 bytes in element order: low nibbles are elements 0-15,
// high nibbles elements 16-31 (the Q4_0/Q4_1/Q5 layout).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

// Byte j is 0xFF when bit j of `bits` is set, else 0.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select);
}

// Sums of 4 adjacent unsigned(a) * signed(b) products as 8 int32 lanes. The int16 pair sums of
// maddubs cannot saturate while a <= 128, which every caller guarantees.
inline __m256i dot_u8_i8(__m256i a, __m256i b) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}

// Same for signed(a) * signed(b): moves a's sign onto b so a can be treated as unsigned.
inline __m256i dot_i8_i8(__m256i a, __m256i b) {
  return dot_u8_i8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// Converts 8 consecutive int8 lanes starting at byte 8*g of v to floats.
inline __m256 i8_to_f32(__m256i v, int g) {
  const __m128i half = g < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  const __m128i part = (g & 1) ? _mm_srli_si128(half, 8) : half;
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
}

// Rounds to nearest with ties away from zero (C's roundf), exactly: trunc(v) plus sign(v) when the
// dropped fraction is at least one half. The fraction v - trunc(v) is exact for |v| < 2^23.
inline __m256 round_half_away(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

// Packs 4 x 8 int32 (each in [-128, 127]) into 32 int8 in order.
inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  // packs works within 128-bit lanes: restore element order across the lanes.
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Q2_K / Q3_K (blocks.h): the 2-bit codes of elements 128h + 32c + l (l < 32) from qs[32h ..
// 32h + 31] (bits 2c, 2c + 1 of each byte) as bytes 0..3; 16-bit shifts move bits across bytes,
// the mask drops them.
inline __m256i low2_codes(__m256i qs, int c) {
  return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * c), _mm256_set1_epi8(3));
}

// Q3_K: the same elements' codes as unsigned bytes 0..7, the low 2 bits plus 4 times the hmask
// bit (bit 4h + c of hmask[l]; hm = the 32 hmask bytes). The shifts keep bit 2 within its byte.
inline __m256i q3_k_codes(__m256i qs, __m256i hm, int h, int c) {
  const int b = 4 * h + c;
  const __m256i hb = b >= 2 ? _mm256_srli_epi16(hm, b - 2) : _mm256_slli_epi16(hm, 2 - b);
  return _mm256_or_si256(low2_codes(qs, c), _mm256_and_si256(hb, _mm256_set1_epi8(4)));
}

// Q3_K: the 16 signed scales (s - 32, -32..31) as int8, from the 12 packed bytes with 32-bit word
// operations (layout in blocks.h).
inline __m128i q3_k_scales(const uint8_t* packed) {
  uint32_t u[3];
  std::memcpy(u, packed, sizeof(u));
  const uint32_t w0 = (u[0] & 0x0f0f0f0fu) | ((u[2] & 0x03030303u) << 4);
  const uint32_t w1 = (u[1] & 0x0f0f0f0fu) | (((u[2] >> 2) & 0x03030303u) << 4);
  const uint32_t w2 = ((u[0] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 4) & 0x03030303u) << 4);
  const uint32_t w3 = ((u[1] >> 4) & 0x0f0f0f0fu) | (((u[2] >> 6) & 0x03030303u) << 4);
  return _mm_sub_epi8(_mm_set_epi32(static_cast<int>(w3), static_cast<int>(w2),
                                    static_cast<int>(w1), static_cast<int>(w0)),
                      _mm_set1_epi8(32));
}

}  // namespace nexus::cpu::avx2
