// AVX2/F16C rounding to bf16 and fp16 (round to nearest even, as the scalar reference):
// bf16 by integer rounding of the upper half, fp16 through the F16C conversions.
#include <immintrin.h>

#include "backends/cpu/bf16_avx2.h"
#include "backends/cpu/round.h"

namespace nexus::cpu {
namespace {

// The bf16 encodings of 8 floats in the upper 16 bits of each lane (lower bits zero); NaN stays a
// (quiet) NaN, as f32_to_bf16.
inline __m256i bf16_round(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
  return _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
}

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

}  // namespace

void round_avx2(Precision p, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  if (p == Precision::kBF16) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_castsi256_ps(bf16_round(_mm256_loadu_ps(x + i))));
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound)));
  }
  round_scalar(p, x + i, y + i, n - i);
}

void round_pack_avx2(Precision p, float* x, uint16_t* h, int64_t n) {
  int64_t i = 0;
  if (p == Precision::kBF16) {
    for (; i + 8 <= n; i += 8) {
      const __m256i r = bf16_round(_mm256_loadu_ps(x + i));
      _mm256_storeu_ps(x + i, _mm256_castsi256_ps(r));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), high_halves(r));
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      const __m128i e = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound);
      _mm256_storeu_ps(x + i, _mm256_cvtph_ps(e));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), e);
    }
  }
  round_pack_scalar(p, x + i, h + i, n - i);
}

void unpack_avx2(Precision p, const uint16_t* h, float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v =
        p == Precision::kBF16
            ? bf16x8_to_f32(h + i)
            : _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
    _mm256_storeu_ps(x + i, v);
  }
  unpack_scalar(p, h + i, x + i, n - i);
}

}  // namespace nexus::cpu
