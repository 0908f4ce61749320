// Element types: plain floats and GGUF/ggml block-quantized types, with their exact byte layouts.
// The numeric ids are the GGUF tensor type ids, so a type read from a file maps 1:1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nexus {

// The precision a value is stored or rounded to: f32 (no rounding), bf16 or IEEE fp16. Mixed
// precision training keeps its saved activations and weight copies in one of the 16-bit ones.
enum class Precision { kF32, kBF16, kF16 };

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  // nexus-internal, never in a file: Q4_0, Q5_0, Q4_K, Q6_K and Q8_0 matmul weights repacked at
  // load in groups of eight rows (layouts in src/backends/cpu/repack.h). Same sizes as their file
  // types; ids >= kFirstInternalDType.
  kQ4_0x8 = 1002,
  kQ4_Kx8 = 1003,
  kQ6_Kx8 = 1004,
  kQ8_0x8 = 1005,
  kQ5_0x8 = 1006,
  // nexus-internal: F32/F16/BF16 matmul weights whose every group of four consecutive values along
  // a row holds at most two nonzeros (2:4 semi-structured sparsity), compressed at load to the two
  // kept values and their positions (layout in src/backends/cpu/sparse24.h).
  kF32_2of4 = 1007,
  kF16_2of4 = 1008,
  kBF16_2of4 = 1009,
  // Q8_0 matrices of a W8A8 file (one scale per row) repacked at load for the int8 x int8 GEMM:
  // sixteen rows interleaved, codes offset to unsigned (layout in src/backends/cpu/gemm_w8a8.h).
  // Same size as Q8_0.
  kW8A8 = 1010,
};

// Ids from here on are in-memory layouts: dtype_traits(id) and dtype_from_name do not know them.
constexpr uint32_t kFirstInternalDType = 1000;

// Static facts about a dtype: elements per block and bytes per block (1 and sizeof(T) for plain
// types). `supported` is false for types nexus can read from a file's table but not compute with.
struct DTypeTraits {
  std::string_view name;
  int64_t block_size;
  size_t block_bytes;
  bool quantized;
  bool supported;
};

// Traits of `t`; nullopt for ids that are not a known GGUF type.
std::optional<DTypeTraits> dtype_traits(uint32_t id);
// Traits of a known type (throws nexus::Error for an unknown id).
const DTypeTraits& traits(DType t);
std::string_view dtype_name(DType t);
// Parses "f32", "F16", "q8_0", ... (case-insensitive).
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes of a row of `n` elements; throws when n is not a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f);

}  // namespace nexus
