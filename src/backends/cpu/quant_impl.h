// Per-type kernel functions behind the dispatch table in quant_dispatch.cc. *_ref functions are the
// portable scalar references (quant_ref.cc, quant_k_ref.cc); *_avx2 functions live in *_avx2.cc
// files and may only be called after isa_supported(Isa::kAvx2).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus::cpu {

// Prefetch distances of the F16 decode rows (vec_dot_wrows_f16_avx2 and _avx512), one prefetch
// per 64-byte line of weights: kF16AheadBytes ahead into L1 (1 KiB beat 0.5, 2, 4 and 8 KiB), and
// kF16FarBytes ahead into L2 only (prefetcht1), which keeps more lines in flight than the near
// prefetch and the out-of-order window do when two threads stream (measured: docs/KERNELS.md).
constexpr int64_t kF16AheadBytes = 1024;
constexpr int64_t kF16FarBytes = 8192;
// The same for the F32 dot products (vec_dot_f32_avx2 and _avx512): far 4 KiB in the AVX-512
// builds (8 KiB was slower), 16 KiB in the AVX2 ones, each the best where it was measured
// (docs/KERNELS.md).
constexpr int64_t kF32AheadBytes = 1024;
#if defined(__AVX512F__)
constexpr int64_t kF32FarBytes = 4096;
#else
constexpr int64_t kF32FarBytes = 16384;
#endif

// The prefetches of one step of those loops: the F16 rows' for the 64-byte line at `line`, the
// F32 dots' for the two lines (128 bytes) at `step`. Locality 3 is prefetcht0, 2 prefetcht1.
// Internal linkage (static), so the copy compiled into the AVX-512 file is never shared.
// The F16 pair goes far first in the AVX2 builds (3-10% faster there); the F32 step's four keep
// near first (far first was slower), as do the AVX-512 builds (docs/KERNELS.md).
static inline void prefetch_f16_line(const char* line) {
#if defined(__AVX512F__)
  __builtin_prefetch(line + kF16AheadBytes, 0, 3);
  __builtin_prefetch(line + kF16FarBytes, 0, 2);
#else
  __builtin_prefetch(line + kF16FarBytes, 0, 2);
  __builtin_prefetch(line + kF16AheadBytes, 0, 3);
#endif
}
static inline void prefetch_f32_step(const float* step) {
  const char* p = reinterpret_cast<const char*>(step);
  __builtin_prefetch(p + kF32AheadBytes, 0, 3);
  __builtin_prefetch(p + kF32AheadBytes + 64, 0, 3);
  __builtin_prefetch(p + kF32FarBytes, 0, 2);
  __builtin_prefetch(p + kF32FarBytes + 64, 0, 2);
}

// Declares quantize_<t>_<isa>, dequantize_<t>_<isa> for one type.
#define NEXUS_DECLARE_CONVERT(t, isa)                            \
  void quantize_##t##_##isa(const float* x, void* y, int64_t n); \
  void dequantize_##t##_##isa(const void* x, float* y, int64_t n);
// Declares vec_dot_<t>_<isa>: weights of type t times activations of vec_dot_type(t).
#define NEXUS_DECLARE_DOT(t, isa) \
  float vec_dot_##t##_##isa(int64_t n, const void* w, const void* x);

NEXUS_DECLARE_CONVERT(f32, ref)
NEXUS_DECLARE_CONVERT(f16, ref)
NEXUS_DECLARE_CONVERT(bf16, ref)
NEXUS_DECLARE_CONVERT(q4_0, ref)
NEXUS_DECLARE_CONVERT(q4_1, ref)
NEXUS_DECLARE_CONVERT(q5_0, ref)
NEXUS_DECLARE_CONVERT(q5_1, ref)
NEXUS_DECLARE_CONVERT(q8_0, ref)
NEXUS_DECLARE_CONVERT(q8_1, ref)
NEXUS_DECLARE_CONVERT(q2_k, ref)
NEXUS_DECLARE_CONVERT(q3_k, ref)
NEXUS_DECLARE_CONVERT(q4_k, ref)
NEXUS_DECLARE_CONVERT(q5_k, ref)
NEXUS_DECLARE_CONVERT(q6_k, ref)
NEXUS_DECLARE_CONVERT(q8_k, ref)

NEXUS_DECLARE_DOT(f32, ref)
NEXUS_DECLARE_DOT(f16, ref)
NEXUS_DECLARE_DOT(bf16, ref)
// The K-quant quantizers with importances per value (qw: n of them, or null: the _ref ones).
void quantize_q2_k_imp(const float* x, void* y, int64_t n, const float* qw);
void quantize_q3_k_imp(const float* x, void* y, int64_t n, const float* qw);
void quantize_q4_k_imp(const float* x, void* y, int64_t n, const float* qw);
void quantize_q5_k_imp(const float* x, void* y, int64_t n, const float* qw);
void quantize_q6_k_imp(const float* x, void* y, int64_t n, const float* qw);
NEXUS_DECLARE_DOT(q4_0, ref)
NEXUS_DECLARE_DOT(q4_1, ref)
NEXUS_DECLARE_DOT(q5_0, ref)
NEXUS_DECLARE_DOT(q5_1, ref)
NEXUS_DECLARE_DOT(q8_0, ref)
NEXUS_DECLARE_DOT(q8_1, ref)
NEXUS_DECLARE_DOT(q2_k, ref)
NEXUS_DECLARE_DOT(q3_k, ref)
NEXUS_DECLARE_DOT(q4_k, ref)
NEXUS_DECLARE_DOT(q5_k, ref)
NEXUS_DECLARE_DOT(q6_k, ref)
NEXUS_DECLARE_DOT(q8_k, ref)

NEXUS_DECLARE_CONVERT(f16, avx2)
NEXUS_DECLARE_CONVERT(bf16, avx2)
NEXUS_DECLARE_CONVERT(q8_0, avx2)
NEXUS_DECLARE_CONVERT(q8_1, avx2)
NEXUS_DECLARE_CONVERT(q8_k, avx2)
void dequantize_q4_0_avx2(const void* x, float* y, int64_t n);
void dequantize_q4_1_avx2(const void* x, float* y, int64_t n);
void dequantize_q5_0_avx2(const void* x, float* y, int64_t n);
void dequantize_q5_1_avx2(const void* x, float* y, int64_t n);
void dequantize_q2_k_avx2(const void* x, float* y, int64_t n);
void dequantize_q3_k_avx2(const void* x, float* y, int64_t n);
void dequantize_q4_k_avx2(const void* x, float* y, int64_t n);
void dequantize_q5_k_avx2(const void* x, float* y, int64_t n);
void dequantize_q6_k_avx2(const void* x, float* y, int64_t n);

NEXUS_DECLARE_DOT(f32, avx2)
NEXUS_DECLARE_DOT(f16, avx2)
NEXUS_DECLARE_DOT(bf16, avx2)
NEXUS_DECLARE_DOT(q4_0, avx2)
NEXUS_DECLARE_DOT(q4_1, avx2)
NEXUS_DECLARE_DOT(q5_0, avx2)
NEXUS_DECLARE_DOT(q5_1, avx2)
NEXUS_DECLARE_DOT(q8_0, avx2)
NEXUS_DECLARE_DOT(q2_k, avx2)
NEXUS_DECLARE_DOT(q3_k, avx2)
NEXUS_DECLARE_DOT(q4_k, avx2)
NEXUS_DECLARE_DOT(q5_k, avx2)
NEXUS_DECLARE_DOT(q6_k, avx2)
NEXUS_DECLARE_DOT(q8_k, avx2)

// Dot products of one weight row with nx (1..kMaxDotRows) activation rows x_stride bytes apart,
// out[j] for row j; bit-identical to nx separate vec_dot calls (dot_multi_avx2.cc).
#define NEXUS_DECLARE_DOT_ROWS(t, isa)                                                            \
  void vec_dot_rows_##t##_##isa(int64_t n, const void* w, const void* x, size_t x_stride, int nx, \
                                float* out);
// One activation row with nr (1..kMaxWeightRows) weight rows w_stride bytes apart, out[r] for
// weight row r; bit-identical to nr separate vec_dot calls (dot_multi_avx2.cc), except F32 rows
// under 256 or of 512 values and more, which sum in four-row passes (equal to f32 rounding).
#define NEXUS_DECLARE_DOT_WROWS(t, isa)                                                            \
  void vec_dot_wrows_##t##_##isa(int64_t n, const void* w, size_t w_stride, const void* x, int nr, \
                                 float* out);
// nr weight rows x nx tokens, y[j * y_stride + r]; bit-identical to vec_dot (dot_multi_avx2.cc,
// dot_float_tile_avx2.cc).
#define NEXUS_DECLARE_DOT_TILE(t, isa)                                                    \
  void vec_dot_tile_##t##_##isa(int64_t n, const void* w, size_t w_stride, const void* x, \
                                size_t x_stride, int nr, int nx, float* y, size_t y_stride);
NEXUS_DECLARE_DOT_TILE(f32, avx2)
NEXUS_DECLARE_DOT_TILE(f16, avx2)
NEXUS_DECLARE_DOT_TILE(q8_0, avx2)
NEXUS_DECLARE_DOT_TILE(q2_k, avx2)
NEXUS_DECLARE_DOT_TILE(q3_k, avx2)
NEXUS_DECLARE_DOT_TILE(q4_k, avx2)
NEXUS_DECLARE_DOT_TILE(q5_k, avx2)
NEXUS_DECLARE_DOT_TILE(q6_k, avx2)
NEXUS_DECLARE_DOT_WROWS(f32, avx2)
NEXUS_DECLARE_DOT_WROWS(f16, avx2)
NEXUS_DECLARE_DOT_WROWS(bf16, avx2)
// AVX-512 F32 decode dots (dot_float_avx512.cc), bit-identical to the AVX2 ones; patched into the
// AVX2 table when avx512_active().
NEXUS_DECLARE_DOT(f32, avx512)
NEXUS_DECLARE_DOT_WROWS(f32, avx512)
NEXUS_DECLARE_DOT_WROWS(f16, avx512)
NEXUS_DECLARE_DOT_WROWS(bf16, avx512)
NEXUS_DECLARE_DOT_WROWS(q4_0, avx2)
NEXUS_DECLARE_DOT_WROWS(q8_0, avx2)
NEXUS_DECLARE_DOT_WROWS(q2_k, avx2)
NEXUS_DECLARE_DOT_WROWS(q3_k, avx2)
NEXUS_DECLARE_DOT_WROWS(q4_k, avx2)
NEXUS_DECLARE_DOT_WROWS(q5_k, avx2)
NEXUS_DECLARE_DOT_WROWS(q6_k, avx2)
NEXUS_DECLARE_DOT_ROWS(q4_0, avx2)
NEXUS_DECLARE_DOT_ROWS(q8_0, avx2)
NEXUS_DECLARE_DOT_ROWS(q2_k, avx2)
NEXUS_DECLARE_DOT_ROWS(q3_k, avx2)
NEXUS_DECLARE_DOT_ROWS(q4_k, avx2)
NEXUS_DECLARE_DOT_ROWS(q5_k, avx2)
NEXUS_DECLARE_DOT_ROWS(q6_k, avx2)

#undef NEXUS_DECLARE_DOT_TILE
#undef NEXUS_DECLARE_DOT_ROWS
#undef NEXUS_DECLARE_DOT_WROWS
#undef NEXUS_DECLARE_CONVERT
#undef NEXUS_DECLARE_DOT

}  // namespace nexus::cpu
