// Q6_Kx8 layout (see repack.h): where a row's super-block goes in a column (the rest of repacking
// is repack_x8.cc) and the scalar reference kernel.
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_x8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kRowBlock = sizeof(BlockQ6_K);                  // 210
constexpr size_t kColumnBytes = kRepackRows * kRowBlock;         // 1680 per super-block column
constexpr size_t kScalesOffset = kRepackRows * sizeof(Half);     // 16
constexpr size_t kLowOffset = kScalesOffset + kRepackRows * 16;  // 144
constexpr size_t kHighOffset = kLowOffset + kRepackRows * 128;   // 1168

// Offsets within a column: row r's scales 2q and 2q + 1; its ql bytes 64h + 32a + 16e .. +15;
// its qh bytes 32h + 16e .. +15.
constexpr size_t scale_offset(int q, int64_t r) { return kScalesOffset + 16 * q + 2 * r; }
constexpr size_t low_offset(int h, int a, int e, int64_t r) {
  return kLowOffset + 32 * static_cast<size_t>(((2 * h + a) * 2 + e) * 4 + r % 4) + 16 * (r / 4);
}
constexpr size_t high_offset(int h, int e, int64_t r) {
  return kHighOffset + 32 * static_cast<size_t>((2 * h + e) * 4 + r % 4) + 16 * (r / 4);
}

void put_block(const uint8_t* block, int64_t lane, uint8_t* col) {
  BlockQ6_K b;
  std::memcpy(&b, block, sizeof(b));
  std::memcpy(col + lane * sizeof(Half), &b.d, sizeof(Half));
  for (int q = 0; q < 8; ++q) std::memcpy(col + scale_offset(q, lane), b.scales + 2 * q, 2);
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 2; ++e) {
      for (int a = 0; a < 2; ++a)
        std::memcpy(col + low_offset(h, a, e, lane), b.ql + 64 * h + 32 * a + 16 * e, 16);
      std::memcpy(col + high_offset(h, e, lane), b.qh + 32 * h + 16 * e, 16);
    }
}

void get_block(const uint8_t* col, int64_t lane, uint8_t* block) {
  auto* b = reinterpret_cast<BlockQ6_K*>(block);
  std::memcpy(&b->d, col + lane * sizeof(Half), sizeof(Half));
  for (int q = 0; q < 8; ++q) std::memcpy(b->scales + 2 * q, col + scale_offset(q, lane), 2);
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 2; ++e) {
      for (int a = 0; a < 2; ++a)
        std::memcpy(b->ql + 64 * h + 32 * a + 16 * e, col + low_offset(h, a, e, lane), 16);
      std::memcpy(b->qh + 32 * h + 16 * e, col + high_offset(h, e, lane), 16);
    }
}

constexpr X8Layout kLayout = {"Q6_Kx8", kQKK, kRowBlock, put_block, get_block};

}  // namespace

void repack_q6_kx8(const void* src, void* dst, int64_t rows, int64_t k) {
  repack_x8(kLayout, "repack_q6_kx8", src, dst, rows, k);
}

void unpack_row_q6_kx8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  unpack_row_x8(kLayout, "unpack_row_q6_kx8", w, rows, k, r, out);
}

void gemm_q6_kx8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQKK;
  const auto row_dot = [nb](const uint8_t* group, const uint8_t* xt, int64_t r) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(xt);
    // The AVX2 kernel's arithmetic: the exact int32 S = sum_g sc[g] * sum q * y (codes
    // 0..63)
    // - 32 * sum_g sc[g] * bsums[g] per super-block, then one FMA.
    float acc = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      BlockQ6_K a;
      get_block(group + i * kColumnBytes, r, reinterpret_cast<uint8_t*>(&a));
      int32_t s = 0;
      for (int grp = 0; grp < 16; ++grp) {
        // Elements 16 grp .. 16 grp + 15: half h, quarter k, bytes 16e .. 16e + 15.
        const int h = grp / 8, kq = (grp / 2) % 4, e = grp % 2;
        int32_t sub = 0;
        for (int l = 16 * e; l < 16 * e + 16; ++l) {
          const uint8_t lo = a.ql[64 * h + 32 * (kq % 2) + l];
          const int nib = kq < 2 ? lo & 0x0F : lo >> 4;
          const int q = nib | (((a.qh[32 * h + l] >> (2 * kq)) & 3) << 4);
          sub += q * b[i].qs[16 * grp + l - 16 * e];
        }
        s += a.scales[grp] * (sub - 32 * b[i].bsums[grp]);
      }
      acc = std::fma(static_cast<float>(s), f16_to_f32(a.d) * b[i].d, acc);
    }
    return acc;
  };
  gemm_x8_ref(nb, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride, row_dot);
}

}  // namespace nexus::cpu
