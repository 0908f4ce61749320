// Q8_0x8 layout (see repack.h): where a row's block goes in a column (the rest of repacking is
// repack_x8.cc) and the scalar reference kernel.
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kRowBlock = sizeof(BlockQ8_0);           // 34
constexpr size_t kColumnBytes = kRepackRows * kRowBlock;  // 272 per block column
constexpr size_t kCodesOffset = kRepackRows * sizeof(Half);

// Byte offset, within a column, of row r's codes 16e .. 16e + 15.
constexpr size_t code_offset(int e, int64_t r) {
  return kCodesOffset + 32 * static_cast<size_t>(2 * (r % 4) + e) + 16 * static_cast<size_t>(r / 4);
}

void put_block(const uint8_t* block, int64_t lane, uint8_t* col) {
  std::memcpy(col + lane * sizeof(Half), block, sizeof(Half));
  for (int e = 0; e < 2; ++e)
    std::memcpy(col + code_offset(e, lane), block + sizeof(Half) + 16 * e, 16);
}

void get_block(const uint8_t* col, int64_t lane, uint8_t* block) {
  std::memcpy(block, col + lane * sizeof(Half), sizeof(Half));
  for (int e = 0; e < 2; ++e)
    std::memcpy(block + sizeof(Half) + 16 * e, col + code_offset(e, lane), 16);
}

constexpr X8Layout kLayout = {"Q8_0x8", kQK, kRowBlock, put_block, get_block};

}  // namespace

void repack_q8_0x8(const void* src, void* dst, int64_t rows, int64_t k) {
  repack_x8(kLayout, "repack_q8_0x8", src, dst, rows, k);
}

void unpack_row_q8_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  unpack_row_x8(kLayout, "unpack_row_q8_0x8", w, rows, k, r, out);
}

void gemm_q8_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  const auto row_dot = [nb](const uint8_t* group, const uint8_t* xt, int64_t r) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(xt);
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
    return acc;
  };
  gemm_x8_ref(nb, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride, row_dot);
}

}  // namespace nexus::cpu
