// AVX2 Q4_0 x Q8_0 dot products. Each (weight row, token) pair accumulates one f32 per block:
//   acc = fma(float(P), d_w * d_y, acc),  P = sum over the block of (q - 8) * y  (an exact int32),
// in block order. Three kernels share that per-pair sequence, so their outputs are bit-identical:
//   - eight weight rows x one token (decode): two rows share a 256-bit register (row a's 16 code
//     bytes in the low lane, row b's in the high lane) against the activation's two halves
//     broadcast to both lanes; three horizontal adds turn the four registers of partial sums into
//     one register with a block sum per row, so the scale product, conversion and FMA run once
//     for eight rows and the eight scales are converted by one instruction;
//   - one weight row x 1-4 tokens (vec_dot, small prefill batches): the partial sums of the
//     tokens are reduced the same way, one lane per token.
// In the eight-row kernel the codes enter maddubs unsigned (0..15) and the -8 offset comes off as
// 8 * (sum of the activations), computed once per activation block for all eight rows.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

constexpr int kRows = 8;

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// Sums of pairs of (q - 8) * y (16 int16 lanes, each four products) for a 256-bit register of codes
// `lo`/`hi` (low and high nibbles) against activation halves `ylo`/`yhi`; `c` holds the offset
// terms 8 * y of the same lanes.
inline __m256i partial(__m256i lo, __m256i hi, __m256i ylo, __m256i yhi, __m256i c) {
  const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_maddubs_epi16(hi, yhi));
  return _mm256_sub_epi16(s, c);
}

// Eight weight rows (rows[r] for r < 8; callers repeat a row to fill) against one activation row.
// out[r] for r < nr.
void dot_rows8(int64_t n, const BlockQ4_0* const* rows, const BlockQ8_0* y, size_t group_bytes,
               int nr, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    // The next eight rows follow these in memory: fetch the same span of them (the eight short
    // interleaved streams are invisible to the hardware prefetcher).
    const auto* pf =
        reinterpret_cast<const char*>(rows[0]) + group_bytes + i * kRows * sizeof(BlockQ4_0);
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
    const __m256i ylo = _mm256_broadcastsi128_si256(load128(y[i].qs));
    const __m256i yhi = _mm256_broadcastsi128_si256(load128(y[i].qs + 16));
    // 8 * (y[m] + y[m + 1] + y[m + 16] + y[m + 17]) in the int16 lanes that hold q * y pair sums.
    const __m256i c =
        _mm256_add_epi16(_mm256_maddubs_epi16(eight, ylo), _mm256_maddubs_epi16(eight, yhi));
    __m256i d[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(rows[2 * p][i].qs)),
                                                load128(rows[2 * p + 1][i].qs), 1);
      d[p] = partial(_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), ylo,
                     yhi, c);
    }
    // Two int16 horizontal adds (each lane then sums 16 products (q - 8) * y, |sum| <= 16256),
    // then one madd to int32. Lanes: low half rows 0, 2, 4, 6; high half rows 1, 3, 5, 7.
    const __m256i h =
        _mm256_hadd_epi16(_mm256_hadd_epi16(d[0], d[1]), _mm256_hadd_epi16(d[2], d[3]));
    const __m256i sums = _mm256_madd_epi16(h, ones);
    // The eight scales, gathered in general-purpose registers (the vector ports are the busy ones).
    const uint64_t even =
        static_cast<uint64_t>(rows[0][i].d) | static_cast<uint64_t>(rows[2][i].d) << 16 |
        static_cast<uint64_t>(rows[4][i].d) << 32 | static_cast<uint64_t>(rows[6][i].d) << 48;
    const uint64_t odd =
        static_cast<uint64_t>(rows[1][i].d) | static_cast<uint64_t>(rows[3][i].d) << 16 |
        static_cast<uint64_t>(rows[5][i].d) << 32 | static_cast<uint64_t>(rows[7][i].d) << 48;
    const __m128i dh = _mm_set_epi64x(static_cast<int64_t>(odd), static_cast<int64_t>(even));
    const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_set1_ps(avx2::h2f(y[i].d)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  static constexpr int kLaneOfRow[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int r = 0; r < nr; ++r) out[r] = lanes[kLaneOfRow[r]];
}

// One weight row against nx (1-4) activation rows xs bytes apart.
template <int NX>
void dot_tokens(int64_t n, const BlockQ4_0* a, const uint8_t* x, size_t xs, float* out) {
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    // Here the codes are made signed (q - 8) and their sign moved onto y, which costs less than
    // the offset term when the weight block is not shared by several rows; P is the same integer.
    const __m256i q = _mm256_sub_epi8(avx2::unpack_nibbles(a[i].qs), _mm256_set1_epi8(8));
    const __m256i aq = _mm256_sign_epi8(q, q);
    __m256i d[4];
    float dy[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // kept in registers: built with _mm_set_ps below
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      if (j >= NX) {
        d[j] = _mm256_setzero_si256();
        continue;
      }
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(x + j * xs)[i];
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
      d[j] = avx2::dot_u8_i8(aq, _mm256_sign_epi8(y, q));
      dy[j] = avx2::h2f(b.d);
    }
    // Lanes: low half [t0, t1, t2, t3] over elements 0-15, high half the same over 16-31.
    const __m256i h = avx2::sum4_i32(d[0], d[1], d[2], d[3]);
    const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    const __m128 scale =
        _mm_mul_ps(_mm_set1_ps(avx2::h2f(a[i].d)), _mm_set_ps(dy[3], dy[2], dy[1], dy[0]));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), scale, acc);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, acc);
  for (int j = 0; j < NX; ++j) out[j] = lanes[j];
}

}  // namespace

float vec_dot_q4_0_avx2(int64_t n, const void* w, const void* x) {
  float r;
  dot_tokens<1>(n, static_cast<const BlockQ4_0*>(w), static_cast<const uint8_t*>(x), 0, &r);
  return r;
}

void vec_dot_rows_q4_0_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,
                            float* out) {
  using Fn = void (*)(int64_t, const BlockQ4_0*, const uint8_t*, size_t, float*);
  static constexpr Fn kFns[] = {dot_tokens<1>, dot_tokens<2>, dot_tokens<3>, dot_tokens<4>};
  kFns[nx - 1](n, static_cast<const BlockQ4_0*>(w), static_cast<const uint8_t*>(x), xs, out);
}

void vec_dot_wrows_q4_0_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                             float* out) {
  const BlockQ4_0* rows[kRows];
  for (int r = 0; r < kRows; ++r)
    rows[r] = reinterpret_cast<const BlockQ4_0*>(static_cast<const uint8_t*>(w) +
                                                 static_cast<size_t>(r < nr ? r : nr - 1) * ws);
  dot_rows8(n, rows, static_cast<const BlockQ8_0*>(x), kRows * ws, nr, out);
}

}  // namespace nexus::cpu
