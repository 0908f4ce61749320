// The vector search's inner products on AVX2/FMA/F16C: per row, four queries at a time share each
// loaded (and, for f16 and int8, widened) stretch of 8 values.
#include <immintrin.h>

#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/similarity.h"

namespace nexus::cpu {
namespace {

template <DType T>
inline __m256 load8(const void* row, int64_t c) {
  if constexpr (T == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + c);
  } else if constexpr (T == DType::kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + c)));
  } else {
    const auto* p = static_cast<const int8_t*>(row) + c;
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
}

template <DType T>
inline float value(const void* row, int64_t c) {
  if constexpr (T == DType::kF32) return static_cast<const float*>(row)[c];
  if constexpr (T == DType::kF16) return _cvtsh_ss(static_cast<const uint16_t*>(row)[c]);
  return static_cast<float>(static_cast<const int8_t*>(row)[c]);
}

template <DType T>
void dots(const TopKArgs& a, int64_t q0, int64_t q1, int64_t r0, int64_t r1, float* out) {
  const int64_t d = a.dim, nr = r1 - r0;
  const size_t width = T == DType::kF32 ? 4 : T == DType::kF16 ? 2 : 1;
  for (int64_t r = r0; r < r1; ++r) {
    const void* row = static_cast<const char*>(a.rows) + static_cast<size_t>(r * d) * width;
    const float scale = T == DType::kI8 ? a.scales[r] : 1.0f;
    int64_t q = q0;
    for (; q + 4 <= q1; q += 4) {
      const float* x = a.queries + q * d;
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      int64_t c = 0;
      for (; c + 8 <= d; c += 8) {
        const __m256 v = load8<T>(row, c);
        s0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + c), s0);
        s1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + d + c), s1);
        s2 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + 2 * d + c), s2);
        s3 = _mm256_fmadd_ps(v, _mm256_loadu_ps(x + 3 * d + c), s3);
      }
      float t[4] = {avx2::hsum(s0), avx2::hsum(s1), avx2::hsum(s2), avx2::hsum(s3)};
      for (; c < d; ++c) {
        const float v = value<T>(row, c);
        for (int j = 0; j < 4; ++j) t[j] += v * x[j * d + c];
      }
      for (int j = 0; j < 4; ++j) out[(q + j - q0) * nr + (r - r0)] = t[j] * scale;
    }
    for (; q < q1; ++q) {
      const float* x = a.queries + q * d;
      __m256 s = _mm256_setzero_ps();
      int64_t c = 0;
      for (; c + 8 <= d; c += 8) s = _mm256_fmadd_ps(load8<T>(row, c), _mm256_loadu_ps(x + c), s);
      float t = avx2::hsum(s);
      for (; c < d; ++c) t += value<T>(row, c) * x[c];
      out[(q - q0) * nr + (r - r0)] = t * scale;
    }
  }
}

}  // namespace

void topk_dots_avx2(const TopKArgs& a, int64_t q0, int64_t q1, int64_t r0, int64_t r1, float* out) {
  switch (a.type) {
    case DType::kF32:
      return dots<DType::kF32>(a, q0, q1, r0, r1, out);
    case DType::kF16:
      return dots<DType::kF16>(a, q0, q1, r0, r1, out);
    default:  // kI8 (the front-end allows no other type)
      return dots<DType::kI8>(a, q0, q1, r0, r1, out);
  }
}

}  // namespace nexus::cpu
