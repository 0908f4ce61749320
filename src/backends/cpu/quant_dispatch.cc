// Run-time selection of the quantization kernels: one table per ISA, indexed by dtype. AVX2 is
// used when the CPU reports AVX2, FMA and F16C and NEXUS_FORCE_SCALAR is not set to 1; the AVX2
// table takes the bit-identical AVX-512 F32 decode dots and F16 rows when avx512_active().
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/quant.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/sparse24.h"
#include "nexus/status.h"

namespace nexus::cpu {
namespace {

// GGUF ids run to 30 (BF16); the tables are indexed by id, then the three 2:4 types (ids 1007-1009)
// in the three slots after it.
constexpr size_t kMaxTypeId = 31;
constexpr uint32_t kFirstSparse24 = static_cast<uint32_t>(DType::kF32_2of4);
constexpr size_t kSlots = kMaxTypeId + 3;
using Table = std::array<TypeKernels, kSlots>;

// The table slot of t; kSlots when it has none.
constexpr size_t slot(DType t) {
  const auto id = static_cast<uint32_t>(t);
  if (id < kMaxTypeId) return id;
  if (id >= kFirstSparse24 && id < kFirstSparse24 + 3) return kMaxTypeId + (id - kFirstSparse24);
  return kSlots;
}

constexpr TypeKernels kNone = {DType::kF32, DType::kF32, nullptr, nullptr,
                               nullptr,     nullptr,     nullptr, nullptr};

Table scalar_table() {
  Table t;
  t.fill(kNone);
  auto set = [&](DType d, DType dot, QuantizeFn q, DequantizeFn dq, VecDotFn vd) {
    t.at(slot(d)) = {d, dot, q, dq, vd, nullptr, nullptr, nullptr};
  };
  set(DType::kF32, DType::kF32, quantize_f32_ref, dequantize_f32_ref, vec_dot_f32_ref);
  set(DType::kF16, DType::kF32, quantize_f16_ref, dequantize_f16_ref, vec_dot_f16_ref);
  set(DType::kBF16, DType::kF32, quantize_bf16_ref, dequantize_bf16_ref, vec_dot_bf16_ref);
  set(DType::kQ4_0, DType::kQ8_0, quantize_q4_0_ref, dequantize_q4_0_ref, vec_dot_q4_0_ref);
  set(DType::kQ4_1, DType::kQ8_1, quantize_q4_1_ref, dequantize_q4_1_ref, vec_dot_q4_1_ref);
  set(DType::kQ5_0, DType::kQ8_0, quantize_q5_0_ref, dequantize_q5_0_ref, vec_dot_q5_0_ref);
  set(DType::kQ5_1, DType::kQ8_1, quantize_q5_1_ref, dequantize_q5_1_ref, vec_dot_q5_1_ref);
  set(DType::kQ8_0, DType::kQ8_0, quantize_q8_0_ref, dequantize_q8_0_ref, vec_dot_q8_0_ref);
  set(DType::kQ8_1, DType::kQ8_0, quantize_q8_1_ref, dequantize_q8_1_ref, vec_dot_q8_1_ref);
  set(DType::kQ2_K, DType::kQ8_K, quantize_q2_k_ref, dequantize_q2_k_ref, vec_dot_q2_k_ref);
  set(DType::kQ3_K, DType::kQ8_K, quantize_q3_k_ref, dequantize_q3_k_ref, vec_dot_q3_k_ref);
  set(DType::kQ4_K, DType::kQ8_K, quantize_q4_k_ref, dequantize_q4_k_ref, vec_dot_q4_k_ref);
  set(DType::kQ5_K, DType::kQ8_K, quantize_q5_k_ref, dequantize_q5_k_ref, vec_dot_q5_k_ref);
  set(DType::kQ6_K, DType::kQ8_K, quantize_q6_k_ref, dequantize_q6_k_ref, vec_dot_q6_k_ref);
  set(DType::kQ8_K, DType::kQ8_K, quantize_q8_k_ref, dequantize_q8_k_ref, vec_dot_q8_k_ref);
  set(DType::kF32_2of4, DType::kF32, quantize_f32_2of4_ref, dequantize_f32_2of4_ref,
      vec_dot_f32_2of4_ref);
  set(DType::kF16_2of4, DType::kF32, quantize_f16_2of4_ref, dequantize_f16_2of4_ref,
      vec_dot_f16_2of4_ref);
  set(DType::kBF16_2of4, DType::kF32, quantize_bf16_2of4_ref, dequantize_bf16_2of4_ref,
      vec_dot_bf16_2of4_ref);
  return t;
}

// The scalar table with the AVX2 kernels that exist patched in. K-quant and Q4/Q5 quantizers stay
// scalar: they run once per weight, not per token.
Table avx2_table() {
  Table t = scalar_table();
  auto patch = [&](DType d, QuantizeFn q, DequantizeFn dq, VecDotFn vd) {
    TypeKernels& k = t.at(slot(d));
    if (q) k.quantize = q;
    if (dq) k.dequantize = dq;
    if (vd) k.vec_dot = vd;
  };
  patch(DType::kF32, nullptr, nullptr, vec_dot_f32_avx2);
  patch(DType::kF16, quantize_f16_avx2, dequantize_f16_avx2, vec_dot_f16_avx2);
  patch(DType::kBF16, quantize_bf16_avx2, dequantize_bf16_avx2, vec_dot_bf16_avx2);
  patch(DType::kQ4_0, nullptr, dequantize_q4_0_avx2, vec_dot_q4_0_avx2);
  patch(DType::kQ4_1, nullptr, dequantize_q4_1_avx2, vec_dot_q4_1_avx2);
  patch(DType::kQ5_0, nullptr, dequantize_q5_0_avx2, vec_dot_q5_0_avx2);
  patch(DType::kQ5_1, nullptr, dequantize_q5_1_avx2, vec_dot_q5_1_avx2);
  patch(DType::kQ8_0, quantize_q8_0_avx2, dequantize_q8_0_avx2, vec_dot_q8_0_avx2);
  patch(DType::kQ8_1, quantize_q8_1_avx2, dequantize_q8_1_avx2, nullptr);
  patch(DType::kQ2_K, nullptr, dequantize_q2_k_avx2, vec_dot_q2_k_avx2);
  patch(DType::kQ3_K, nullptr, dequantize_q3_k_avx2, vec_dot_q3_k_avx2);
  patch(DType::kQ4_K, nullptr, dequantize_q4_k_avx2, vec_dot_q4_k_avx2);
  patch(DType::kQ5_K, nullptr, dequantize_q5_k_avx2, vec_dot_q5_k_avx2);
  patch(DType::kQ6_K, nullptr, dequantize_q6_k_avx2, vec_dot_q6_k_avx2);
  patch(DType::kQ8_K, quantize_q8_k_avx2, dequantize_q8_k_avx2, vec_dot_q8_k_avx2);
  t[static_cast<size_t>(DType::kQ4_0)].vec_dot_rows = vec_dot_rows_q4_0_avx2;
  t[static_cast<size_t>(DType::kQ8_0)].vec_dot_rows = vec_dot_rows_q8_0_avx2;
  t[static_cast<size_t>(DType::kQ2_K)].vec_dot_rows = vec_dot_rows_q2_k_avx2;
  t[static_cast<size_t>(DType::kQ3_K)].vec_dot_rows = vec_dot_rows_q3_k_avx2;
  t[static_cast<size_t>(DType::kQ4_K)].vec_dot_rows = vec_dot_rows_q4_k_avx2;
  t[static_cast<size_t>(DType::kQ5_K)].vec_dot_rows = vec_dot_rows_q5_k_avx2;
  t[static_cast<size_t>(DType::kQ6_K)].vec_dot_rows = vec_dot_rows_q6_k_avx2;
  t[static_cast<size_t>(DType::kF32)].vec_dot_wrows = vec_dot_wrows_f32_avx2;
  t[static_cast<size_t>(DType::kF16)].vec_dot_wrows = vec_dot_wrows_f16_avx2;
  t[static_cast<size_t>(DType::kBF16)].vec_dot_wrows = vec_dot_wrows_bf16_avx2;
  t[static_cast<size_t>(DType::kQ4_0)].vec_dot_wrows = vec_dot_wrows_q4_0_avx2;
  t[static_cast<size_t>(DType::kQ8_0)].vec_dot_wrows = vec_dot_wrows_q8_0_avx2;
  t[static_cast<size_t>(DType::kQ2_K)].vec_dot_wrows = vec_dot_wrows_q2_k_avx2;
  t[static_cast<size_t>(DType::kQ3_K)].vec_dot_wrows = vec_dot_wrows_q3_k_avx2;
  t[static_cast<size_t>(DType::kQ4_K)].vec_dot_wrows = vec_dot_wrows_q4_k_avx2;
  t[static_cast<size_t>(DType::kQ5_K)].vec_dot_wrows = vec_dot_wrows_q5_k_avx2;
  t[static_cast<size_t>(DType::kQ6_K)].vec_dot_wrows = vec_dot_wrows_q6_k_avx2;
  t[static_cast<size_t>(DType::kF32)].vec_dot_tile = vec_dot_tile_f32_avx2;
  t[static_cast<size_t>(DType::kF16)].vec_dot_tile = vec_dot_tile_f16_avx2;
  t[static_cast<size_t>(DType::kQ8_0)].vec_dot_tile = vec_dot_tile_q8_0_avx2;
  t[static_cast<size_t>(DType::kQ2_K)].vec_dot_tile = vec_dot_tile_q2_k_avx2;
  t[static_cast<size_t>(DType::kQ3_K)].vec_dot_tile = vec_dot_tile_q3_k_avx2;
  t[static_cast<size_t>(DType::kQ4_K)].vec_dot_tile = vec_dot_tile_q4_k_avx2;
  t[static_cast<size_t>(DType::kQ5_K)].vec_dot_tile = vec_dot_tile_q5_k_avx2;
  t[static_cast<size_t>(DType::kQ6_K)].vec_dot_tile = vec_dot_tile_q6_k_avx2;
  struct Sparse {
    DType d;
    VecDotFn vd;
    VecDotRowsFn rows;
    VecDotWRowsFn wrows;
  };
  for (const Sparse& s : {Sparse{DType::kF32_2of4, vec_dot_f32_2of4_avx2,
                                 vec_dot_rows_f32_2of4_avx2, vec_dot_wrows_f32_2of4_avx2},
                          Sparse{DType::kF16_2of4, vec_dot_f16_2of4_avx2,
                                 vec_dot_rows_f16_2of4_avx2, vec_dot_wrows_f16_2of4_avx2},
                          Sparse{DType::kBF16_2of4, vec_dot_bf16_2of4_avx2,
                                 vec_dot_rows_bf16_2of4_avx2, vec_dot_wrows_bf16_2of4_avx2}}) {
    patch(s.d, nullptr, nullptr, s.vd);
    t.at(slot(s.d)).vec_dot_rows = s.rows;
    t.at(slot(s.d)).vec_dot_wrows = s.wrows;
  }
  if (avx512_active()) {
    patch(DType::kF32, nullptr, nullptr, vec_dot_f32_avx512);
    t[static_cast<size_t>(DType::kF32)].vec_dot_wrows = vec_dot_wrows_f32_avx512;
    t[static_cast<size_t>(DType::kF16)].vec_dot_wrows = vec_dot_wrows_f16_avx512;
    t[static_cast<size_t>(DType::kBF16)].vec_dot_wrows = vec_dot_wrows_bf16_avx512;
  }
  return t;
}

const Table& table(Isa isa) {
  static const Table scalar = scalar_table();
  static const Table avx2 = avx2_table();
  return isa == Isa::kAvx2 ? avx2 : scalar;
}

const TypeKernels& lookup(DType t, Isa isa) {
  const auto id = static_cast<size_t>(t);
  if (slot(t) < kSlots) {
    const TypeKernels& k = table(isa)[slot(t)];
    if (k.vec_dot != nullptr) return k;
  }
  throw Error("[quant] no CPU kernels for dtype " + std::to_string(id) + " (" +
              (dtype_traits(static_cast<uint32_t>(id)) ? std::string(dtype_name(t)) : "unknown") +
              ")");
}

}  // namespace

const TypeKernels& kernels(DType t, Isa isa) {
  if (!isa_supported(isa)) throw Error("[quant] this CPU cannot run the AVX2/FMA/F16C kernels");
  return lookup(t, isa);
}

const TypeKernels& kernels(DType t) {
  // The hot path (every matmul asks): the active table is looked up once.
  static const Table& active = table(active_isa());
  const size_t i = slot(t);
  if (i < kSlots && active[i].vec_dot != nullptr) return active[i];
  return lookup(t, active_isa());  // throws with the type's name
}

bool has_kernels(DType t) {
  const size_t i = slot(t);
  return i < kSlots && table(Isa::kScalar)[i].vec_dot != nullptr;
}

void quantize_row(DType t, const float* x, void* y, int64_t n) {
  const TypeKernels& k = kernels(t);
  row_bytes(t, n);  // throws when n is not a multiple of the block size
  k.quantize(x, y, n);
}

void dequantize_row(DType t, const void* x, float* y, int64_t n) {
  const TypeKernels& k = kernels(t);
  row_bytes(t, n);
  k.dequantize(x, y, n);
}

DType vec_dot_type(DType t) { return kernels(t).dot_type; }

float vec_dot(DType t, int64_t n, const void* w, const void* x) {
  const TypeKernels& k = kernels(t);
  row_bytes(t, n);
  return k.vec_dot(n, w, x);
}

}  // namespace nexus::cpu
