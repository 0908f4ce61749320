// AVX2 dot products of NR weight rows with NX activation rows in a single pass, for Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K and Q6_K (Q4_0 has its own kernels in dot_q4_0_avx2.cc). Two uses:
//   - prefill (NR = 1, NX <= 4 tokens): a weight block's nibbles and scales are decoded once and
//     applied to every token;
//   - decode (NR <= 4 weight rows, NX = 1): an activation block is loaded once for four rows, and
//     the four independent accumulators hide the FMA latency that one row's chain exposes.
// Every (row, token) pair runs the same operations in the same order, so the single-row vec_dot
// (NR = NX = 1) is bit-identical to any batched result.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

using avx2::h2f;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

template <typename B>
inline const B* row_blocks(const uint8_t* base, size_t stride, int r) {
  return reinterpret_cast<const B*>(base + static_cast<size_t>(r) * stride);
}

// Several weight rows at once read NR interleaved streams, each only a row long: too short for the
// hardware prefetcher to lock on. So while block i is processed, the same span of the next group
// of NR rows (contiguous in memory, as in every weight matrix) is prefetched.
template <int NR, typename B>
inline void prefetch_next_group(const uint8_t* w, size_t ws, int64_t i) {
  if constexpr (NR > 1) {
    constexpr size_t kSpan = NR * sizeof(B);
    const uint8_t* p = w + NR * ws + static_cast<size_t>(i) * kSpan;
    for (size_t o = 0; o < kSpan; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
  }
}

// acc + s * float(sumi): a super-block's exact integer sums, scaled once.
inline __m256 add_scaled(__m256 acc, float s, __m256i sumi) {
  return _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(sumi), acc);
}

// An f16 broadcast to 8 f32 lanes.
inline __m256 h2f_bcast(Half h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }

// Q8_0 x Q8_0.
template <int NR, int NX>
void dot_q8_0(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  __m256 acc[NR][NX];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    prefetch_next_group<NR, BlockQ8_0>(w, ws, i);
    __m256i y[NX];
    __m256 dy[NX];
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_0& b = row_blocks<BlockQ8_0>(x, xs, j)[i];
      y[j] = load256(b.qs);
      dy[j] = h2f_bcast(b.d);
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const BlockQ8_0& a = row_blocks<BlockQ8_0>(w, ws, r)[i];
      const __m256i q = load256(a.qs);
      const __m256i aq = _mm256_sign_epi8(q, q);
      const __m256 dw = h2f_bcast(a.d);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const __m256i p = avx2::dot_u8_i8(aq, _mm256_sign_epi8(y[j], q));
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, dy[j]), acc[r][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) out[r * NX + j] = avx2::hsum(acc[r][j]);
}

// The eight 6-bit scales and mins of a Q4_K super-block as bytes (sc in the low 8 bytes, m in the
// high 8), from the 12 packed bytes with 32-bit word operations (layout in docs/KERNELS.md).
inline __m128i q4_k_scales_mins(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, sizeof(u));
  const uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t m_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
  return _mm_set_epi32(static_cast<int>(m_hi), static_cast<int>(m_lo), static_cast<int>(sc_hi),
                       static_cast<int>(sc_lo));
}

// Q4_K and Q5_K x Q8_K: per super-block, the 8 scales become int16 multipliers for madd (one byte
// shuffle each) and the mins meet the Q8_K group sums in one madd; both are decoded once for all
// tokens. Q5_K (B = BlockQ5_K) adds each code's fifth bit from qh: bit 2c of qh byte l is element
// 64c + l's, bit 2c + 1 element 64c + 32 + l's (the layout of docs/KERNELS.md).
template <typename B, int NR, int NX>
void dot_k_scaled(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  constexpr bool kFifthBit = std::is_same_v<B, BlockQ5_K>;
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  // Shuffle that spreads int16 scale s (bytes 2s, 2s+1 of a 16-byte lane) over a lane.
  __m256i pick[8];
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s)
    pick[s] = _mm256_set1_epi16(static_cast<short>(0x0100 * (2 * s + 1) + 2 * s));
  __m256 acc[NR][NX];
  __m128 mins[NR][NX];  // the min terms, in 4 lanes
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      acc[r][j] = _mm256_setzero_ps();
      mins[r][j] = _mm_setzero_ps();
    }
  for (int64_t i = 0; i < n / kQKK; ++i) {
    prefetch_next_group<NR, B>(w, ws, i);
    // Activation group sums in pairs: bp[j] lane s = bsums[2s] + bsums[2s + 1] (fits int16).
    __m128i bp[NX];
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.bsums + 8));
      bp[j] = _mm_hadd_epi16(lo, hi);
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const B& a = row_blocks<B>(w, ws, r)[i];
      const __m128i scm = q4_k_scales_mins(a.scales);
      __m256i qh = _mm256_setzero_si256();
      if constexpr (kFifthBit) qh = load256(a.qh);
      const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
      const __m128i m16 = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(scm, scm));
      __m256i sumi[NX];
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) sumi[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(a.qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if constexpr (kFifthBit) {
          // Bits 2c and 2c + 1 of every qh byte to bit 4 of lo and hi (a 16-bit shift may carry a
          // neighbour byte's bit in, which the mask with one drops).
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
          hi = _mm256_or_si256(
              hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
          qh = _mm256_srli_epi16(qh, 2);
        }
        const __m256i s0 = _mm256_shuffle_epi8(sc16, pick[2 * c]);
        const __m256i s1 = _mm256_shuffle_epi8(sc16, pick[2 * c + 1]);
#pragma GCC unroll 8
        for (int j = 0; j < NX; ++j) {
          const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
          const __m256i p0 =
              _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(b.qs + 64 * c)), s0);
          const __m256i p1 =
              _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(b.qs + 64 * c + 32)), s1);
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p0, p1));
        }
      }
      const float dw = h2f(a.d), mw = h2f(a.dmin);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
        acc[r][j] = add_scaled(acc[r][j], dw * b.d, sumi[j]);
        mins[r][j] = _mm_fmadd_ps(_mm_set1_ps(mw * b.d),
                                  _mm_cvtepi32_ps(_mm_madd_epi16(m16, bp[j])), mins[r][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j)
      out[r * NX + j] = avx2::hsum(_mm256_sub_ps(acc[r][j], _mm256_zextps128_ps256(mins[r][j])));
}

template <int NR, int NX>
void dot_q4_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  dot_k_scaled<BlockQ4_K, NR, NX>(n, w, ws, x, xs, out);
}
template <int NR, int NX>
void dot_q5_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  dot_k_scaled<BlockQ5_K, NR, NX>(n, w, ws, x, xs, out);
}

// In-lane shuffles of int16 scales s0..s7 held in both lanes: pick[k] gives 8 copies of scale 2k
// in the low lane and 8 of scale 2k + 1 in the high lane (the two sub-blocks of 16 that a vector
// of 32 consecutive elements covers).
struct PairPicks {
  __m256i v[4];
  PairPicks() {
    for (int k = 0; k < 4; ++k)
      v[k] = _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(0x0100 * (4 * k + 3) + 4 * k + 2)),
                              _mm_set1_epi16(static_cast<short>(0x0100 * (4 * k + 1) + 4 * k)));
  }
};

// Q2_K x Q8_K: sum_g d * sc[g] * sum q * y - dmin * m[g] * bsums[g], codes 0..3 unsigned
// (maddubs), the 16 4-bit scales widened to int16 multipliers and the mins against the Q8_K group
// sums in one madd, decoded once for all tokens.
template <int NR, int NX>
void dot_q2_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  const PairPicks pick;
  const __m128i m4 = _mm_set1_epi8(0x0F);
  __m256 acc[NR][NX], mins[NR][NX];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) acc[r][j] = mins[r][j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    prefetch_next_group<NR, BlockQ2_K>(w, ws, i);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const BlockQ2_K& a = row_blocks<BlockQ2_K>(w, ws, r)[i];
      const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.scales));
      const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s8, m4));
      const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
      const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                  _mm256_permute2x128_si256(sc16, sc16, 0x11)};
      __m256i sumi[NX];
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) sumi[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i qs = load256(a.qs + 32 * h);
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const __m256i q = avx2::low2_codes(qs, c);
          const __m256i scales = _mm256_shuffle_epi8(sc_half[h], pick.v[c]);
#pragma GCC unroll 8
          for (int j = 0; j < NX; ++j) {
            const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
            const __m256i p = _mm256_maddubs_epi16(q, load256(b.qs + 128 * h + 32 * c));
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, scales));
          }
        }
      }
      const float dw = h2f(a.d), mw = h2f(a.dmin);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
        acc[r][j] = add_scaled(acc[r][j], dw * b.d, sumi[j]);
        const __m256i mm = _mm256_madd_epi16(m16, load256(b.bsums));
        mins[r][j] = _mm256_fmadd_ps(_mm256_set1_ps(mw * b.d), _mm256_cvtepi32_ps(mm), mins[r][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) out[r * NX + j] = avx2::hsum(_mm256_sub_ps(acc[r][j], mins[r][j]));
}

// The code policies of dot_k16: a super-block's 16 scales as int16, the code offset they are
// taken against (as a shift: 2^kOffsetShift), and the 32 unsigned codes of elements
// 128h + 32k .. 128h + 32k + 31 for k < 4 (two sub-blocks of 16 each).
struct Q6Codes {
  using Block = BlockQ6_K;
  static constexpr int kOffsetShift = 5;  // codes 0..63, value q - 32
  static __m256i scales(const BlockQ6_K& a) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.scales)));
  }
  static void codes(const BlockQ6_K& a, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const uint8_t* ql = a.ql + 64 * h;
    const __m256i l0 = load256(ql), l1 = load256(ql + 32), hb = load256(a.qh + 32 * h);
    // The two high bits of each code, shifted to bits 4-5 of its byte: 16-bit shifts move bits
    // across bytes, and the 0x30 mask drops what crossed.
    q[0] =
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    q[1] =
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    q[2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
  }
};

struct Q3Codes {
  using Block = BlockQ3_K;
  static constexpr int kOffsetShift = 2;  // codes 0..7 (low 2 bits + 4 * the hmask bit), q - 4
  static __m256i scales(const BlockQ3_K& a) {
    return _mm256_cvtepi8_epi16(avx2::q3_k_scales(a.scales));
  }
  static void codes(const BlockQ3_K& a, int h, __m256i q[4]) {
    const __m256i qs = load256(a.qs + 32 * h), hm = load256(a.hmask);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) q[c] = avx2::q3_k_codes(qs, hm, h, c);
  }
};

// Q6_K and Q3_K x Q8_K: 16 sub-blocks of 16 with signed scales. The codes are decoded once per
// half super-block as unsigned bytes for maddubs; the offset comes back through the Q8_K group
// sums (sum sc*(q-o)*y = sum sc*q*y - o * sum_g sc[g] * bsums[g]), in one madd.
template <typename Codes, int NR, int NX>
void dot_k16(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  using B = typename Codes::Block;
  const PairPicks pick;
  __m256 acc[NR][NX];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    prefetch_next_group<NR, B>(w, ws, i);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const B& a = row_blocks<B>(w, ws, r)[i];
      const __m256i sc16 = Codes::scales(a);
      // s0..s7 in both lanes (groups of the first half), s8..s15 in both (the second half).
      const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                                  _mm256_permute2x128_si256(sc16, sc16, 0x11)};
      __m256i sumi[NX];
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
        const __m256i off = _mm256_madd_epi16(sc16, load256(b.bsums));
        sumi[j] =
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, Codes::kOffsetShift));
      }
#pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        __m256i q[4];
        Codes::codes(a, h, q);
#pragma GCC unroll 8
        for (int k = 0; k < 4; ++k) {
          // Low 128-bit lane holds elements 0-15 (group g), high lane 16-31 (group g + 1).
          const __m256i scales = _mm256_shuffle_epi8(sc_half[h], pick.v[k]);
#pragma GCC unroll 8
          for (int j = 0; j < NX; ++j) {
            const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
            const __m256i p = _mm256_maddubs_epi16(q[k], load256(b.qs + 128 * h + 32 * k));
            sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, scales));
          }
        }
      }
      const float dw = h2f(a.d);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const BlockQ8_K& b = row_blocks<BlockQ8_K>(x, xs, j)[i];
        acc[r][j] = add_scaled(acc[r][j], dw * b.d, sumi[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) out[r * NX + j] = avx2::hsum(acc[r][j]);
}

template <int NR, int NX>
void dot_q6_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  dot_k16<Q6Codes, NR, NX>(n, w, ws, x, xs, out);
}
template <int NR, int NX>
void dot_q3_k(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  dot_k16<Q3Codes, NR, NX>(n, w, ws, x, xs, out);
}

using Fn = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*);

// Every kernel<NR, NX> for NR, NX <= 4: index [NR - 1][NX - 1].
template <void (*K1)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*),
          void (*K2)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*),
          void (*K3)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*),
          void (*K4)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*)>
struct Row {
  static constexpr Fn kFns[4] = {K1, K2, K3, K4};
};
#define NEXUS_TILE_ROW(t, r) Row<dot_##t<r, 1>, dot_##t<r, 2>, dot_##t<r, 3>, dot_##t<r, 4>>::kFns
#define NEXUS_TILE_TABLE(t) \
  { NEXUS_TILE_ROW(t, 1), NEXUS_TILE_ROW(t, 2), NEXUS_TILE_ROW(t, 3), NEXUS_TILE_ROW(t, 4) }

// nr weight rows x nx tokens in passes of at most R x T (the type's measured best shape; the
// smaller kernels take the tails), results scattered to y[j * ys + r].
template <int R, int T>
void dot_tile(const Fn* const (&fns)[4], int64_t n, const uint8_t* w, size_t ws, const uint8_t* x,
              size_t xs, int nr, int nx, float* y, size_t ys) {
  for (int r = 0; r < nr; r += R) {
    const int pr = nr - r < R ? nr - r : R;
    for (int j = 0; j < nx; j += T) {
      const int px = nx - j < T ? nx - j : T;
      float out[R * T];
      fns[pr - 1][px - 1](n, w + r * ws, ws, x + j * xs, xs, out);
      for (int a = 0; a < pr; ++a)
        for (int b = 0; b < px; ++b) y[(j + b) * ys + r + a] = out[a * px + b];
    }
  }
}

// One activation row against 1-8 weight rows (in passes of at most four), and one weight row
// against 1-4 activation rows.
#define NEXUS_DOT_MULTI(t)                                                                       \
  void vec_dot_rows_##t##_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,       \
                               float* out) {                                                     \
    static constexpr Fn kFns[] = {dot_##t<1, 1>, dot_##t<1, 2>, dot_##t<1, 3>, dot_##t<1, 4>};   \
    kFns[nx - 1](n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), xs, out); \
  }                                                                                              \
  void vec_dot_wrows_##t##_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,      \
                                float* out) {                                                    \
    static constexpr Fn kFns[] = {dot_##t<1, 1>, dot_##t<2, 1>, dot_##t<3, 1>, dot_##t<4, 1>};   \
    const auto* wb = static_cast<const uint8_t*>(w);                                             \
    for (int r = 0; r < nr; r += 4)                                                              \
      kFns[(nr - r < 4 ? nr - r : 4) - 1](n, wb + r * ws, ws, static_cast<const uint8_t*>(x), 0, \
                                          out + r);                                              \
  }                                                                                              \
  void vec_dot_tile_##t##_avx2(int64_t n, const void* w, size_t ws, const void* x, size_t xs,    \
                               int nr, int nx, float* y, size_t ys) {                            \
    static constexpr const Fn* kFns[4] = NEXUS_TILE_TABLE(t);                                    \
    dot_tile<kTileR_##t, kTileT_##t>(kFns, n, static_cast<const uint8_t*>(w), ws,                \
                                     static_cast<const uint8_t*>(x), xs, nr, nx, y, ys);         \
  }                                                                                              \
  float vec_dot_##t##_avx2(int64_t n, const void* w, const void* x) {                            \
    float r;                                                                                     \
    dot_##t<1, 1>(n, static_cast<const uint8_t*>(w), 0, static_cast<const uint8_t*>(x), 0, &r);  \
    return r;                                                                                    \
  }

// Tile shapes (weight rows x tokens per pass) for batched decode, chosen with BM_DecodeTile.
constexpr int kTileR_q8_0 = 4, kTileT_q8_0 = 4;
constexpr int kTileR_q2_k = 4, kTileT_q2_k = 4;  // not measured: Q6_K's shape, whose loop it has
constexpr int kTileR_q3_k = 4, kTileT_q3_k = 4;
constexpr int kTileR_q4_k = 4, kTileT_q4_k = 4;
constexpr int kTileR_q5_k = 4, kTileT_q5_k = 4;  // as Q4_K's, whose kernel it shares
constexpr int kTileR_q6_k = 4, kTileT_q6_k = 4;

}  // namespace

NEXUS_DOT_MULTI(q8_0)
NEXUS_DOT_MULTI(q2_k)
NEXUS_DOT_MULTI(q3_k)
NEXUS_DOT_MULTI(q4_k)
NEXUS_DOT_MULTI(q5_k)
NEXUS_DOT_MULTI(q6_k)

#undef NEXUS_DOT_MULTI
#undef NEXUS_TILE_TABLE
#undef NEXUS_TILE_ROW

}  // namespace nexus::cpu
