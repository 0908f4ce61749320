// Batched decode with F16 and F32 weights: NR weight rows x NX f32 activation rows per pass. Each
// weight span is loaded (and for F16 converted) once for NX tokens and each activation span once
// for NR rows. Per (row, token) the accumulators, their order and the tail are those of
// vec_dot_f16_avx2 / vec_dot_f32_avx2 (quant_avx2.cc), so every result is bit-identical to them.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// out[r * NX + j] = vec_dot_f16(n, row r of w, row j of x). Two accumulators per pair (as in
// vec_dot_f16_avx2): at 2 x 2 that is 8 registers, plus 4 converted weight spans.
template <int NR, int NX>
void dot_f16(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  const uint16_t* a[NR];
  const float* b[NX];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) a[r] = reinterpret_cast<const uint16_t*>(w + r * ws);
#pragma GCC unroll 4
  for (int j = 0; j < NX; ++j) b[j] = reinterpret_cast<const float*>(x + j * xs);
  __m256 acc0[NR][NX], acc1[NR][NX];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) acc0[r][j] = acc1[r][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 w0[NR], w1[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      w0[r] = load_f16(a[r] + i);
      w1[r] = load_f16(a[r] + i + 8);
    }
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      const __m256 x0 = _mm256_loadu_ps(b[j] + i), x1 = _mm256_loadu_ps(b[j] + i + 8);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) {
        acc0[r][j] = _mm256_fmadd_ps(w0[r], x0, acc0[r][j]);
        acc1[r][j] = _mm256_fmadd_ps(w1[r], x1, acc1[r][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      float s = avx2::hsum(_mm256_add_ps(acc0[r][j], acc1[r][j]));
      for (int64_t t = i; t < n; ++t) s += _cvtsh_ss(a[r][t]) * b[j][t];
      out[r * NX + j] = s;
    }
}

// F32: four accumulators per pair over 32-value steps, then 8-value steps into the first, summed
// as (a0 + a1) + (a2 + a3), then the scalar tail (vec_dot_f32_avx2's order). 2 x 1 keeps 8
// accumulators; the weight loads stay memory operands of the FMAs.
template <int NR, int NX>
void dot_f32(int64_t n, const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, float* out) {
  const float* a[NR];
  const float* b[NX];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) a[r] = reinterpret_cast<const float*>(w + r * ws);
#pragma GCC unroll 4
  for (int j = 0; j < NX; ++j) b[j] = reinterpret_cast<const float*>(x + j * xs);
  __m256 acc[NR][NX][4];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j)
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) acc[r][j][u] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u)
#pragma GCC unroll 4
      for (int j = 0; j < NX; ++j) {
        const __m256 xv = _mm256_loadu_ps(b[j] + i + 8 * u);
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r)
          acc[r][j][u] = _mm256_fmadd_ps(_mm256_loadu_ps(a[r] + i + 8 * u), xv, acc[r][j][u]);
      }
  }
  for (; i + 8 <= n; i += 8)
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j)
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r)
        acc[r][j][0] =
            _mm256_fmadd_ps(_mm256_loadu_ps(a[r] + i), _mm256_loadu_ps(b[j] + i), acc[r][j][0]);
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) {
      float s = avx2::hsum(_mm256_add_ps(_mm256_add_ps(acc[r][j][0], acc[r][j][1]),
                                         _mm256_add_ps(acc[r][j][2], acc[r][j][3])));
      for (int64_t t = i; t < n; ++t) s += a[r][t] * b[j][t];
      out[r * NX + j] = s;
    }
}

using Fn = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*);

// nr x nx in passes of at most R x T (BM_DecodeTile), smaller kernels for the tails; results to
// y[j * ys + r].
template <int R, int T>
void tile(const Fn (&fns)[R][T], int64_t n, const void* w, size_t ws, const void* x, size_t xs,
          int nr, int nx, float* y, size_t ys) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  for (int r = 0; r < nr; r += R) {
    const int pr = nr - r < R ? nr - r : R;
    for (int j = 0; j < nx; j += T) {
      const int px = nx - j < T ? nx - j : T;
      float out[R * T];
      fns[pr - 1][px - 1](n, wb + r * ws, ws, xb + j * xs, xs, out);
      for (int a = 0; a < pr; ++a)
        for (int b = 0; b < px; ++b) y[(j + b) * ys + r + a] = out[a * px + b];
    }
  }
}

constexpr Fn kF16[2][2] = {{dot_f16<1, 1>, dot_f16<1, 2>}, {dot_f16<2, 1>, dot_f16<2, 2>}};
constexpr Fn kF32[2][1] = {{dot_f32<1, 1>}, {dot_f32<2, 1>}};

}  // namespace

void vec_dot_tile_f16_avx2(int64_t n, const void* w, size_t ws, const void* x, size_t xs, int nr,
                           int nx, float* y, size_t ys) {
  tile(kF16, n, w, ws, x, xs, nr, nx, y, ys);
}

void vec_dot_tile_f32_avx2(int64_t n, const void* w, size_t ws, const void* x, size_t xs, int nr,
                           int nx, float* y, size_t ys) {
  tile(kF32, n, w, ws, x, xs, nr, nx, y, ys);
}

}  // namespace nexus::cpu
