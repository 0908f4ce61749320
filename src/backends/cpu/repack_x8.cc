// The shared skeleton of the eight-row layouts (repack_x8.h).
#include "backends/cpu/repack_x8.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/repack.h"
#include "nexus/status.h"

namespace nexus::cpu {
namespace {

void check_shape(const X8Layout& l, const char* what, int64_t rows, int64_t k) {
  NEXUS_CHECK(rows >= 0 && k >= 0 && k % l.block == 0,
              std::string("[") + what + "] " + l.name + " matrix " + std::to_string(rows) + "x" +
                  std::to_string(k) + ": k must be a multiple of " + std::to_string(l.block));
}

}  // namespace

void repack_x8(const X8Layout& l, const char* what, const void* src, void* dst, int64_t rows,
               int64_t k) {
  check_shape(l, what, rows, k);
  const int64_t nb = k / l.block;
  const size_t rb = static_cast<size_t>(nb) * l.block_bytes, cb = kRepackRows * l.block_bytes;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const int64_t full = rows / kRepackRows * kRepackRows;
  for (int64_t g = 0; g < full; g += kRepackRows)
    for (int64_t r = 0; r < kRepackRows; ++r) {
      const uint8_t* row = s + static_cast<size_t>(g + r) * rb;
      uint8_t* group = d + static_cast<size_t>(g) * rb;
      for (int64_t i = 0; i < nb; ++i) l.put(row + i * l.block_bytes, r, group + i * cb);
    }
  // The tail keeps the plain layout.
  std::memcpy(d + static_cast<size_t>(full) * rb, s + static_cast<size_t>(full) * rb,
              static_cast<size_t>(rows - full) * rb);
}

void unpack_row_x8(const X8Layout& l, const char* what, const void* w, int64_t rows, int64_t k,
                   int64_t r, void* out) {
  check_shape(l, what, rows, k);
  NEXUS_CHECK(r >= 0 && r < rows, std::string("[") + what + "] row " + std::to_string(r) +
                                      " out of range for " + std::to_string(rows) + " rows");
  const int64_t nb = k / l.block;
  const size_t rb = static_cast<size_t>(nb) * l.block_bytes, cb = kRepackRows * l.block_bytes;
  const auto* base = static_cast<const uint8_t*>(w);
  if (r >= rows / kRepackRows * kRepackRows) {
    std::memcpy(out, base + static_cast<size_t>(r) * rb, rb);
    return;
  }
  const uint8_t* group = base + static_cast<size_t>(r - r % kRepackRows) * rb;
  auto* o = static_cast<uint8_t*>(out);
  for (int64_t i = 0; i < nb; ++i) l.get(group + i * cb, r % kRepackRows, o + i * l.block_bytes);
}

void gemm_x8_groups(const X8GroupFn (&fns)[4], int64_t n_columns, size_t column_bytes,
                    const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                    int64_t n_tokens, float* y, int64_t y_stride) {
  constexpr int64_t kMaxTokens = 4;
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g * n_columns) * column_bytes;
    for (int64_t t = 0; t < n_tokens; t += kMaxTokens) {
      const int64_t nx = std::min(kMaxTokens, n_tokens - t);
      fns[nx - 1](n_columns, group, x + static_cast<size_t>(t) * x_stride, x_stride,
                  y + t * y_stride + g * kRepackRows, y_stride);
    }
  }
}

}  // namespace nexus::cpu
