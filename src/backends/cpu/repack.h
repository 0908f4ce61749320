// Load-time repacked weight layouts, eight rows interleaved so the decode kernels read eight rows
// with plain 32-byte loads and keep one row per 32-bit lane: Q4_0x8, Q5_0x8, Q8_0x8, Q4_Kx8 and
// Q6_Kx8.
//
// Q4_0x8: Q4_0 weight matrices repacked once at load. Same bytes as Q4_0, reordered; the tensor
// keeps its {rows, k} shape and DType::kQ4_0x8.
//
// Layout (rb = k / 32 * 18 bytes, the Q4_0 row size): rows are taken in groups of eight. Group g
// (rows 8g .. 8g + 7, g < rows / 8) fills bytes [8g * rb, (8g + 8) * rb) block column by block
// column; block column i (elements 32i .. 32i + 31) is 144 bytes:
//   bytes   0- 15: the eight rows' f16 scales d, row 0 first;
//   bytes  16-143: four 32-byte vectors; vector j holds code bytes 4j .. 4j + 3 of each row, row r
//                  at 16 + 32j + 4r.
// Code bytes keep Q4_0's nibble order (element m low nibble, m + 16 high nibble). The last
// rows % 8 rows (the tail) stay in plain Q4_0 layout at their usual offsets r * rb.
// Why this shape: a 32-bit lane holds four codes of one row, so multiplying a vector by four
// activation bytes broadcast to every lane (maddubs + madd, or vpdpbusd) adds each row's products
// into its own lane: rows 0..7 come out in lane order with no horizontal step, and the eight
// scales are one 16-byte load and one conversion (dot_q4_0x8_impl.h).
//
// Q8_0x8: Q8_0 matrices likewise (DType::kQ8_0x8); block column i is 272 bytes: the eight f16 d,
// then eight 32-byte vectors, vector 2p + e = row p's codes 16e .. 16e + 15, then row p + 4's.
// The kernel (dot_q8_0x8_avx2.cc) shares the scale conversion, the multiply by d_y, the FMA and
// the lane reduction between eight rows instead of paying them per row.
//
// Q5_0x8: Q5_0 matrices likewise (DType::kQ5_0x8); block column i is 176 bytes: the eight f16 d,
// the eight rows' qh words (row r at 16 + 4r), then four 32-byte vectors, vector p = row p's 16 qs
// bytes, then row p + 4's. The kernel (dot_q5_0x8_impl.h) works a pair of rows per vector as
// Q8_0x8's, with one in-lane shuffle of the qh vector bringing each element's fifth bit to its
// byte.
//
// Q4_Kx8: Q4_K matrices, the same bytes reordered (DType::kQ4_Kx8, {rows, k}, k % 256 == 0). Group
// g (rows 8g .. 8g + 7) fills [8g * rb, (8g + 8) * rb), rb = k / 256 * 144, super-block column by
// column; column i (elements 256i .. 256i + 255) is 1152 bytes:
//   bytes    0-  15: the eight rows' f16 d;    bytes 16-31: their f16 dmin;
//   bytes   32- 127: the 12 packed scale bytes as three 32-byte words: word w (bytes 4w..4w+3 of
//                    the row's scales) of row r at 32 + 32w + 4r;
//   bytes  128-1151: codes, 32 vectors of 32 bytes; vector 8c + v (chunk c < 4, v < 8) holds
//                    qs[32c + 4v .. 32c + 4v + 3] of each row, row r at 128 + 32 * (8c + v) + 4r.
// Q4_K nibble order is kept: qs byte 32c + l holds element 64c + l (low nibble, sub-block 2c) and
// 64c + 32 + l (high, sub-block 2c + 1). Why: as in Q4_0x8, a 32-bit lane holds four codes of
// one row, so a vector times four activation bytes broadcast to every lane adds each row's
// products into its own lane, and the rows come out in lane order with no horizontal step; the
// scale words of eight rows decode to 6-bit scales and mins with eight-lane integer ops, and one
// in-lane shuffle turns them into the multipliers of a sub-block for all eight rows
// (dot_q4_kx8_impl.h). The tail rows keep the plain Q4_K layout.
//
// Q6_Kx8: Q6_K matrices likewise (DType::kQ6_Kx8); column i is 1680 bytes (rb = k / 256 * 210):
//   bytes    0-  15: the eight rows' f16 d;
//   bytes   16- 143: the int8 scales in pairs: scales 2q, 2q + 1 of row r at 16 + 16q + 2r;
//   bytes  144-1167: ql, 32 bytes per (half h, piece a, sixteenth e) at
//                    144 + 32 * (((2h + a) * 2 + e) * 4 + p): row p's ql[64h + 32a + 16e .. +15],
//                    then row p + 4's;
//   bytes 1168-1679: qh, 32 bytes per (h, e) at 1168 + 32 * ((2h + e) * 4 + p): row p's
//                    qh[32h + 16e .. +15], then row p + 4's.
// A 16-byte half-lane then holds 16 consecutive elements of one row that share one scale, and a
// widened scale pair is both the multiplier source (one in-lane shuffle per pair of rows) and,
// one row per 32-bit lane, the madd operand of the -32 offset (dot_q6_kx8_avx2.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backends/cpu/gemm.h"
#include "nexus/dtype.h"

namespace nexus::cpu {

constexpr int64_t kRepackRows = 8;

// Writes the Q4_0x8 image of a Q4_0 matrix {rows, k} (src, rows * rb bytes) into dst (the same
// size; must not overlap src).
void repack_q4_0x8(const void* src, void* dst, int64_t rows, int64_t k);

// Copies row r of a Q4_0x8 matrix {rows, k} back into plain Q4_0 blocks (rb bytes at out).
void unpack_row_q4_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);

// Row r of a weight matrix {rows, k} stored at w (row stride row_bytes(t, k)) as f32, for every
// computable type and the repacked ones: lookups and panel expansion go through here so they read
// any layout.
void dequantize_matrix_row(DType t, const uint8_t* w, int64_t rows, int64_t k, int64_t r,
                           float* out);

// y[t * y_stride + 8g + r] = vec_dot(row r of group g, token t) for g < n_groups, r < 8 and
// t < n_tokens: the groups start at w (each 8 * rb bytes), the tokens are Q8_0 rows x_stride
// bytes apart. The scalar version repeats the scalar Q4_0 vec_dot's operations, the AVX2 one the
// AVX2 vec_dot's, so every output is bit-identical to vec_dot of the same ISA on the original row.
void gemm_q4_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// Q8_0x8 counterparts: the exact int32 block sum per (row, token), then acc = fma(S, d * d_y,
// acc); scalar and AVX2 bit-identical to each other.
void repack_q8_0x8(const void* src, void* dst, int64_t rows, int64_t k);
void unpack_row_q8_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);
void gemm_q8_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q8_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// Q5_0x8 counterparts: the exact int32 block sum of the unsigned codes (0..31) times the
// activations less 16 times the activations' sum per (row, token), then acc = fma(S, d * d_y,
// acc); scalar, AVX2 and VNNI bit-identical.
void repack_q5_0x8(const void* src, void* dst, int64_t rows, int64_t k);
void unpack_row_q5_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);
void gemm_q5_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q5_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q5_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// Q4_Kx8 counterparts. The kernels compute per (row, token) and super-block the exact int32 sums
// S = sum sc * q * y and M = sum m * (Q8_K group sums), then acc = fma(S, d * d_y, acc) and
// macc = fma(M, dmin * d_y, macc), output acc - macc: scalar and AVX2 are bit-identical to each
// other (not to vec_dot_q4_k, which rounds per lane).
void repack_q4_kx8(const void* src, void* dst, int64_t rows, int64_t k);
void unpack_row_q4_kx8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);
void gemm_q4_kx8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q4_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q4_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// Q6_Kx8 counterparts: per (row, token) and super-block the exact int32
// S = sum_g sc[g] * sum q * y - 32 * sum_g sc[g] * bsums[g] (codes q = 0..63), then
// acc = fma(S, d * d_y, acc); scalar and AVX2 bit-identical.
void repack_q6_kx8(const void* src, void* dst, int64_t rows, int64_t k);
void unpack_row_q6_kx8(const void* w, int64_t rows, int64_t k, int64_t r, void* out);
void gemm_q6_kx8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q6_kx8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// The Q4_0x8 and Q8_0x8 kernels with their integer products on vpdpbusd, the Q6_Kx8 one with its
// pair sums on vpdpwssd (dot_*_vnni.cc; those of Q5_0x8 and Q4_Kx8 are declared above): need
// AVX512-VNNI and AVX512-VL (avx512_supported(), quant.h); bit-identical to the AVX2 ones;
// gemm_rows_repacked uses them when avx512_active().
void gemm_q6_kx8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q8_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
void gemm_q4_0x8_vnni(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);

// One repacked layout: its in-memory type, the file type it reorders, and its functions. The one
// table of them (repack.cc) is what loading, dispatch, row reads, tests and benchmarks iterate.
using GemmX8Fn = void (*)(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                          size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride);
struct RepackedLayout {
  DType packed;
  DType base;
  void (*repack)(const void* src, void* dst, int64_t rows, int64_t k);
  void (*unpack_row)(const void* w, int64_t rows, int64_t k, int64_t r, void* out);
  GemmX8Fn ref;
  GemmX8Fn avx2;
  GemmX8Fn vnni;  // AVX512-VNNI/VL on 256-bit registers, bit-identical to avx2; null if none
};
// Every repacked layout (Q4_0x8, Q8_0x8, Q5_0x8, Q4_Kx8, Q6_Kx8).
std::span<const RepackedLayout> repacked_layouts();
// The layout whose in-memory type is `packed`, or whose file type is `base`; null when none.
const RepackedLayout* layout_of_packed(DType packed);
const RepackedLayout* layout_of_base(DType base);

// True for the repacked layouts; base_type gives the file type they reorder (t itself otherwise).
bool is_repacked(DType t);
DType base_type(DType t);

// gemm_rows for a repacked problem (p.w_type one of them, p.w_stride the base type's row
// size, `rows` the matrix's row count): rows [r0, r1), r0 a multiple of 8. Tail rows go to the
// base type's kernels.
void gemm_rows_repacked(const GemmProblem& p, int64_t rows, int64_t r0, int64_t r1);

}  // namespace nexus::cpu
