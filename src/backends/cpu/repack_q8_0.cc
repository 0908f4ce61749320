// Q8_0x8 layout (see repack.h): repacking, row unpacking and the scalar reference kernel.
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/status.h"

namespace nexus::cpu {
namespace {

constexpr size_t kRowBlock = sizeof(BlockQ8_0);           // 34
constexpr size_t kColumnBytes = kRepackRows * kRowBlock;  // 272 per block column
constexpr size_t kCodesOffset = kRepackRows * sizeof(Half);

// Byte offset, within a column, of row r's codes 16e .. 16e + 15.
constexpr size_t code_offset(int e, int64_t r) {
  return kCodesOffset + 32 * static_cast<size_t>(2 * (r % 4) + e) + 16 * static_cast<size_t>(r / 4);
}

void check_shape(const char* what, int64_t rows, int64_t k) {
  NEXUS_CHECK(rows >= 0 && k >= 0 && k % kQK == 0,
              std::string("[") + what + "] Q8_0x8 matrix " + std::to_string(rows) + "x" +
                  std::to_string(k) + ": k must be a multiple of 32");
}

}  // namespace

void repack_q8_0x8(const void* src, void* dst, int64_t rows, int64_t k) {
  check_shape("repack_q8_0x8", rows, k);
  const int64_t nb = k / kQK;
  const size_t rb = static_cast<size_t>(nb) * kRowBlock;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const int64_t full = rows / kRepackRows * kRepackRows;
  for (int64_t g = 0; g < full; g += kRepackRows)
    for (int64_t r = 0; r < kRepackRows; ++r) {
      const auto* row = reinterpret_cast<const BlockQ8_0*>(s + static_cast<size_t>(g + r) * rb);
      uint8_t* group = d + static_cast<size_t>(g) * rb;
      for (int64_t i = 0; i < nb; ++i) {
        uint8_t* col = group + i * kColumnBytes;
        std::memcpy(col + r * sizeof(Half), &row[i].d, sizeof(Half));
        for (int e = 0; e < 2; ++e) std::memcpy(col + code_offset(e, r), row[i].qs + 16 * e, 16);
      }
    }
  std::memcpy(d + static_cast<size_t>(full) * rb, s + static_cast<size_t>(full) * rb,
              static_cast<size_t>(rows - full) * rb);
}

void unpack_row_q8_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  check_shape("unpack_row_q8_0x8", rows, k);
  NEXUS_CHECK(r >= 0 && r < rows, "[unpack_row_q8_0x8] row " + std::to_string(r) +
                                      " out of range for " + std::to_string(rows) + " rows");
  const int64_t nb = k / kQK;
  const size_t rb = static_cast<size_t>(nb) * kRowBlock;
  const auto* base = static_cast<const uint8_t*>(w);
  if (r >= rows / kRepackRows * kRepackRows) {
    std::memcpy(out, base + static_cast<size_t>(r) * rb, rb);
    return;
  }
  const uint8_t* group = base + static_cast<size_t>(r - r % kRepackRows) * rb;
  const int64_t lane = r % kRepackRows;
  auto* o = static_cast<BlockQ8_0*>(out);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = group + i * kColumnBytes;
    std::memcpy(&o[i].d, col + lane * sizeof(Half), sizeof(Half));
    for (int e = 0; e < 2; ++e) std::memcpy(o[i].qs + 16 * e, col + code_offset(e, lane), 16);
  }
}

void gemm_q8_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g) * nb * kColumnBytes;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(x + static_cast<size_t>(t) * x_stride);
      for (int64_t r = 0; r < kRepackRows; ++r) {
        // The AVX2 kernel's arithmetic: the exact int32 block sum, then one FMA per block.
        float acc = 0.0f;
        for (int64_t i = 0; i < nb; ++i) {
          const uint8_t* col = group + i * kColumnBytes;
          Half dw;
          std::memcpy(&dw, col + r * sizeof(Half), sizeof(Half));
          int32_t s = 0;
          for (int e = 0; e < 2; ++e) {
            const auto* q = reinterpret_cast<const int8_t*>(col + code_offset(e, r));
            for (int l = 0; l < 16; ++l) s += q[l] * b[i].qs[16 * e + l];
          }
          acc = std::fma(static_cast<float>(s), f16_to_f32(dw) * f16_to_f32(b[i].d), acc);
        }
        y[t * y_stride + g * kRepackRows + r] = acc;
      }
    }
  }
}

}  // namespace nexus::cpu
