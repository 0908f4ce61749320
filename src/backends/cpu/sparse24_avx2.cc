// AVX2 kernels of the 2:4 sparse weights (layout in sparse24.h). Per half block (eight kept
// values, 16 columns) the 16 position bits become eight lane indices with one variable shift, a
// mask and an add; the activations of the first two groups are one vector and of the last two
// another, so a permute of each and a blend by lane put every value's activation beside it. Two
// accumulators (the halves) per row and token, summed at the row's end.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/gemm.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/sparse24.h"

namespace nexus::cpu {
namespace {

struct F32Load {
  static constexpr size_t kBytes = 4;
  static __m256 load8(const uint8_t* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};
struct F16Load {
  static constexpr size_t kBytes = 2;
  static __m256 load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct BF16Load {
  static constexpr size_t kBytes = 2;
  static __m256 load8(const uint8_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
};

// Lane indices of the eight values of half h of a block whose positions are `pos`: lane l holds
// value 8h + l, of group 4h + l / 2; lanes 0-3 index the first activation vector, 4-7 the second.
struct Indices {
  __m256i shift0, shift1, base, three;
  Indices()
      : shift0(_mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        shift1(_mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)),
        base(_mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4)),
        three(_mm256_set1_epi32(3)) {}
  void of(uint32_t pos, __m256i* i0, __m256i* i1) const {
    const __m256i p = _mm256_set1_epi32(static_cast<int>(pos));
    *i0 = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(p, shift0), three), base);
    *i1 = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(p, shift1), three), base);
  }
};

// The activations of eight values: columns 0-7 and 8-15 of the half at x.
inline __m256 pick(const float* x, __m256i idx) {
  const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x), idx);
  const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + 8), idx);
  return _mm256_blend_ps(lo, hi, 0xF0);
}

template <class L>
constexpr size_t block_bytes() {
  return 4 + 16 * L::kBytes;
}

template <class L>
float row(int64_t n, const uint8_t* w, const float* x) {
  const Indices ix;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t c = 0; c < n; c += kSparse24Block, w += block_bytes<L>(), x += kSparse24Block) {
    prefetch_f16_line(reinterpret_cast<const char*>(w));
    uint32_t pos;
    std::memcpy(&pos, w, 4);
    __m256i i0, i1;
    ix.of(pos, &i0, &i1);
    acc0 = _mm256_fmadd_ps(L::load8(w + 4), pick(x, i0), acc0);
    acc1 = _mm256_fmadd_ps(L::load8(w + 4 + 8 * L::kBytes), pick(x + 16, i1), acc1);
  }
  return avx2::hsum(_mm256_add_ps(acc0, acc1));
}

// One row against NX tokens: the indices and weights of a block decoded once for all of them.
template <class L, int NX>
void row_tokens(int64_t n, const uint8_t* w, const float* x, size_t x_stride, float* out) {
  const Indices ix;
  const size_t xs = x_stride / sizeof(float);
  __m256 acc0[NX], acc1[NX];
  for (int j = 0; j < NX; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < n; c += kSparse24Block, w += block_bytes<L>()) {
    uint32_t pos;
    std::memcpy(&pos, w, 4);
    __m256i i0, i1;
    ix.of(pos, &i0, &i1);
    const __m256 w0 = L::load8(w + 4), w1 = L::load8(w + 4 + 8 * L::kBytes);
    for (int j = 0; j < NX; ++j) {
      acc0[j] = _mm256_fmadd_ps(w0, pick(x + j * xs + c, i0), acc0[j]);
      acc1[j] = _mm256_fmadd_ps(w1, pick(x + j * xs + c + 16, i1), acc1[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = avx2::hsum(_mm256_add_ps(acc0[j], acc1[j]));
}

template <class L>
void rows(int64_t n, const void* w, const void* x, size_t x_stride, int nx, float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xf = static_cast<const float*>(x);
  switch (nx) {
    case 1:
      return row_tokens<L, 1>(n, wb, xf, x_stride, out);
    case 2:
      return row_tokens<L, 2>(n, wb, xf, x_stride, out);
    case 3:
      return row_tokens<L, 3>(n, wb, xf, x_stride, out);
    default:
      return row_tokens<L, 4>(n, wb, xf, x_stride, out);
  }
}

template <class L>
void wrows(int64_t n, const void* w, size_t ws, const void* x, int nr, float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < nr; ++r) out[r] = row<L>(n, wb + r * ws, static_cast<const float*>(x));
}

}  // namespace

static_assert(kMaxDotRows == 4, "vec_dot_rows of the 2:4 types is written for up to four tokens");

float vec_dot_f32_2of4_avx2(int64_t n, const void* w, const void* x) {
  return row<F32Load>(n, static_cast<const uint8_t*>(w), static_cast<const float*>(x));
}
float vec_dot_f16_2of4_avx2(int64_t n, const void* w, const void* x) {
  return row<F16Load>(n, static_cast<const uint8_t*>(w), static_cast<const float*>(x));
}
float vec_dot_bf16_2of4_avx2(int64_t n, const void* w, const void* x) {
  return row<BF16Load>(n, static_cast<const uint8_t*>(w), static_cast<const float*>(x));
}
void vec_dot_rows_f32_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                float* out) {
  rows<F32Load>(n, w, x, x_stride, nx, out);
}
void vec_dot_rows_f16_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                float* out) {
  rows<F16Load>(n, w, x, x_stride, nx, out);
}
void vec_dot_rows_bf16_2of4_avx2(int64_t n, const void* w, const void* x, size_t x_stride, int nx,
                                 float* out) {
  rows<BF16Load>(n, w, x, x_stride, nx, out);
}
void vec_dot_wrows_f32_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                 float* out) {
  wrows<F32Load>(n, w, ws, x, nr, out);
}
void vec_dot_wrows_f16_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                 float* out) {
  wrows<F16Load>(n, w, ws, x, nr, out);
}
void vec_dot_wrows_bf16_2of4_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                                  float* out) {
  wrows<BF16Load>(n, w, ws, x, nr, out);
}

}  // namespace nexus::cpu
