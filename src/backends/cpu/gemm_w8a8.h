// W8A8: int8 weights (one symmetric scale per output row) times int8 activations (one scale per
// token, from the token's absolute maximum or fixed by calibration), exact int32 sums, for prefill.
//
// Layout of a DType::kW8A8 matrix {rows, k} (k % 32 == 0, k >= 64, rows >= 16; the size of the
// Q8_0 matrix it is made from, rb = k / 32 * 34 bytes a row). Rows are taken in groups of sixteen;
// group g (rows 16g .. 16g + 15, g < rows / 16) fills bytes [16g * rb, (16g + 16) * rb):
//   bytes [0, 16k):         k / 4 vectors of 64 bytes; vector j holds codes 4j .. 4j + 3 of each
//                           row, row r at 64j + 4r;
//   bytes [16k, 16k + 32):  the sixteen rows' f16 scales, row 0 first;
//   bytes [16k + 32, +4):   f32 activation scale of the matrix's input (0: quantized per token).
// A code is the int8 weight q (-127..127, w = q * scale) plus 128, stored as uint8. The last
// rows % 16 rows (the tail) are plain: row r at r * rb holds its k codes, then its f16 scale.
// Why this shape: a 32-bit lane holds four codes of one row, so vpdpbusd of a 64-byte vector with
// four activation bytes broadcast to every lane adds sixteen rows' products, each in its own lane,
// with no horizontal step. vpdpbusd multiplies unsigned by signed bytes, hence the +128 on the
// weights (activations stay signed, so they can be the broadcast operand); the kernel takes
// 128 * sum(activation codes) off, a per-token integer computed while quantizing.
// AVX2 has no vpdpbusd: vpmaddubsw(|w|, sign(x, w)) adds two products of at most 127 * 127 per
// int16 (32258 < 32767, so never saturates: why codes stop at 127), then vpmaddwd widens.
// Every ISA computes the same exact int32 S per (row, token), and y = float(S) * (scale_w *
// scale_x): scalar, AVX2 and VNNI outputs are bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus::cpu {

constexpr int64_t kW8A8Rows = 16;

// One weight row of k floats (k % 32 == 0) as Q8_0 blocks that all carry the row's scale:
// d = f16(absmax / 127), q = round_even(clamp(x / d, -127, 127)). A W8A8 file's matrices hold
// such rows, so llama.cpp reads them as ordinary Q8_0.
void quantize_row_w8a8(const float* x, void* q8_0, int64_t k);

// Whether a matrix {rows, k} can take the W8A8 layout (else it stays Q8_0).
bool w8a8_fits(int64_t rows, int64_t k);

// Writes the W8A8 image of a Q8_0 matrix {rows, k} (src, rows * rb bytes; rows a multiple of 16
// unless the block ends the matrix) into dst (the same size, not overlapping). A row whose blocks
// share one scale keeps its codes and scale bit for bit; any other row is quantized again from
// its values with one scale (absmax / 127). `act_scale`: the activation scale stored (0: dynamic).
void repack_w8a8(const void* src, void* dst, int64_t rows, int64_t k, float act_scale);

// Row r of a W8A8 matrix {rows, k} at w as k floats (scale * code).
void dequantize_row_w8a8(const uint8_t* w, int64_t rows, int64_t k, int64_t r, float* out);

// The activation scale stored in a W8A8 matrix (0: per token).
float w8a8_act_scale(const uint8_t* w, int64_t k);

// One token's activations to int8: q[i] = round_even(clamp(x[i] / s, -127, 127)); s = absmax / 127
// when static_scale is 0, else static_scale. Writes q (k bytes), *scale = s and *sum = sum q.
using W8A8QuantizeFn = void (*)(const float* x, int64_t k, float static_scale, int8_t* q,
                                float* scale, int32_t* sum);
void quantize_act_w8a8_ref(const float* x, int64_t k, float static_scale, int8_t* q, float* scale,
                           int32_t* sum);
void quantize_act_w8a8_avx2(const float* x, int64_t k, float static_scale, int8_t* q, float* scale,
                            int32_t* sum);

// One W8A8 multiply: y[t * y_stride + r] = float(S) * (scale_w[r] * xs[t]) with
// S = sum_i q_w[r, i] * xq[t * x_stride + i].
struct W8A8Problem {
  const uint8_t* w;  // the matrix (layout above)
  int64_t rows, k;
  const int8_t* xq;  // token t's codes at xq + t * x_stride
  size_t x_stride;
  const float* xs;      // per token scale
  const int32_t* xsum;  // per token sum of codes
  int64_t n_tokens;
  float* y;
  int64_t y_stride;
};
// Work units of a problem: one per group of sixteen rows, plus one for the tail rows if any.
int64_t w8a8_units(int64_t rows);
// Computes units [u0, u1) for every token. Safe to call concurrently on disjoint unit ranges.
using W8A8GemmFn = void (*)(const W8A8Problem& p, int64_t u0, int64_t u1);
void gemm_w8a8_ref(const W8A8Problem& p, int64_t u0, int64_t u1);
void gemm_w8a8_avx2(const W8A8Problem& p, int64_t u0, int64_t u1);
// AVX512-VNNI/BW on 512-bit registers (cpu::avx512_active()).
void gemm_w8a8_vnni(const W8A8Problem& p, int64_t u0, int64_t u1);
// The tail rows (rows 16 * (rows / 16) on), every ISA's kernel shares it.
void gemm_w8a8_tail(const W8A8Problem& p);

// The active ISA's kernels: VNNI when avx512_active(), AVX2 when avx2_active(), else scalar.
W8A8QuantizeFn quantize_act_w8a8();
W8A8GemmFn gemm_w8a8();

}  // namespace nexus::cpu
