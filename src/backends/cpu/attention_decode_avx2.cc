// AVX2/FMA single-token attention straight from the cache rows (see attention_decode.h).
// Scores: 8 keys per pass, one accumulator per key over the head, the 8 sums reduced together
// (hadd tree) and stored as one vector. Values: per query head and slice of up to 64 elements,
// the output slice stays in registers while all the keys' weighted value slices are added in.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_decode.h"
#include "backends/cpu/attention_tile.h"
#include "backends/cpu/blocks.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

// Elements i..i+7 of a cache row as f32 (i a multiple of 8), exactly as the type's dequantizer
// gives them.
struct F32Row {
  static size_t bytes(int64_t i) { return 4 * i; }
  static __m256 load(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
};
struct F16Row {
  static size_t bytes(int64_t i) { return 2 * i; }
  static __m256 load(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
};
struct Q8Row {
  static size_t bytes(int64_t i) { return i / kQK * sizeof(BlockQ8_0); }
  static __m256 load(const uint8_t* row, int64_t i) {
    const uint8_t* b = row + (i / kQK) * sizeof(BlockQ8_0);
    Half d;
    std::memcpy(&d, b, sizeof(d));
    const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + i % kQK));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)),
                         _mm256_set1_ps(_cvtsh_ss(d)));
  }
};

// The lines of bytes [b0, b1) of `rows` rows rb bytes apart (the last byte's line included) from
// each base, one line of every base per step(), with that base's hint: a block's prefetches spread
// over its multiply-adds instead of issued in one burst, which stalled on the core's few
// outstanding misses before any FMA ran. finish() issues what is left at once (alone: the whole
// walk as one burst). The bases share one position, so a step costs little more than its
// prefetches (a walk per base ran cold heads about 13% slower).
template <int... kHints>
class PrefetchWalk {
 public:
  PrefetchWalk(std::array<const uint8_t*, sizeof...(kHints)> bases, size_t rb, int rows, size_t b0,
               size_t b1)
      : base_(bases), rb_(rb), b0_(b0), b1_(b1), b_(b0), rows_(rows) {}
  void step() {
    if (rows_ <= 0) return;
    const size_t at = row_ + (b_ < b1_ ? b_ : b1_ - 1);
    int i = 0;
    (_mm_prefetch(reinterpret_cast<const char*>(base_[i++] + at), static_cast<_mm_hint>(kHints)),
     ...);
    b_ += 64;
    if (b_ >= b1_ + 63) {  // past the line of the last byte
      b_ = b0_;
      row_ += rb_;
      --rows_;
    }
  }
  void finish() {
    while (rows_ > 0) step();
  }

 private:
  std::array<const uint8_t*, sizeof...(kHints)> base_;
  size_t rb_, b0_, b1_, b_, row_ = 0;
  int rows_;
};

// The prefetches of one 8-key block, one line of each per 8 elements of a score: the keys
// kNearKeys rows ahead into L1, kFarKeys rows ahead into L2, and the block's values into L2 (the
// value pass reads them after the chunk's scores).
using BlockPrefetch = PrefetchWalk<_MM_HINT_T0, _MM_HINT_T1, _MM_HINT_T1>;

// Prefetch distances in cache rows. An L1 prefetch that misses to DRAM likely holds one of the
// core's few miss buffers for the whole trip; with the far L2 walk the L1 ones find their lines in
// L2 (cold heads nearly 2x faster; far 16-128 and near 0-8 within 10%: docs/KERNELS.md).
constexpr int kNearKeys = 4;
constexpr int kFarKeys = 32;

// scale * q . key j for the 8 keys whose rows start at r, rb bytes apart, as one vector.
template <class R>
inline __m256 score8(const float* q, const uint8_t* r, size_t rb, int64_t off, int64_t hd,
                     __m256 scale, BlockPrefetch& pf) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (int64_t e = 0; e < hd; e += 8) {
    pf.step();
    const __m256 qv = _mm256_loadu_ps(q + e);
    const int64_t i = off + e;
    a0 = _mm256_fmadd_ps(qv, R::load(r, i), a0);
    a1 = _mm256_fmadd_ps(qv, R::load(r + rb, i), a1);
    a2 = _mm256_fmadd_ps(qv, R::load(r + 2 * rb, i), a2);
    a3 = _mm256_fmadd_ps(qv, R::load(r + 3 * rb, i), a3);
    a4 = _mm256_fmadd_ps(qv, R::load(r + 4 * rb, i), a4);
    a5 = _mm256_fmadd_ps(qv, R::load(r + 5 * rb, i), a5);
    a6 = _mm256_fmadd_ps(qv, R::load(r + 6 * rb, i), a6);
    a7 = _mm256_fmadd_ps(qv, R::load(r + 7 * rb, i), a7);
  }
  return _mm256_mul_ps(avx2::sum8_ps(a0, a1, a2, a3, a4, a5, a6, a7), scale);
}

template <class R>
inline float score1(const float* q, const uint8_t* r, int64_t off, int64_t hd, float scale) {
  __m256 a = _mm256_setzero_ps();
  for (int64_t e = 0; e < hd; e += 8)
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), R::load(r, off + e), a);
  return avx2::hsum(a) * scale;
}

// o[0, 8 NR) += sum_j w[j] * elements [i, i + 8 NR) of value j, for the n values whose rows start
// at v: the NR output vectors stay in registers for the whole pass; NK keys go to separate sets of
// accumulators (summed at the end) so narrow slices are not bound by the FMA latency.
template <class R, int NR>
void accumulate_slice(const float* w, const uint8_t* v, size_t rb, int64_t i, int32_t n, float* o) {
  constexpr int NK = NR >= 4 ? 1 : 8 / NR / 2;
  __m256 acc[NK][NR];
  _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) acc[0][r] = _mm256_loadu_ps(o + 8 * r);
  _Pragma("GCC unroll 8") for (int k = 1; k < NK; ++k)
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) acc[k][r] = _mm256_setzero_ps();
  int32_t j = 0;
  for (; j + NK <= n; j += NK) {
    _Pragma("GCC unroll 8") for (int k = 0; k < NK; ++k) {
      const __m256 wv = _mm256_broadcast_ss(w + j + k);
      const uint8_t* row = v + (j + k) * rb;
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) acc[k][r] =
          _mm256_fmadd_ps(wv, R::load(row, i + 8 * r), acc[k][r]);
    }
  }
  for (; j < n; ++j) {
    const __m256 wv = _mm256_broadcast_ss(w + j);
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) acc[0][r] =
        _mm256_fmadd_ps(wv, R::load(v + j * rb, i + 8 * r), acc[0][r]);
  }
  _Pragma("GCC unroll 8") for (int k = 1; k < NK; ++k)
      _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) acc[0][r] =
          _mm256_add_ps(acc[0][r], acc[k][r]);
  _Pragma("GCC unroll 8") for (int r = 0; r < NR; ++r) _mm256_storeu_ps(o + 8 * r, acc[0][r]);
}

// out[g] += sum_j w[g * ldw + j] * value j, for the n values whose rows start at v: per query
// head, slices of up to 64 elements of the head.
template <class R>
void accumulate(const float* w, int64_t ldw, const uint8_t* v, size_t rb, int64_t off, int32_t n,
                int64_t hd, int64_t group, float* out) {
  using Fn = void (*)(const float*, const uint8_t*, size_t, int64_t, int32_t, float*);
  static constexpr Fn kSlice[8] = {accumulate_slice<R, 1>, accumulate_slice<R, 2>,
                                   accumulate_slice<R, 3>, accumulate_slice<R, 4>,
                                   accumulate_slice<R, 5>, accumulate_slice<R, 6>,
                                   accumulate_slice<R, 7>, accumulate_slice<R, 8>};
  for (int64_t g = 0; g < group; ++g) {
    for (int64_t e = 0; e < hd; e += 64) {
      const int64_t nr = std::min<int64_t>(8, (hd - e) / 8);
      kSlice[nr - 1](w + g * ldw, v, rb, off + e, n, out + g * hd + e);
    }
  }
}

inline void scale_row(float* o, int64_t hd, float f) {
  const __m256 fv = _mm256_set1_ps(f);
  for (int64_t e = 0; e < hd; e += 8)
    _mm256_storeu_ps(o + e, _mm256_mul_ps(_mm256_loadu_ps(o + e), fv));
}

template <class R>
void decode(const AttnDecode& a) {
  const int64_t hd = a.hd, group = a.group, heads = (a.h1 - a.h0) * group;
  const size_t rb = a.row_bytes;
  // The bytes of the rows this call reads (heads h0..h1), for the prefetches.
  const size_t b0 = R::bytes(a.h0 * hd), b1 = R::bytes(a.h1 * hd);
  const __m256 scale = _mm256_set1_ps(a.scale);
  float* mx = a.scores + heads * kDecodeChunk;
  float* sum = mx + heads;
  std::fill(a.out, a.out + heads * hd, 0.0f);
  std::fill(mx, mx + heads, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + heads, 0.0f);
  for (int32_t c0 = 0; c0 < a.cnt; c0 += kDecodeChunk) {
    const int32_t n = std::min(kDecodeChunk, a.cnt - c0);
    const uint8_t* k = a.k + c0 * rb;
    const uint8_t* v = a.v + c0 * rb;
    // Scores, 8 keys at a time for every head of the range (the block's rows are read whole),
    // with the block's prefetch walks (BlockPrefetch) spread over them: the cache is usually
    // cold, the weights streamed through since the last token, and the same prefetches issued in
    // bursts before the block ran slower (docs/KERNELS.md). The far walk runs on into
    // the next chunk (up to the call's last key), so only the first chunk starts with its first
    // kFarKeys rows not yet on their way.
    const int32_t left = a.cnt - c0;
    if (c0 == 0) PrefetchWalk<_MM_HINT_T1>({k}, rb, std::min(kFarKeys, n), b0, b1).finish();
    PrefetchWalk<_MM_HINT_T0>({k}, rb, std::min(kNearKeys, n), b0, b1).finish();
    int32_t j = 0;
    for (; j + 8 <= n; j += 8) {
      // Near the end the key walks take the last 8 rows there are (already on their way).
      BlockPrefetch pf({k + std::min(j + kNearKeys, n - 8) * rb,
                        k + std::min(j + kFarKeys, left - 8) * rb, v + j * rb},
                       rb, 8, b0, b1);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = (a.h0 + h / group) * hd;
        _mm256_storeu_ps(a.scores + h * kDecodeChunk + j,
                         score8<R>(a.q + h * hd, k + j * rb, rb, off, hd, scale, pf));
      }
      pf.finish();
    }
    for (; j < n; ++j) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = (a.h0 + h / group) * hd;
        a.scores[h * kDecodeChunk + j] = score1<R>(a.q + h * hd, k + j * rb, off, hd, a.scale);
      }
    }
    for (int64_t h = 0; h < heads; ++h) {
      const float corr = attn_row_softmax_avx2(a.scores + h * kDecodeChunk, n, mx + h, sum + h);
      if (c0 > 0 && corr != 1.0f) scale_row(a.out + h * hd, hd, corr);
    }
    for (int64_t h = 0; h < heads; h += group)
      accumulate<R>(a.scores + h * kDecodeChunk, kDecodeChunk, v, rb, (a.h0 + h / group) * hd, n,
                    hd, group, a.out + h * hd);
  }
  for (int64_t h = 0; h < heads; ++h) scale_row(a.out + h * hd, hd, 1.0f / sum[h]);
  if (a.max != nullptr) std::copy(mx, mx + heads, a.max);
  if (a.sum != nullptr) std::copy(sum, sum + heads, a.sum);
}

}  // namespace

void attn_decode_f32_avx2(const AttnDecode& a) { decode<F32Row>(a); }
void attn_decode_f16_avx2(const AttnDecode& a) { decode<F16Row>(a); }
void attn_decode_q8_0_avx2(const AttnDecode& a) { decode<Q8Row>(a); }

}  // namespace nexus::cpu
