// The f32 GEMM of gemm_f32.h on AVX-512. Called only when avx512_active() (gemm_f32.cc). Like every
// AVX-512 file (docs/KERNELS.md) it includes no AVX2 helper header and instantiates no library
// template: loops and comparisons are written out.
//
// Loop nest, for each pass of up to 768 k (p0):
//   pack every row of op(A) into 12-row panels, k-major (m x 768 floats);
//   for each block of 256 columns of op(B) (more at a shorter pass; j0): pack them into 32-column
//   panels (768 KiB, in L2);
//     for each 12-row panel of op(A) (its 36 KiB stay in L1 across the block):
//       for each 32-column panel of op(B): one call of the register tile.
// (With C transposed the last two loops swap, so one column panel's 32 rows of C^T are finished
// before the next, and C can be fetched ahead: L15M's head d weight 7% faster.)
// The tile runs near one core's FMA peak from k-major panels in cache, well above broadcasting
// from rows of A (docs/KERNELS.md).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/gemm_f32_driver.h"

namespace nexus::cpu {
namespace {

constexpr int kMr = 12;        // rows of the register tile
constexpr int kNr = 32;        // columns of the register tile: two zmm
constexpr int64_t kKc = 768;   // k per pass
constexpr int64_t kNc = 256;   // columns of op(B) per packed block at 768 k
constexpr int64_t kAhead = 8;  // rows of a row-by-row pack fetched ahead

inline int64_t lesser(int64_t x, int64_t y) { return x < y ? x : y; }

// The first `count` of 16 lanes (none for count <= 0).
inline __mmask16 lanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// r[q] = column q of the 16 x 16 block whose rows were r[0..15]. (The zero-masked forms with every
// lane on: GCC 12's unmasked ones start from an undefined vector, which -Wmaybe-uninitialized
// reports; the instructions are the same.)
void transpose16(__m512 r[16]) {
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 t[16];
  for (int q = 0; q < 16; q += 2) {
    t[q] = _mm512_maskz_unpacklo_ps(kAll, r[q], r[q + 1]);
    t[q + 1] = _mm512_maskz_unpackhi_ps(kAll, r[q], r[q + 1]);
  }
  for (int q = 0; q < 16; q += 4) {
    r[q] = _mm512_maskz_shuffle_ps(kAll, t[q], t[q + 2], 0x44);
    r[q + 1] = _mm512_maskz_shuffle_ps(kAll, t[q], t[q + 2], 0xEE);
    r[q + 2] = _mm512_maskz_shuffle_ps(kAll, t[q + 1], t[q + 3], 0x44);
    r[q + 3] = _mm512_maskz_shuffle_ps(kAll, t[q + 1], t[q + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    t[q] = _mm512_maskz_shuffle_f32x4(kAll, r[q], r[q + 4], 0x88);
    t[q + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[q], r[q + 4], 0xDD);
    t[q + 8] = _mm512_maskz_shuffle_f32x4(kAll, r[q + 8], r[q + 12], 0x88);
    t[q + 12] = _mm512_maskz_shuffle_f32x4(kAll, r[q + 8], r[q + 12], 0xDD);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm512_maskz_shuffle_f32x4(kAll, t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[q], t[q + 8], 0xDD);
    r[q + 4] = _mm512_maskz_shuffle_f32x4(kAll, t[q + 4], t[q + 12], 0x88);
    r[q + 12] = _mm512_maskz_shuffle_f32x4(kAll, t[q + 4], t[q + 12], 0xDD);
  }
}

// C[mr x nr] (+)= sum over k < kp of Apanel(k, r) Bpanel(k, j): both panels k-major, 12 floats a
// k of op(A), 32 of op(B). Not inlined, so the compiler lays out the 24 accumulators the same way
// wherever it is called (inlined into the driver it spilled them and ran 30% slower). kTransC:
// C held transposed (gemm_f32.h's trans_c), 12 floats in each of nr rows.
template <bool kTransC>
__attribute__((noinline)) void tile(int64_t kp, const float* __restrict a,
                                    const float* __restrict b, float* c, int64_t ldc,
                                    bool accumulate, int mr, int nr) {
  __m512 c0[kMr], c1[kMr];
  for (int r = 0; r < kMr; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  // C is read at the end: fetch it now (about 1% on the backward GEMMs that accumulate).
  if (accumulate && !kTransC)
    for (int r = 0; r < mr; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
    }
  if (accumulate && kTransC)  // the 12 floats of each of nr rows
    for (int q = 0; q < nr; ++q) {
      _mm_prefetch(reinterpret_cast<const char*>(c + q * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + q * ldc + kMr - 1), _MM_HINT_T0);
    }
  for (int64_t k8 = 0; k8 < kp; k8 += 8) {
#pragma GCC unroll 8
    for (int64_t k = k8; k < k8 + 8; ++k) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
      for (int r = 0; r < kMr; ++r) {
        const __m512 x = _mm512_set1_ps(a[k * kMr + r]);
        c0[r] = _mm512_fmadd_ps(x, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(x, b1, c1[r]);
      }
      b += kNr;
    }
  }
  if constexpr (kTransC) {  // C(r, j) at c[j * ldc + r]: each 16 columns transposed to rows
    const __mmask16 live = lanes(mr);
    for (int h = 0; h < 2; ++h) {
      __m512 t[16];
      for (int r = 0; r < 16; ++r) t[r] = r < kMr ? (h ? c1[r] : c0[r]) : _mm512_setzero_ps();
      transpose16(t);
      for (int q = 0; q < 16 && h * 16 + q < nr; ++q) {
        float* cq = c + (h * 16 + q) * ldc;
        if (accumulate) t[q] = _mm512_add_ps(t[q], _mm512_maskz_loadu_ps(live, cq));
        _mm512_mask_storeu_ps(cq, live, t[q]);
      }
    }
    return;
  }
  if (mr == kMr && nr == kNr) {
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
      float* cr = c + r * ldc;
      if (accumulate) {
        c0[r] = _mm512_add_ps(c0[r], _mm512_loadu_ps(cr));
        c1[r] = _mm512_add_ps(c1[r], _mm512_loadu_ps(cr + 16));
      }
      _mm512_storeu_ps(cr, c0[r]);
      _mm512_storeu_ps(cr + 16, c1[r]);
    }
    return;
  }
  const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
  for (int r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, cr));
      c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    _mm512_mask_storeu_ps(cr, m0, c0[r]);
    _mm512_mask_storeu_ps(cr + 16, m1, c1[r]);
  }
}

inline void fetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }

// 16 elements of B as f32, the lanes outside `m` zero (nothing read there): f32, or the f16 /
// bf16 bits of prefill's weights, widened exactly.
inline __m512 load16_f32(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16_f16(const uint16_t* p, __mmask16 m) {
  return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load16_bf16(const uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(
      0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(m, p)), 16));
}

// Columns [j0, j0 + nc) of op(B), k in [p0, p0 + kc), into 32-column panels: panel q at
// dst + q * kp * 32, k-major. Rows from kc to kp and columns past nc are zero. B's elements are E,
// read by Load (f32, or f16/bf16 converted as they are packed). (The zero-masked conversions with
// every lane on, as in transpose16.)
template <typename E, __m512 (*Load)(const E*, __mmask16)>
void pack_b_of(bool trans_b, const E* b, int64_t ldb, int64_t j0, int64_t nc, int64_t p0,
               int64_t kc, int64_t kp, float* dst) {
  if (!trans_b) {  // op(B)(k, j) = b[k * ldb + j]: row by row, each row into every panel
    for (int64_t k = 0; k < kp; ++k) {
      const E* s = k < kc ? b + (p0 + k) * ldb + j0 : b;  // past kc: zeros, nothing read
      if (k + kAhead < kc)
        for (int64_t jp = 0; jp < nc; jp += 16) fetch(s + kAhead * ldb + jp);
      for (int64_t jp = 0; jp < nc; jp += kNr) {
        float* d = dst + jp * kp + k * kNr;
        const __mmask16 m0 = k < kc ? lanes(nc - jp) : 0, m1 = k < kc ? lanes(nc - jp - 16) : 0;
        _mm512_store_ps(d, Load(s + jp, m0));
        _mm512_store_ps(d + 16, Load(s + jp + 16, m1));
      }
    }
    return;
  }
  // op(B)(k, j) = b[j * ldb + k]: 16 x 16 blocks transposed in registers.
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* d = dst + jp * kp;
    for (int64_t jj = 0; jj < kNr; jj += 16) {
      for (int64_t k = 0; k < kc; k += 16) {
        const __mmask16 mk = lanes(kc - k);
        if (jp + kNr + jj + 16 <= nc && (sizeof(E) == 4 || k % 32 == 0))  // the next panel's rows
          for (int q = 0; q < 16; ++q) fetch(b + (j0 + jp + kNr + jj + q) * ldb + p0 + k);
        __m512 r[16];
        for (int q = 0; q < 16; ++q) {
          const int64_t j = jp + jj + q;
          r[q] = j < nc ? Load(b + (j0 + j) * ldb + p0 + k, mk) : _mm512_setzero_ps();
        }
        transpose16(r);
        const int64_t rows = lesser(16, kp - k);
        for (int64_t q = 0; q < rows; ++q) _mm512_store_ps(d + (k + q) * kNr + jj, r[q]);
      }
    }
  }
}

constexpr auto pack_b = &pack_b_of<float, &load16_f32>;

// Rows [0, m) of op(A), k in [p0, p0 + kc), into 12-row panels, panel q at dst + q * kp * 12,
// k-major (12 floats a k). Rows from kc to kp and panel rows past m are zero. Done once a pass
// for every row of C, then read by every block of columns. (The tile broadcasting from a copy of
// 12 rows of A, 784 floats apart, ran about 5% slower than from k-major panels; and 12-row copies
// made inside the column blocks read A again for every block.)
void pack_a(bool trans_a, const float* a, int64_t lda, int64_t m, int64_t p0, int64_t kc,
            int64_t kp, float* dst, float* sums) {
  if (!trans_a) {  // A(i, k) = a[i * lda + k]: 12 rows x 16 k transposed in registers
    for (int64_t r0 = 0; r0 < m; r0 += kMr) {
      float* d = dst + (r0 / kMr) * kp * kMr;
      for (int64_t k = 0; k < kc; k += 16) {
        const __mmask16 mk = lanes(kc - k);
        if (r0 + 2 * kMr <= m)  // the same lines of the next panel's rows
          for (int q = 0; q < kMr; ++q) fetch(a + (r0 + kMr + q) * lda + p0 + k);
        __m512 r[16];
        for (int q = 0; q < 16; ++q)
          r[q] = q < kMr && r0 + q < m ? _mm512_maskz_loadu_ps(mk, a + (r0 + q) * lda + p0 + k)
                                       : _mm512_setzero_ps();
        transpose16(r);
        const int64_t rows = lesser(16, kp - k);
        for (int64_t q = 0; q < rows; ++q) _mm512_mask_storeu_ps(d + (k + q) * kMr, 0x0FFF, r[q]);
      }
    }
    return;
  }
  // A(i, k) = a[k * lda + i]: each k is a copy of 12 floats of a row of a, swept over 96 rows of
  // C at a time with the rows 8 k ahead fetched; with sums, each panel's 12 rows also summed.
  constexpr int64_t kGroup = 8 * kMr;
  for (int64_t g0 = 0; g0 < m; g0 += kGroup) {
    const int64_t g1 = lesser(m, g0 + kGroup);
    __m512 total[kGroup / kMr];
    for (__m512& t : total) t = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; ++k) {
      const float* s = k < kc ? a + (p0 + k) * lda : a;  // past kc: zeros, nothing read
      if (k + kAhead < kc)
        for (int64_t x = g0; x < g1; x += 16) fetch(s + kAhead * lda + x);
      for (int64_t r0 = g0; r0 < g1; r0 += kMr) {
        float* d = dst + (r0 / kMr) * kp * kMr + k * kMr;
        const __mmask16 live = k < kc ? lanes(lesser(kMr, m - r0)) : 0;
        const __m512 v = _mm512_maskz_loadu_ps(live, s + r0);
        _mm512_mask_storeu_ps(d, 0x0FFF, v);
        if (sums != nullptr) total[(r0 - g0) / kMr] = _mm512_add_ps(total[(r0 - g0) / kMr], v);
      }
    }
    if (sums != nullptr)
      for (int64_t r0 = g0; r0 < g1; r0 += kMr) {
        const __mmask16 live = lanes(lesser(kMr, m - r0));
        _mm512_mask_storeu_ps(
            sums + r0, live,
            _mm512_add_ps(_mm512_maskz_loadu_ps(live, sums + r0), total[(r0 - g0) / kMr]));
      }
  }
}

// The shared loop nest (gemm_f32_driver.h) on this file's packs and tile.
using Driver = GemmF32Driver<kMr, kNr, kKc, kKc * kNc, &pack_a, pack_b, &tile<false>, &tile<true>>;
template <__m512 (*Load)(const uint16_t*, __mmask16)>
using DriverHalf = GemmF32Driver<kMr, kNr, kKc, kKc * kNc, &pack_a, &pack_b_of<uint16_t, Load>,
                                 &tile<false>, &tile<true>, uint16_t>;

}  // namespace

void gemm_f32_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                     int64_t ldc, float* row_sums, bool trans_c) {
  Driver::run(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums, trans_c);
}

void gemm_f32_group_avx512(GemmBType type, int count, const GemmBRows* bs, int64_t m, int64_t k,
                           const float* a, int64_t lda) {
  run_group_rows<Driver, DriverHalf<&load16_f16>, DriverHalf<&load16_bf16>>(type, count, bs, m, k,
                                                                            a, lda);
}

const GemmF32CoopParts& gemm_f32_avx512_coop() {
  static constexpr GemmF32CoopParts kParts = {&Driver::plan, &Driver::part, &Driver::plan_rows,
                                              &Driver::part_rows};
  return kParts;
}

}  // namespace nexus::cpu
