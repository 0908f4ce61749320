// What the AMX kernels share (gemm_bf16_amx.cc, gemm_bf16w_amx.cc): the tile configuration and
// the f32 -> bf16 conversions around the tiles. Include only from *_amx.cc files (compiled with the
// AMX and AVX-512 flags, called after amx_bf16_active()).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// 16 floats to 16 bf16 in the low 16 bits of each 32-bit lane, as f32_to_bf16 does them: round
// to nearest even, NaN kept a (quiet) NaN rather than carried into the sign bit.
inline __m512i bf16_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd =
      _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_maskz_srli_epi32(
      0xFFFF, _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, _mm512_maskz_srli_epi32(0xFFFF, u, 16),
                              _mm512_set1_epi32(0x40));
}

// The 32 floats v0, v1 as 32 bf16 in order (16-bit element j).
inline __m512i bf16x32(__m512 v0, __m512 v1) {
  static const __m512i kLowHalves = [] {
    alignas(64) int16_t w[32];
    for (int j = 0; j < 32; ++j) w[j] = static_cast<int16_t>(j < 16 ? 2 * j : 32 + 2 * (j - 16));
    return _mm512_load_si512(w);
  }();
  return _mm512_permutex2var_epi16(bf16_lanes(v0), kLowHalves, bf16_lanes(v1));
}

inline int64_t round_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

}  // namespace nexus::cpu::amx
