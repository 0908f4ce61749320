// Q5_0x8 layout (see repack.h): where a row's block goes in a column (the rest of repacking is
// repack_x8.cc) and the scalar reference kernel.
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kRowBlock = sizeof(BlockQ5_0);           // 22
constexpr size_t kColumnBytes = kRepackRows * kRowBlock;  // 176 per block column
constexpr size_t kHighOffset = kRepackRows * sizeof(Half);
constexpr size_t kCodesOffset = kHighOffset + kRepackRows * 4;

// Byte offset, within a column, of row r's 16 qs bytes.
constexpr size_t code_offset(int64_t r) {
  return kCodesOffset + 32 * static_cast<size_t>(r % 4) + 16 * static_cast<size_t>(r / 4);
}

void put_block(const uint8_t* block, int64_t lane, uint8_t* col) {
  const auto* b = reinterpret_cast<const BlockQ5_0*>(block);
  std::memcpy(col + lane * sizeof(Half), &b->d, sizeof(Half));
  std::memcpy(col + kHighOffset + 4 * lane, b->qh, 4);
  std::memcpy(col + code_offset(lane), b->qs, 16);
}

void get_block(const uint8_t* col, int64_t lane, uint8_t* block) {
  auto* b = reinterpret_cast<BlockQ5_0*>(block);
  std::memcpy(&b->d, col + lane * sizeof(Half), sizeof(Half));
  std::memcpy(b->qh, col + kHighOffset + 4 * lane, 4);
  std::memcpy(b->qs, col + code_offset(lane), 16);
}

constexpr X8Layout kLayout = {"Q5_0x8", kQK, kRowBlock, put_block, get_block};

}  // namespace

void repack_q5_0x8(const void* src, void* dst, int64_t rows, int64_t k) {
  repack_x8(kLayout, "repack_q5_0x8", src, dst, rows, k);
}

void unpack_row_q5_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  unpack_row_x8(kLayout, "unpack_row_q5_0x8", w, rows, k, r, out);
}

void gemm_q5_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  const auto row_dot = [nb](const uint8_t* group, const uint8_t* xt, int64_t r) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(xt);
    // The AVX2 kernel's arithmetic: the exact int32 block sum of the unsigned codes (0..31) times
    // the activations, less 16 times the activations' sum, then one FMA per block.
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* col = group + i * kColumnBytes;
      Half dw;
      std::memcpy(&dw, col + r * sizeof(Half), sizeof(Half));
      uint32_t qh;
      std::memcpy(&qh, col + kHighOffset + 4 * r, 4);
      const uint8_t* qs = col + code_offset(r);
      int32_t s = 0;
      for (int l = 0; l < 16; ++l) {
        const int lo = (qs[l] & 0x0F) | static_cast<int>(((qh >> l) & 1u) << 4);
        const int hi = (qs[l] >> 4) | static_cast<int>(((qh >> (l + 16)) & 1u) << 4);
        s += lo * b[i].qs[l] + hi * b[i].qs[l + 16] - 16 * (b[i].qs[l] + b[i].qs[l + 16]);
      }
      acc = std::fma(static_cast<float>(s), f16_to_f32(dw) * f16_to_f32(b[i].d), acc);
    }
    return acc;
  };
  gemm_x8_ref(nb, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride, row_dot);
}

}  // namespace nexus::cpu
