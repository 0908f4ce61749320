// AVX2/FMA/F16C kernels for F32/F16/BF16 and the 32-element block types. Dequantization and the
// activation quantizers (Q8_0, Q8_1) produce bit-identical output to the scalar reference; the dot
// products keep exact int32 block sums and differ from it only in f32 summation order. The Q4_0
// and Q8_0 dots are in dot_multi_avx2.cc.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {

using avx2::h2f;

// ---- plain float types ----

// Four independent accumulators hide the FMA latency.
float vec_dot_f32_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  // Four named accumulators: as an array indexed in a loop, GCC -O2 kept them on the stack, a
  // store-to-load round trip per FMA (about 10% slower on a stream of F32 rows).
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_f32_step(a + i);
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void quantize_f16_avx2(const float* x, void* y, int64_t n) {
  auto* h = static_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) h[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void dequantize_f16_avx2(const void* x, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) y[i] = _cvtsh_ss(h[i]);
}

float vec_dot_f16_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i + 8)));
    acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(b + i + 8), acc1);
  }
  float s = avx2::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += _cvtsh_ss(a[i]) * b[i];
  return s;
}

namespace {
// bf16 -> f32 is a 16-bit shift of the bit pattern.
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
}  // namespace

// Round to nearest even on the bit pattern, NaN kept quiet (same rule as nexus::f32_to_bf16).
void quantize_bf16_avx2(const float* x, void* y, int64_t n) {
  auto* h = static_cast<uint16_t*>(y);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, abs_mask), inf);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(v, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), _mm256_castsi256_si128(packed));
  }
  quantize_bf16_ref(x + i, h + i, n - i);
}

void dequantize_bf16_avx2(const void* x, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_bf16(h + i));
  dequantize_bf16_ref(h + i, y + i, n - i);
}

float vec_dot_bf16_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load_bf16(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load_bf16(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  float s = avx2::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) {
    uint32_t u = static_cast<uint32_t>(a[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    s += f * b[i];
  }
  return s;
}

// ---- block decoders: 32 codes of one block as bytes in element order ----

namespace {

// Q4_0: nibble - 8, signed.
inline __m256i codes_q4_0(const BlockQ4_0& b) {
  return _mm256_sub_epi8(avx2::unpack_nibbles(b.qs), _mm256_set1_epi8(8));
}
// Q5_0: (nibble | bit4 << 4) - 16, signed. With bit 4 clear, nibble | 0xF0 is nibble - 16 as int8.
inline __m256i codes_q5_0(const BlockQ5_0& b) {
  const __m256i hi = _mm256_andnot_si256(avx2::bits_to_bytes(load_u32(b.qh)),
                                         _mm256_set1_epi8(static_cast<char>(0xF0)));
  return _mm256_or_si256(avx2::unpack_nibbles(b.qs), hi);
}
// Q5_1: nibble | bit4 << 4, unsigned.
inline __m256i codes_q5_1(const BlockQ5_1& b) {
  const __m256i hi = _mm256_and_si256(avx2::bits_to_bytes(load_u32(b.qh)), _mm256_set1_epi8(0x10));
  return _mm256_or_si256(avx2::unpack_nibbles(b.qs), hi);
}

// y[0..31] = float(code) * d.
inline void store_scaled(__m256i codes, float d, float* y) {
  const __m256 vd = _mm256_set1_ps(d);
  for (int g = 0; g < 4; ++g)
    _mm256_storeu_ps(y + 8 * g, _mm256_mul_ps(avx2::i8_to_f32(codes, g), vd));
}
// y[0..31] = float(code) * d + m, rounded twice like the scalar reference.
inline void store_scaled_offset(__m256i codes, float d, float m, float* y) {
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  for (int g = 0; g < 4; ++g) {
    const __m256 p = avx2::opaque(_mm256_mul_ps(avx2::i8_to_f32(codes, g), vd));
    _mm256_storeu_ps(y + 8 * g, _mm256_add_ps(p, vm));
  }
}

}  // namespace

// ---- Q4_0 ----

void dequantize_q4_0_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i) store_scaled(codes_q4_0(b[i]), h2f(b[i].d), y + kQK * i);
}

// ---- Q4_1 ----

void dequantize_q4_1_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i)
    store_scaled_offset(avx2::unpack_nibbles(b[i].qs), h2f(b[i].d), h2f(b[i].m), y + kQK * i);
}

float vec_dot_q4_1_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    const __m256i p = avx2::dot_u8_i8(avx2::unpack_nibbles(a[i].qs), y);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
    offsets += h2f(a[i].m) * h2f(b[i].s);
  }
  return avx2::hsum(acc) + offsets;
}

// ---- Q5_0 ----

void dequantize_q5_0_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i) store_scaled(codes_q5_0(b[i]), h2f(b[i].d), y + kQK * i);
}

float vec_dot_q5_0_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    const __m256i p = avx2::dot_i8_i8(codes_q5_0(a[i]), y);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
  }
  return avx2::hsum(acc);
}

// ---- Q5_1 ----

void dequantize_q5_1_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i)
    store_scaled_offset(codes_q5_1(b[i]), h2f(b[i].d), h2f(b[i].m), y + kQK * i);
}

float vec_dot_q5_1_avx2(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    const __m256i p = avx2::dot_u8_i8(codes_q5_1(a[i]), y);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(a[i].d) * h2f(b[i].d)), acc);
    offsets += h2f(a[i].m) * h2f(b[i].s);
  }
  return avx2::hsum(acc) + offsets;
}

// ---- Q8_0 / Q8_1 ----

namespace {

// Codes of one 32-float block scaled by id with C roundf semantics, as in quantize_q8_0_ref.
// Also returns the sum of the codes (for Q8_1).
inline __m256i quantize_block_i8(const float* x, float id, int* sum) {
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int g = 0; g < 4; ++g) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * g), vid);
    q[g] = _mm256_cvttps_epi32(avx2::round_half_away(v));
  }
  *sum =
      avx2::hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return avx2::pack_i32_to_i8(q[0], q[1], q[2], q[3]);
}

inline float block_absmax(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  for (int g = 1; g < 4; ++g)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * g)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void quantize_q8_0_avx2(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = block_absmax(x) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    int sum;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), quantize_block_i8(x, id, &sum));
  }
}

void dequantize_q8_0_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i)
    store_scaled(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs)), h2f(b[i].d),
                 y + kQK * i);
}

void quantize_q8_1_avx2(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = block_absmax(x) / 127;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    int sum;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), quantize_block_i8(x, id, &sum));
    b[i].s = _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT);
  }
}

void dequantize_q8_1_avx2(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i)
    store_scaled(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs)), h2f(b[i].d),
                 y + kQK * i);
}

}  // namespace nexus::cpu
