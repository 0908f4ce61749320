// Q4_Kx8 layout (see repack.h): where a row's super-block goes in a column (the rest of repacking
// is repack_x8.cc) and the scalar reference kernel.
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kRowBlock = sizeof(BlockQ4_K);                   // 144
constexpr size_t kColumnBytes = kRepackRows * kRowBlock;          // 1152 per super-block column
constexpr size_t kDminOffset = kRepackRows * sizeof(Half);        // 16
constexpr size_t kScalesOffset = 2 * kRepackRows * sizeof(Half);  // 32
constexpr size_t kCodesOffset = kScalesOffset + kRepackRows * kKScaleBytes;  // 128

// Byte offset, within a column, of scale word w (0..2) of row r.
constexpr size_t scale_offset(int w, int64_t r) {
  return kScalesOffset + static_cast<size_t>(w) * 32 + static_cast<size_t>(r) * 4;
}
// Byte offset, within a column, of row r's code bytes 32c + 4v .. 32c + 4v + 3 (v < 8).
constexpr size_t code_offset(int c, int v, int64_t r) {
  return kCodesOffset + static_cast<size_t>(8 * c + v) * 32 + static_cast<size_t>(r) * 4;
}

// One row's super-block into its column, and back.
void put_block(const uint8_t* block, int64_t lane, uint8_t* col) {
  BlockQ4_K b;
  std::memcpy(&b, block, sizeof(b));
  std::memcpy(col + lane * sizeof(Half), &b.d, sizeof(Half));
  std::memcpy(col + kDminOffset + lane * sizeof(Half), &b.dmin, sizeof(Half));
  for (int w = 0; w < 3; ++w) std::memcpy(col + scale_offset(w, lane), b.scales + 4 * w, 4);
  for (int c = 0; c < 4; ++c)
    for (int v = 0; v < 8; ++v) std::memcpy(col + code_offset(c, v, lane), b.qs + 32 * c + 4 * v, 4);
}

void get_block(const uint8_t* col, int64_t lane, uint8_t* block) {
  auto* b = reinterpret_cast<BlockQ4_K*>(block);
  std::memcpy(&b->d, col + lane * sizeof(Half), sizeof(Half));
  std::memcpy(&b->dmin, col + kDminOffset + lane * sizeof(Half), sizeof(Half));
  for (int w = 0; w < 3; ++w) std::memcpy(b->scales + 4 * w, col + scale_offset(w, lane), 4);
  for (int c = 0; c < 4; ++c)
    for (int v = 0; v < 8; ++v) std::memcpy(b->qs + 32 * c + 4 * v, col + code_offset(c, v, lane), 4);
}

constexpr X8Layout kLayout = {"Q4_Kx8", kQKK, kRowBlock, put_block, get_block};

}  // namespace

void repack_q4_kx8(const void* src, void* dst, int64_t rows, int64_t k) {
  repack_x8(kLayout, "repack_q4_kx8", src, dst, rows, k);
}

void unpack_row_q4_kx8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  unpack_row_x8(kLayout, "unpack_row_q4_kx8", w, rows, k, r, out);
}

void gemm_q4_kx8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQKK;
  const auto row_dot = [nb](const uint8_t* group, const uint8_t* xt, int64_t r) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(xt);
    // The AVX2 kernel's arithmetic: exact int32 sums per super-block of sc * q * y (S)
    // and of m * (group sums) (M), then two f32 accumulators with one FMA each.
    float acc = 0.0f, macc = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      BlockQ4_K a;
      get_block(group + i * kColumnBytes, r, reinterpret_cast<uint8_t*>(&a));
      int32_t s = 0, m = 0;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, mn;
        unpack_scale_min_k4(j, a.scales, &sc, &mn);
        const int c = j / 2, hi = j % 2;
        int32_t sub = 0;
        for (int l = 0; l < 32; ++l) {
          const int q = hi ? a.qs[32 * c + l] >> 4 : a.qs[32 * c + l] & 0x0F;
          sub += q * b[i].qs[32 * j + l];
        }
        s += sc * sub;
        m += mn * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
      }
      acc = std::fma(static_cast<float>(s), f16_to_f32(a.d) * b[i].d, acc);
      macc = std::fma(static_cast<float>(m), f16_to_f32(a.dmin) * b[i].d, macc);
    }
    return acc - macc;
  };
  gemm_x8_ref(nb, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride, row_dot);
}

}  // namespace nexus::cpu
