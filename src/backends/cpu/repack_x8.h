// The skeleton every eight-row layout of repack.h shares (private to backends/cpu): moving blocks
// between a plain row-major matrix and its groups of eight rows, and the loop of the AVX2 drivers
// over groups and token passes. A layout supplies only where one row's block goes in a column.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nexus::cpu {

struct X8Layout {
  const char* name;    // for errors: "Q8_0x8"
  int64_t block;       // elements per block of the base type (32 or 256)
  size_t block_bytes;  // bytes per block of the base type; a column holds eight blocks
  // Copy one base-type block of row `lane` (0..7) into its column, and back.
  void (*put)(const uint8_t* block, int64_t lane, uint8_t* column);
  void (*get)(const uint8_t* column, int64_t lane, uint8_t* block);
};

// Writes the layout's image of a base-type matrix {rows, k} (rows % 8 tail rows stay plain);
// throws nexus::Error (naming `what`) when k is not a multiple of the block.
void repack_x8(const X8Layout& l, const char* what, const void* src, void* dst, int64_t rows,
               int64_t k);
// Copies row r back into plain base-type blocks at out; throws when r is out of range.
void unpack_row_x8(const X8Layout& l, const char* what, const void* w, int64_t rows, int64_t k,
                   int64_t r, void* out);

// One group of eight rows against 1-4 tokens (fns[nx - 1]); out[t * out_stride + r].
using X8GroupFn = void (*)(int64_t n_columns, const uint8_t* group, const uint8_t* x,
                           size_t x_stride, float* out, int64_t out_stride);
// n_groups groups of n_columns columns of column_bytes each, against n_tokens tokens in passes
// of at most four (a group stays in L1/L2 across the passes).
void gemm_x8_groups(const X8GroupFn (&fns)[4], int64_t n_columns, size_t column_bytes,
                    const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                    int64_t n_tokens, float* y, int64_t y_stride);

// The scalar references' loop: y[t * y_stride + 8g + r] = row_dot(group, token_row, r) for every
// group g (n_columns columns of column_bytes each, starting at `group`), token t (its activation
// row x + t * x_stride) and row r < 8 of the group.
template <typename RowDot>
void gemm_x8_ref(int64_t n_columns, size_t column_bytes, const uint8_t* w, int64_t n_groups,
                 const uint8_t* x, size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride,
                 const RowDot& row_dot) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g * n_columns) * column_bytes;
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < 8; ++r)
        y[t * y_stride + g * 8 + r] = row_dot(group, x + static_cast<size_t>(t) * x_stride, r);
  }
}

}  // namespace nexus::cpu
