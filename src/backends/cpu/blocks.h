// ggml-compatible block layouts for the block-quantized dtypes. Every struct is byte-for-byte the
// layout GGUF files from llama.cpp use (little endian, no padding); the static_asserts pin sizes.
// Private to the CPU backend: the rest of nexus sees only DType and row_bytes().
#pragma once

#include <cstdint>
#include <cstring>

namespace nexus::cpu {

// Elements per block: 32 for the "legacy" types, 256 for the K-quant super-blocks.
constexpr int kQK = 32;
constexpr int kQKK = 256;
// Bytes holding the eight 6-bit scales and eight 6-bit mins of a Q4_K/Q5_K super-block.
constexpr int kKScaleBytes = 12;

// Half-precision value stored as raw IEEE binary16 bits.
using Half = uint16_t;

// x[i] = d * (q[i] - 8); q[i] is the low nibble of qs[i] for i < 16, the high nibble of qs[i-16]
// for i >= 16.
struct BlockQ4_0 {
  Half d;
  uint8_t qs[kQK / 2];
};
// x[i] = d * q[i] + m, nibbles packed as in Q4_0.
struct BlockQ4_1 {
  Half d;
  Half m;
  uint8_t qs[kQK / 2];
};
// x[i] = d * (q[i] - 16); the low 4 bits are packed as in Q4_0, bit 4 of element i is bit i of
// the little-endian 32-bit qh.
struct BlockQ5_0 {
  Half d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = d * q[i] + m, 5-bit q packed as in Q5_0.
struct BlockQ5_1 {
  Half d;
  Half m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = d * qs[i].
struct BlockQ8_0 {
  Half d;
  int8_t qs[kQK];
};
// Q8_0 plus s = d * sum(qs): lets Q4_1/Q5_1 dots fold the weight offset in with one multiply.
struct BlockQ8_1 {
  Half d;
  Half s;
  int8_t qs[kQK];
};

// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in [0, 15], 6-bit sc/m packed in
// `scales` (see unpack_scale_min_k4). qs holds 4 chunks of 64 elements: byte l of chunk c has
// element 64c + l in its low nibble and element 64c + 32 + l in its high nibble.
struct BlockQ4_K {
  Half d;
  Half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16: x = d * (sc[j] & 15) * q - dmin * (sc[j] >> 4), q in [0, 3]. Element
// 128h + 32c + l (l < 32) has its code in bits 2c, 2c + 1 of qs[32h + l] and sub-block 8h + 2c +
// (l >= 16).
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  Half d;
  Half dmin;
};
// 16 sub-blocks of 16: x = d * (s[j] - 32) * (q - 4 * !hbit), q in [0, 3] from qs as in Q2_K,
// hbit of element 128h + 32c + l is bit 4h + c of hmask[l]. The 6-bit s[j] (0..63) are packed in
// `scales`: their low 4 bits in scales[j % 8] (low nibble for j < 8, high nibble for j >= 8),
// their high 2 bits at bit 2 * (j / 4) of scales[8 + j % 4].
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  Half d;
};
// As Q4_K with a fifth bit: bit 2c of qh[l] belongs to element 64c + l, bit 2c+1 to 64c + 32 + l.
struct BlockQ5_K {
  Half d;
  Half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in [0, 63]. Two halves of 128 elements;
// in half h, ql[64h + l] (l < 64) holds the low 4 bits of element 128h + l in its low nibble and of
// 128h + 64 + l in its high nibble; qh[32h + l] (l < 32) holds the top two bits of elements
// 128h + l, +32, +64, +96 at bit offsets 0, 2, 4, 6.
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  Half d;
};
// Activation type for K-quant dots: float scale, 8-bit values and the sums of each 16 values
// (the K-quant min terms need only those sums).
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block. Sub-blocks 0-3 keep their low
// 6 bits in bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 keep their low 4 bits in the nibbles of
// bytes 8-11 and their top 2 bits in the top 2 bits of bytes 0-3 (scale) and 4-7 (min).
inline void unpack_scale_min_k4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Inverse of unpack_scale_min_k4 for all eight sub-blocks (sc[j], m[j] < 64).
inline void pack_scales_mins_k4(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace nexus::cpu
