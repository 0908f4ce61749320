// Q4_0x8 layout (see repack.h): repacking, row unpacking and the scalar reference kernel; and for
// every repacked layout, row dequantization and the gemm_rows driver that picks the AVX2 or the
// scalar kernel.
#include "backends/cpu/repack.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/blocks.h"
#include "backends/cpu/gemm_w8a8.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack_x8.h"
#include "nexus/status.h"

namespace nexus::cpu {
namespace {

constexpr size_t kScaleBytes = kRepackRows * sizeof(Half);        // 16
constexpr size_t kCodeBytes = sizeof(BlockQ4_0) - sizeof(Half);   // 16 per row
constexpr size_t kColumnBytes = kRepackRows * sizeof(BlockQ4_0);  // 144 per block column

// Byte offset, within a block column, of code byte m (0..15) of row r: bytes 4j .. 4j + 3 of
// the eight rows make up the 32 bytes of vector j, row r at 4r.
constexpr size_t code_offset(int64_t m, int64_t r) {
  return kScaleBytes + 32 * static_cast<size_t>(m / 4) + 4 * static_cast<size_t>(r) +
         static_cast<size_t>(m % 4);
}

void put_block(const uint8_t* block, int64_t lane, uint8_t* col) {
  std::memcpy(col + lane * sizeof(Half), block, sizeof(Half));
  for (int64_t m = 0; m < static_cast<int64_t>(kCodeBytes); m += 4)
    std::memcpy(col + code_offset(m, lane), block + sizeof(Half) + m, 4);
}

void get_block(const uint8_t* col, int64_t lane, uint8_t* block) {
  std::memcpy(block, col + lane * sizeof(Half), sizeof(Half));
  for (int64_t m = 0; m < static_cast<int64_t>(kCodeBytes); m += 4)
    std::memcpy(block + sizeof(Half) + m, col + code_offset(m, lane), 4);
}

constexpr X8Layout kLayout = {"Q4_0x8", kQK, sizeof(BlockQ4_0), put_block, get_block};

}  // namespace

void repack_q4_0x8(const void* src, void* dst, int64_t rows, int64_t k) {
  repack_x8(kLayout, "repack_q4_0x8", src, dst, rows, k);
}

void unpack_row_q4_0x8(const void* w, int64_t rows, int64_t k, int64_t r, void* out) {
  unpack_row_x8(kLayout, "unpack_row_q4_0x8", w, rows, k, r, out);
}

std::span<const RepackedLayout> repacked_layouts() {
  static constexpr RepackedLayout kLayouts[] = {
      {DType::kQ4_0x8, DType::kQ4_0, repack_q4_0x8, unpack_row_q4_0x8, gemm_q4_0x8_ref,
       gemm_q4_0x8_avx2, gemm_q4_0x8_vnni},
      {DType::kQ8_0x8, DType::kQ8_0, repack_q8_0x8, unpack_row_q8_0x8, gemm_q8_0x8_ref,
       gemm_q8_0x8_avx2, gemm_q8_0x8_vnni},
      {DType::kQ5_0x8, DType::kQ5_0, repack_q5_0x8, unpack_row_q5_0x8, gemm_q5_0x8_ref,
       gemm_q5_0x8_avx2, gemm_q5_0x8_vnni},
      {DType::kQ4_Kx8, DType::kQ4_K, repack_q4_kx8, unpack_row_q4_kx8, gemm_q4_kx8_ref,
       gemm_q4_kx8_avx2, gemm_q4_kx8_vnni},
      {DType::kQ6_Kx8, DType::kQ6_K, repack_q6_kx8, unpack_row_q6_kx8, gemm_q6_kx8_ref,
       gemm_q6_kx8_avx2, gemm_q6_kx8_vnni},
  };
  return kLayouts;
}

const RepackedLayout* layout_of_packed(DType packed) {
  for (const RepackedLayout& l : repacked_layouts())
    if (l.packed == packed) return &l;
  return nullptr;
}

const RepackedLayout* layout_of_base(DType base) {
  for (const RepackedLayout& l : repacked_layouts())
    if (l.base == base) return &l;
  return nullptr;
}

bool is_repacked(DType t) { return layout_of_packed(t) != nullptr; }

DType base_type(DType t) {
  const RepackedLayout* l = layout_of_packed(t);
  return l != nullptr ? l->base : t;
}

void dequantize_matrix_row(DType t, const uint8_t* w, int64_t rows, int64_t k, int64_t r,
                           float* out) {
  if (t == DType::kW8A8) {
    dequantize_row_w8a8(w, rows, k, r, out);
    return;
  }
  const RepackedLayout* l = layout_of_packed(t);
  if (l == nullptr) {
    dequantize_row(t, w + static_cast<size_t>(r) * row_bytes(t, k), out, k);
    return;
  }
  // Grown once per thread to the longest row seen.
  thread_local std::vector<uint8_t> row;
  if (row.size() < row_bytes(l->base, k)) row.resize(row_bytes(l->base, k));
  l->unpack_row(w, rows, k, r, row.data());
  dequantize_row(l->base, row.data(), out, k);
}

void gemm_q4_0x8_ref(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                     size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  const auto row_dot = [nb](const uint8_t* group, const uint8_t* xt, int64_t r) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(xt);
    // The scalar Q4_0 vec_dot, operation for operation: exact integer block sum with
    // the -8 offset taken off as 8 * sum(y), then s += sum * (d_w * d_y) without FMA.
    float s = 0.0f;
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* col = group + static_cast<size_t>(i) * kColumnBytes;
      Half dw;
      std::memcpy(&dw, col + r * sizeof(Half), sizeof(Half));
      int sumi = 0, sumx = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        const uint8_t q = col[code_offset(j, r)];
        sumi += (q & 0x0F) * b[i].qs[j] + (q >> 4) * b[i].qs[j + kQK / 2];
        sumx += b[i].qs[j] + b[i].qs[j + kQK / 2];
      }
      sumi -= 8 * sumx;
      s += static_cast<float>(sumi) * (f16_to_f32(dw) * f16_to_f32(b[i].d));
    }
    return s;
  };
  gemm_x8_ref(nb, kColumnBytes, w, n_groups, x, x_stride, n_tokens, y, y_stride, row_dot);
}

void gemm_rows_repacked(const GemmProblem& p, int64_t rows, int64_t r0, int64_t r1) {
  const RepackedLayout* l = layout_of_packed(p.w_type);
  const int64_t full = rows / kRepackRows * kRepackRows;
  NEXUS_CHECK(l != nullptr && r0 % kRepackRows == 0 && r0 <= r1 && r1 <= rows &&
                  (r1 >= full || r1 % kRepackRows == 0),
              "[gemm_rows_repacked] rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                  ") do not start and end on a group of 8 (matrix of " + std::to_string(rows) +
                  " rows, " + std::string(dtype_name(p.w_type)) + ")");
  const int64_t g1 = std::min(r1, full);
  if (r0 < g1) {
    const uint8_t* w = p.w + static_cast<size_t>(r0) * p.w_stride;
    const GemmX8Fn kernel = active_isa() != Isa::kAvx2       ? l->ref
                            : l->vnni != nullptr && avx512_active() ? l->vnni
                                                                    : l->avx2;
    kernel(p.k, w, (g1 - r0) / kRepackRows, p.x, p.x_stride, p.n_tokens, p.y + r0, p.y_stride);
  }
  if (r1 > full) {
    GemmProblem tail = p;
    tail.w_type = l->base;
    gemm_rows(tail, std::max(r0, full), r1);
  }
}

}  // namespace nexus::cpu
