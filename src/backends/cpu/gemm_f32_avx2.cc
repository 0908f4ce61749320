// The f32 GEMM of gemm_f32.h on AVX2/FMA (the machine: no AVX-512). The AVX-512 file's
// loop nest with a 6 x 16 register tile (12 ymm accumulators, two for op(B), one broadcast: 15 of
// the 16 registers), 8 x 8 register transposes for the packs, and passes of 384 k.
//
// Loop nest, for each pass of up to 384 k (p0):
//   pack every row of op(A) into 6-row panels, k-major (m x 384 floats);
//   for each block of op(B)'s columns that fits 256 KiB (160 at k = 384, 224 at 288; j0): pack
//   them into 16-column panels (half of Zen 3's 512 KiB L2);
//     for each 6-row panel of op(A) (its 9 KiB stay in L1 across the block):
//       for each 16-column panel of op(B): one call of the register tile.
// Masked stores (vmaskmovps) are slow on AMD cores, so 6-float rows are stored as 4 + 2 floats and
// the other partial stores go through a spill (edges only).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/gemm_f32_driver.h"

namespace nexus::cpu {
namespace {

constexpr int kMr = 6;                   // rows of the register tile
constexpr int kNr = 16;                  // columns of the register tile: two ymm
constexpr int64_t kKc = 384;             // k per pass
constexpr int64_t kBFloats = 64 * 1024;  // the op(B) block buffer: 256 KiB
constexpr int64_t kAhead = 8;            // rows of a row-by-row pack fetched ahead

inline int64_t lesser(int64_t x, int64_t y) { return x < y ? x : y; }

// A mask of the first `count` of 8 lanes (none for count <= 0), for vmaskmovps loads.
inline __m256i lanes(int64_t count) {
  const int live = count <= 0 ? 0 : count >= 8 ? 8 : static_cast<int>(count);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first `count` floats at p (zeros after them; nothing past them is read).
inline __m256 load_first(const float* p, int64_t count) {
  return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes(count));
}

// The 6 floats at p (a row of C^T), zeros after them: a 16-byte and an 8-byte load, which the
// head's d weight ran 5% faster than vmaskmovps.
// The 8-byte load is movq through _mm_loadl_epi64, whose operand may be unaligned (p + 4 is only
// 4-byte aligned; _mm_load_sd dereferences a double, which UBSan reports there).
inline __m256 load_six(const float* p) {
  const __m128 hi = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 4)));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), hi, 1);
}

// The first `count` lanes of v to p (1 to 8).
inline void store_first(float* p, __m256 v, int64_t count) {
  if (count >= 8) return _mm256_storeu_ps(p, v);
  if (count == kMr) {
    _mm_storeu_ps(p, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(p + 4), _mm256_extractf128_ps(v, 1));
    return;
  }
  alignas(32) float spill[8];
  _mm256_store_ps(spill, v);
  std::memcpy(p, spill, static_cast<size_t>(count) * sizeof(float));
}

// r[q] = column q of the 8 x 8 block whose rows were r[0..7].
inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int q = 0; q < 8; q += 2) {
    t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
    t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
  }
  for (int q = 0; q < 8; q += 4) {
    s[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
    s[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xEE);
    s[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
    s[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(s[q], s[q + 4], 0x31);
  }
}

inline void fetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

// C[mr x nr] (+)= sum over k < kp of Apanel(k, r) Bpanel(k, j): both panels k-major, 6 floats a
// k of op(A), 16 of op(B). Not inlined, and the 12 accumulators are named variables: as arrays
// (the AVX-512 file's form) GCC kept them on the stack here, and the tile alone ran at well under
// half the speed. kTransC: C held transposed, 6 floats in each of nr rows.
template <bool kTransC>
__attribute__((noinline)) void tile(int64_t kp, const float* __restrict a,
                                    const float* __restrict b, float* c, int64_t ldc,
                                    bool accumulate, int mr, int nr) {
  if (accumulate && !kTransC)
    for (int r = 0; r < mr; ++r) {
      fetch(c + r * ldc);
      fetch(c + r * ldc + 8);
    }
  if (accumulate && kTransC)  // the mr floats of a row of C^T may cross into a second line
    for (int q = 0; q < nr; ++q) {
      fetch(c + q * ldc);
      fetch(c + q * ldc + mr - 1);
    }
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00,
         a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  // Unrolled (kp is a multiple of 8): the same FMAs in the same order, so the same bits. Faster
  // than the plain loop on a busy machine (docs/KERNELS.md); 2 or 4 measured within 2% of 8.
#pragma GCC unroll 8
  for (int64_t k = 0; k < kp; ++k) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    __m256 x = _mm256_broadcast_ss(a);
    a00 = _mm256_fmadd_ps(x, b0, a00);
    a01 = _mm256_fmadd_ps(x, b1, a01);
    x = _mm256_broadcast_ss(a + 1);
    a10 = _mm256_fmadd_ps(x, b0, a10);
    a11 = _mm256_fmadd_ps(x, b1, a11);
    x = _mm256_broadcast_ss(a + 2);
    a20 = _mm256_fmadd_ps(x, b0, a20);
    a21 = _mm256_fmadd_ps(x, b1, a21);
    x = _mm256_broadcast_ss(a + 3);
    a30 = _mm256_fmadd_ps(x, b0, a30);
    a31 = _mm256_fmadd_ps(x, b1, a31);
    x = _mm256_broadcast_ss(a + 4);
    a40 = _mm256_fmadd_ps(x, b0, a40);
    a41 = _mm256_fmadd_ps(x, b1, a41);
    x = _mm256_broadcast_ss(a + 5);
    a50 = _mm256_fmadd_ps(x, b0, a50);
    a51 = _mm256_fmadd_ps(x, b1, a51);
    a += kMr;
    b += kNr;
  }
  __m256 c0[kMr] = {a00, a10, a20, a30, a40, a50}, c1[kMr] = {a01, a11, a21, a31, a41, a51};
  if constexpr (kTransC) {  // C(r, j) at c[j * ldc + r]: each 8 columns transposed to rows
    for (int h = 0; h < 2; ++h) {
      __m256 t[8];
      for (int r = 0; r < 8; ++r) t[r] = r < kMr ? (h ? c1[r] : c0[r]) : _mm256_setzero_ps();
      transpose8(t);
      for (int q = 0; q < 8 && h * 8 + q < nr; ++q) {
        float* cq = c + (h * 8 + q) * ldc;
        if (accumulate) t[q] = _mm256_add_ps(t[q], mr == kMr ? load_six(cq) : load_first(cq, mr));
        store_first(cq, t[q], mr);
      }
    }
    return;
  }
  if (mr == kMr && nr == kNr) {
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      float* cr = c + r * ldc;
      if (accumulate) {
        c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(cr));
        c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(cr + 8));
      }
      _mm256_storeu_ps(cr, c0[r]);
      _mm256_storeu_ps(cr + 8, c1[r]);
    }
    return;
  }
  for (int r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      c0[r] = _mm256_add_ps(c0[r], load_first(cr, nr));
      if (nr > 8) c1[r] = _mm256_add_ps(c1[r], load_first(cr + 8, nr - 8));
    }
    store_first(cr, c0[r], nr);
    if (nr > 8) store_first(cr + 8, c1[r], nr - 8);
  }
}

// 8 f16 (kBf16 false) or bf16 values as f32: exact either way.
template <bool kBf16>
inline __m256 widen(__m128i h) {
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

// The first `count` (0 to 8) half values at p as f32 (zeros after them; nothing past them read).
template <bool kBf16>
inline __m256 load_half(const uint16_t* p, int64_t count) {
  if (count >= 8) return widen<kBf16>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t part[8] = {};
  if (count > 0) std::memcpy(part, p, static_cast<size_t>(count) * sizeof(uint16_t));
  return widen<kBf16>(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}

// Columns [j0, j0 + nc) of op(B), k in [p0, p0 + kc), into 16-column panels: panel q at
// dst + q * kp * 16, k-major. Rows from kc to kp and columns past nc are zero. B's elements are E,
// read by Load(p, count) (the first count of 8 as f32, zeros after them, nothing past them read):
// f32 (load_first), or the f16/bf16 bits of prefill's weights and of the F16 KV cache
// (load_half), converted as they are packed. The transposing form fetches the next panel's rows
// every kFetchK k (a 64-byte line of f16; every 8 k of f32, as before the half forms existed).
template <typename E, __m256 (*Load)(const E*, int64_t), int kFetchK>
void pack_b_of(bool trans_b, const E* b, int64_t ldb, int64_t j0, int64_t nc, int64_t p0,
               int64_t kc, int64_t kp, float* dst) {
  constexpr int64_t kLine = 64 / sizeof(E);  // elements a cache line
  if (!trans_b) {  // op(B)(k, j) = b[k * ldb + j]: row by row, each row into every panel
    for (int64_t k = 0; k < kp; ++k) {
      const E* s = k < kc ? b + (p0 + k) * ldb + j0 : b;  // past kc: zeros, nothing read
      if (k + kAhead < kc)
        for (int64_t jp = 0; jp < nc; jp += kLine) fetch(s + kAhead * ldb + jp);
      for (int64_t jp = 0; jp < nc; jp += kNr) {
        float* d = dst + jp * kp + k * kNr;
        const int64_t live = k < kc ? nc - jp : 0;
        _mm256_store_ps(d, Load(s + jp, live));
        _mm256_store_ps(d + 8, Load(s + jp + 8, live - 8));
      }
    }
    return;
  }
  // op(B)(k, j) = b[j * ldb + k]: 8 x 8 blocks transposed in registers.
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* d = dst + jp * kp;
    for (int64_t jj = 0; jj < kNr; jj += 8) {
      for (int64_t k = 0; k < kc; k += 8) {
        if (k % kFetchK == 0 && jp + kNr + jj + 8 <= nc)  // the same lines of the next panel's rows
          for (int q = 0; q < 8; ++q) fetch(b + (j0 + jp + kNr + jj + q) * ldb + p0 + k);
        __m256 r[8];
        for (int q = 0; q < 8; ++q) {
          const int64_t j = jp + jj + q;
          r[q] = j < nc ? Load(b + (j0 + j) * ldb + p0 + k, kc - k) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int q = 0; q < 8; ++q) _mm256_store_ps(d + (k + q) * kNr + jj, r[q]);
      }
    }
  }
}

constexpr auto pack_b = &pack_b_of<float, &load_first, 8>;
template <bool kBf16>
constexpr auto pack_b_half = &pack_b_of<uint16_t, &load_half<kBf16>, 32>;

// Rows [0, m) of op(A), k in [p0, p0 + kc), into 6-row panels, panel q at dst + q * kp * 6,
// k-major (6 floats a k). Rows from kc to kp and panel rows past m are zero. With sums (trans_a
// only), each row's sum over these k is added to sums[row].
void pack_a(bool trans_a, const float* a, int64_t lda, int64_t m, int64_t p0, int64_t kc,
            int64_t kp, float* dst, float* sums) {
  if (!trans_a) {  // A(i, k) = a[i * lda + k]: 8 (6 live) rows x 8 k transposed in registers
    for (int64_t r0 = 0; r0 < m; r0 += kMr) {
      float* d = dst + (r0 / kMr) * kp * kMr;
      for (int64_t k = 0; k < kc; k += 8) {
        const __m256i mk = lanes(kc - k);
        if (r0 + 2 * kMr <= m)  // the same lines of the next panel's rows
          for (int q = 0; q < kMr; ++q) fetch(a + (r0 + kMr + q) * lda + p0 + k);
        __m256 r[8];
        for (int q = 0; q < 8; ++q)
          r[q] = q < kMr && r0 + q < m ? _mm256_maskload_ps(a + (r0 + q) * lda + p0 + k, mk)
                                       : _mm256_setzero_ps();
        transpose8(r);
        for (int q = 0; q < 8; ++q) store_first(d + (k + q) * kMr, r[q], kMr);
      }
    }
    return;
  }
  // A(i, k) = a[k * lda + i]: each k is a copy of 6 floats of a row of a, swept over 48 rows of C
  // at a time with the rows 8 k ahead fetched.
  constexpr int64_t kGroup = 8 * kMr;
  for (int64_t g0 = 0; g0 < m; g0 += kGroup) {
    const int64_t g1 = lesser(m, g0 + kGroup);
    __m256 total[kGroup / kMr];
    for (__m256& t : total) t = _mm256_setzero_ps();
    for (int64_t k = 0; k < kp; ++k) {
      const float* s = k < kc ? a + (p0 + k) * lda : a;  // past kc: zeros, nothing read
      if (k + kAhead < kc)
        for (int64_t x = g0; x < g1; x += 16) fetch(s + kAhead * lda + x);
      for (int64_t r0 = g0; r0 < g1; r0 += kMr) {
        float* d = dst + (r0 / kMr) * kp * kMr + k * kMr;
        const __m256 v = _mm256_maskload_ps(s + r0, lanes(k < kc ? lesser(kMr, m - r0) : 0));
        store_first(d, v, kMr);
        if (sums != nullptr) total[(r0 - g0) / kMr] = _mm256_add_ps(total[(r0 - g0) / kMr], v);
      }
    }
    if (sums != nullptr)
      for (int64_t r0 = g0; r0 < g1; r0 += kMr) {
        const int64_t live = lesser(kMr, m - r0);
        store_first(
            sums + r0,
            _mm256_add_ps(_mm256_maskload_ps(sums + r0, lanes(live)), total[(r0 - g0) / kMr]),
            live);
      }
  }
}

// The shared loop nest (gemm_f32_driver.h) on this file's packs and tile.
using Driver = GemmF32Driver<kMr, kNr, kKc, kBFloats, &pack_a, pack_b, &tile<false>, &tile<true>>;
template <bool kBf16>
using DriverHalf = GemmF32Driver<kMr, kNr, kKc, kBFloats, &pack_a, pack_b_half<kBf16>, &tile<false>,
                                 &tile<true>, uint16_t>;

}  // namespace

void gemm_f32_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
                   float* row_sums, bool trans_c) {
  Driver::run(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums, trans_c);
}

void gemm_f32_half_b_avx2(bool bf16, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                          int64_t lda, const uint16_t* b, int64_t ldb, bool accumulate, float* c,
                          int64_t ldc) {
  if (bf16)
    DriverHalf<true>::run(false, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr,
                          false);
  else
    DriverHalf<false>::run(false, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr,
                           false);
}

void gemm_f32_group_avx2(GemmBType type, int count, const GemmBRows* bs, int64_t m, int64_t k,
                         const float* a, int64_t lda) {
  run_group_rows<Driver, DriverHalf<false>, DriverHalf<true>>(type, count, bs, m, k, a, lda);
}

const GemmF32CoopParts& gemm_f32_avx2_coop() {
  static constexpr GemmF32CoopParts kParts = {&Driver::plan, &Driver::part, &Driver::plan_rows,
                                              &Driver::part_rows};
  return kParts;
}

}  // namespace nexus::cpu
