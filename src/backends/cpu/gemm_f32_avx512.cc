// The f32 GEMM of gemm_f32.h on AVX-512. Called only when gemm_f32_avx512_active(). Like every
// AVX-512 file (docs/KERNELS.md) it includes no AVX2 helper header and instantiates no library
// template: loops and comparisons are written out.
//
// Loop nest, for each pass of up to 768 k (p0):
//   for each block of 256 columns of op(B) (j0): pack them (768 KiB, stays in L2);
//     for each 12 rows of A (i): copy them to a buffer 784 floats a row (L1);
//       for each 32-column panel: one call of the register tile, which also prefetches a share
//       of the next 12 rows of A into L2.
// The row copy matters: broadcasting straight from A's rows, 3 KiB apart in GPT-2's shapes, ran
// the tile at 75% of the FMA peak; from the copy it runs at 96% (in L1) and 91% (op(B) from L2).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backends/cpu/gemm_f32.h"

namespace nexus::cpu {
namespace {

constexpr int kMr = 12;             // rows of the register tile
constexpr int kNr = 32;             // columns of the register tile: two zmm
constexpr int64_t kKc = 768;        // k per pass
constexpr int64_t kNc = 256;        // columns of op(B) per packed block
constexpr int64_t kAs = kKc + 16;   // row stride of the A copy (not a multiple of 4 KiB)

inline int64_t lesser(int64_t x, int64_t y) { return x < y ? x : y; }

// The first `count` of 16 lanes (none for count <= 0).
inline __mmask16 lanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// The ahead-fetch one tile call does: `rows` rows of `len` floats, `ld` apart, one line per 8 k.
struct Ahead {
  const float* p;
  int64_t rows, len, ld;
};

// C[mr x nr] (+)= sum over k < kp of A(r, k) Bpanel(k, 0..31), A(r, k) = a[r * kAs + k]. The
// panel is k-major, 32 floats a k. Not inlined, so the compiler lays out the 24 accumulators the
// same way wherever it is called (inlined into the driver it spilled them and ran 30% slower).
__attribute__((noinline)) void tile(int64_t kp, const float* __restrict a,
                                    const float* __restrict b, float* c, int64_t ldc,
                                    bool accumulate, int mr, int nr, Ahead ahead) {
  __m512 c0[kMr], c1[kMr];
  for (int r = 0; r < kMr; ++r) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  if (accumulate)  // C is read at the end: fetch it now
    for (int r = 0; r < mr; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
    }
  int64_t ar = 0, ac = 0;
  for (int64_t k8 = 0; k8 < kp; k8 += 8) {
    if (ar < ahead.rows) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead.p + ar * ahead.ld + ac), _MM_HINT_T1);
      ac += 16;
      if (ac >= ahead.len) {
        ac = 0;
        ++ar;
      }
    }
#pragma GCC unroll 8
    for (int64_t k = k8; k < k8 + 8; ++k) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
      for (int r = 0; r < kMr; ++r) {
        const __m512 x = _mm512_set1_ps(a[r * kAs + k]);
        c0[r] = _mm512_fmadd_ps(x, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(x, b1, c1[r]);
      }
      b += kNr;
    }
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

// Columns [j0, j0 + nc) of op(B), k in [p0, p0 + kc), into 32-column panels: panel q at
// dst + q * kp * 32, k-major. Rows from kc to kp and columns past nc are zero.
void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t j0, int64_t nc, int64_t p0,
            int64_t kc, int64_t kp, float* dst) {
  if (!trans_b) {  // op(B)(k, j) = b[k * ldb + j]: row by row, each row into every panel
    for (int64_t k = 0; k < kp; ++k) {
      const float* s = b + (p0 + k) * ldb + j0;
      for (int64_t jp = 0; jp < nc; jp += kNr) {
        float* d = dst + jp * kp + k * kNr;
        const __mmask16 m0 = k < kc ? lanes(nc - jp) : 0, m1 = k < kc ? lanes(nc - jp - 16) : 0;
        _mm512_store_ps(d, _mm512_maskz_loadu_ps(m0, s + jp));
        _mm512_store_ps(d + 16, _mm512_maskz_loadu_ps(m1, s + jp + 16));
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
        __m512 r[16];
        for (int q = 0; q < 16; ++q) {
          const int64_t j = jp + jj + q;
          r[q] = j < nc ? _mm512_maskz_loadu_ps(mk, b + (j0 + j) * ldb + p0 + k)
                        : _mm512_setzero_ps();
        }
        transpose16(r);
        const int64_t rows = lesser(16, kp - k);
        for (int64_t q = 0; q < rows; ++q) _mm512_store_ps(d + (k + q) * kNr + jj, r[q]);
      }
    }
  }
}

// Rows [i, i + mr) of A, k in [p0, p0 + kc), to ab (kAs floats a row); the rest of the kMr x kp
// block is zero.
void copy_a(const float* a, int64_t lda, int64_t i, int mr, int64_t p0, int64_t kc, int64_t kp,
            float* ab) {
  for (int r = 0; r < kMr; ++r) {
    float* d = ab + r * kAs;
    if (r < mr) {
      std::memcpy(d, a + (i + r) * lda + p0, static_cast<size_t>(kc) * sizeof(float));
      for (int64_t k = kc; k < kp; ++k) d[k] = 0.0f;
    } else {
      std::memset(d, 0, static_cast<size_t>(kp) * sizeof(float));
    }
  }
}

struct PackBuffer {
  float* p = nullptr;
  ~PackBuffer() { std::free(p); }
};

float* pack_buffer() {
  thread_local PackBuffer buf;
  if (buf.p == nullptr) {
    buf.p = static_cast<float*>(std::aligned_alloc(64, kKc * kNc * sizeof(float)));
    if (buf.p == nullptr) throw std::bad_alloc();
  }
  return buf.p;
}

}  // namespace

void gemm_f32_avx512(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  float* pb = pack_buffer();
  alignas(64) float ab[kMr * kAs];
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    const int64_t kc = lesser(kKc, k - p0), kp = (kc + 7) / 8 * 8;
    const bool acc = accumulate || p0 > 0;
    for (int64_t j0 = 0; j0 < n; j0 += kNc) {
      const int64_t nc = lesser(kNc, n - j0), panels = (nc + kNr - 1) / kNr;
      pack_b(trans_b, b, ldb, j0, nc, p0, kc, kp, pb);
      // Rows fetched ahead by each tile call: the next 12 rows of A, or the first 12 again for
      // the next block of columns.
      const int64_t per = (kMr + panels - 1) / panels;
      for (int64_t i = 0; i < m; i += kMr) {
        const int mr = static_cast<int>(lesser(kMr, m - i));
        copy_a(a, lda, i, mr, p0, kc, kp, ab);
        const int64_t next = i + kMr < m ? i + kMr : (j0 + kNc < n ? 0 : m);
        const int64_t next_rows = lesser(kMr, m - next);
        for (int64_t q = 0; q < panels; ++q) {
          const int64_t r0 = q * per;
          const int64_t rows = r0 < next_rows ? lesser(per, next_rows - r0) : 0;
          const Ahead ahead{rows > 0 ? a + (next + r0) * lda + p0 : a, rows, kc, lda};
          tile(kp, ab, pb + q * kp * kNr, c + i * ldc + j0 + q * kNr, ldc, acc, mr,
               static_cast<int>(lesser(kNr, nc - q * kNr)), ahead);
        }
      }
    }
  }
}

}  // namespace nexus::cpu
