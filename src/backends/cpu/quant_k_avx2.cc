// AVX2/FMA/F16C kernels for the K-quant super-blocks: dequantizers, the Q8_K quantizer and the
// Q5_K/Q8_K dots (Q4_K and Q6_K dots are in dot_multi_avx2.cc). Integer sums stay exact in int32
// per super-block (maddubs for the 8-bit products, madd to apply the sub-block scales).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

using avx2::h2f;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// y[0..31] = dl * float(codes) - ml, multiply and subtract rounded separately as in the scalar
// reference. codes are 32 unsigned bytes.
inline void store_k(__m256i codes, float dl, float ml, float* y) {
  const __m256 vd = _mm256_set1_ps(dl), vm = _mm256_set1_ps(ml);
  for (int g = 0; g < 4; ++g) {
    const __m256 p = avx2::opaque(_mm256_mul_ps(vd, avx2::i8_to_f32(codes, g)));
    _mm256_storeu_ps(y + 8 * g, _mm256_sub_ps(p, vm));
  }
}

// store_k for a 32-code group spanning two sub-blocks of 16 (Q2_K, Q3_K): codes 0-15 with
// (dl0, ml0), 16-31 with (dl1, ml1). Signed codes are fine (i8_to_f32 sign-extends).
inline void store_k16x2(__m256i codes, float dl0, float ml0, float dl1, float ml1, float* y) {
  for (int g = 0; g < 4; ++g) {
    const __m256 vd = _mm256_set1_ps(g < 2 ? dl0 : dl1), vm = _mm256_set1_ps(g < 2 ? ml0 : ml1);
    const __m256 p = avx2::opaque(_mm256_mul_ps(vd, avx2::i8_to_f32(codes, g)));
    _mm256_storeu_ps(y + 8 * g, _mm256_sub_ps(p, vm));
  }
}

// The four 32-code groups of one 128-element Q6_K half, as unsigned bytes in [0, 63].
inline void codes_q6_k_half(const uint8_t* ql, const uint8_t* qh, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const __m256i l0 = load256(ql), l1 = load256(ql + 32), h = load256(qh);
  const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, m2), 4);
  const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4);
  const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4);
  const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4);
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), h0);
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), h1);
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), h2);
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), h3);
}

}  // namespace

// ---- Q4_K ----

void dequantize_q4_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(x);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, m0, sc1, m1;
      unpack_scale_min_k4(2 * c, b[i].scales, &sc0, &m0);
      unpack_scale_min_k4(2 * c + 1, b[i].scales, &sc1, &m1);
      const __m256i q = load256(b[i].qs + 32 * c);
      store_k(_mm256_and_si256(q, m4), d * sc0, dmin * m0, y + 64 * c);
      store_k(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), d * sc1, dmin * m1, y + 64 * c + 32);
    }
  }
}

// ---- Q2_K, Q3_K: element 128h + 32c + l has its low 2 bits at bits 2c of qs[32h + l] ----

void dequantize_q2_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load256(b[i].qs + 32 * h);
      for (int c = 0; c < 4; ++c) {
        const int s0 = b[i].scales[8 * h + 2 * c], s1 = b[i].scales[8 * h + 2 * c + 1];
        store_k16x2(avx2::low2_codes(qs, c), d * static_cast<float>(s0 & 0xF),
                    dmin * static_cast<float>(s0 >> 4), d * static_cast<float>(s1 & 0xF),
                    dmin * static_cast<float>(s1 >> 4), y + 128 * h + 32 * c);
      }
    }
  }
}

void dequantize_q3_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(x);
  const __m256i m4 = _mm256_set1_epi8(4);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = h2f(b[i].d);
    alignas(16) int8_t s[16];  // s - 32
    _mm_store_si128(reinterpret_cast<__m128i*>(s), avx2::q3_k_scales(b[i].scales));
    const __m256i hm = load256(b[i].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load256(b[i].qs + 32 * h);
      for (int c = 0; c < 4; ++c) {
        const int j = 8 * h + 2 * c;  // codes 0..7 less 4: the signed -4..3
        store_k16x2(_mm256_sub_epi8(avx2::q3_k_codes(qs, hm, h, c), m4),
                    d * static_cast<float>(s[j]), 0.0f, d * static_cast<float>(s[j + 1]), 0.0f,
                    y + 128 * h + 32 * c);
      }
    }
  }
}

// ---- Q5_K ----

void dequantize_q5_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(x);
  const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    __m256i qh = load256(b[i].qh);
    for (int c = 0; c < 4; ++c) {
      uint8_t sc0, m0, sc1, m1;
      unpack_scale_min_k4(2 * c, b[i].scales, &sc0, &m0);
      unpack_scale_min_k4(2 * c + 1, b[i].scales, &sc1, &m1);
      const __m256i q = load256(b[i].qs + 32 * c);
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
      store_k(_mm256_or_si256(_mm256_and_si256(q, m4), h0), d * sc0, dmin * m0, y + 64 * c);
      store_k(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1), d * sc1,
              dmin * m1, y + 64 * c + 32);
      qh = _mm256_srli_epi16(qh, 2);  // next chunk's bits; stray bits from the high byte are masked
    }
  }
}

// vec_dot_q5_k_avx2: dot_multi_avx2.cc (the Q4_K kernel with the fifth bit).

// ---- Q6_K ----

void dequantize_q6_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(x);
  const __m256i bias = _mm256_set1_epi8(32);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = h2f(b[i].d);
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      codes_q6_k_half(b[i].ql + 64 * h, b[i].qh + 32 * h, q);
      for (int k = 0; k < 4; ++k) {
        const __m256i s = _mm256_sub_epi8(q[k], bias);  // signed codes in [-32, 31]
        float* o = y + 128 * h + 32 * k;
        const int g = 8 * h + 2 * k;  // 16-element group of the first half of this 32
        const __m256 d0 = _mm256_set1_ps(d * b[i].scales[g]);
        const __m256 d1 = _mm256_set1_ps(d * b[i].scales[g + 1]);
        _mm256_storeu_ps(o, _mm256_mul_ps(d0, avx2::i8_to_f32(s, 0)));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(d0, avx2::i8_to_f32(s, 1)));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(d1, avx2::i8_to_f32(s, 2)));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(d1, avx2::i8_to_f32(s, 3)));
      }
    }
  }
}

// ---- Q8_K ----

void quantize_q8_k_avx2(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(y);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    __m256 vmax = _mm256_setzero_ps();
    for (int g = 0; g < kQKK / 8; ++g)
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * g)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    const float amax = _mm_cvtss_f32(s);
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // The sign of the first element reaching amax decides the scale's sign (as in the reference).
    float max = amax;
    const __m256 vamax = _mm256_set1_ps(amax);
    for (int g = 0; g < kQKK / 8; ++g) {
      const __m256 v = _mm256_loadu_ps(x + 8 * g);
      const int hit =
          _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), vamax, _CMP_EQ_OQ));
      if (hit) {
        max = x[8 * g + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vis = _mm256_set1_ps(iscale), lim = _mm256_set1_ps(127.0f);
    for (int c = 0; c < kQKK / 32; ++c) {
      __m256i q[4];
      for (int g = 0; g < 4; ++g) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * g), vis);
        const __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[g] = _mm256_cvtps_epi32(_mm256_min_ps(r, lim));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * c),
                          avx2::pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
    for (int g = 0; g < kQKK / 16; ++g) {
      const __m256i v =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16 * g)));
      const __m256i pairs = _mm256_madd_epi16(v, _mm256_set1_epi16(1));
      b[i].bsums[g] = static_cast<int16_t>(avx2::hsum_i32(pairs));
    }
    b[i].d = 1.0f / iscale;
  }
}

void dequantize_q8_k_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const __m256 vd = _mm256_set1_ps(b[i].d);
    for (int c = 0; c < kQKK / 32; ++c) {
      const __m256i q = load256(b[i].qs + 32 * c);
      for (int g = 0; g < 4; ++g)
        _mm256_storeu_ps(y + 32 * c + 8 * g, _mm256_mul_ps(vd, avx2::i8_to_f32(q, g)));
    }
  }
}

float vec_dot_q8_k_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < kQKK / 32; ++c)
      sumi = _mm256_add_epi32(
          sumi, avx2::dot_i8_i8(load256(a[i].qs + 32 * c), load256(b[i].qs + 32 * c)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a[i].d * b[i].d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return avx2::hsum(acc);
}

}  // namespace nexus::cpu
