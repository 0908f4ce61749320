// dtype traits table and scalar f16/bf16 conversions.
#include "nexus/dtype.h"

#include <array>
#include <cctype>
#include <cstring>
#include <string>

#include "nexus/status.h"

namespace nexus {
namespace {

struct Entry {
  uint32_t id;
  DTypeTraits t;
};

// Block layouts follow ggml's (bit-exact with GGUF files written by llama.cpp).
// clang-format off
constexpr std::array<Entry, 29> kTable = {{
    {0, {"F32", 1, 4, false, true}},
    {1, {"F16", 1, 2, false, true}},
    {2, {"Q4_0", 32, 18, true, true}},
    {3, {"Q4_1", 32, 20, true, true}},
    {6, {"Q5_0", 32, 22, true, true}},
    {7, {"Q5_1", 32, 24, true, true}},
    {8, {"Q8_0", 32, 34, true, true}},
    {9, {"Q8_1", 32, 36, true, true}},
    {10, {"Q2_K", 256, 84, true, true}},
    {11, {"Q3_K", 256, 110, true, true}},
    {12, {"Q4_K", 256, 144, true, true}},
    {13, {"Q5_K", 256, 176, true, true}},
    {14, {"Q6_K", 256, 210, true, true}},
    {15, {"Q8_K", 256, 292, true, true}},
    {24, {"I8", 1, 1, false, false}},
    {25, {"I16", 1, 2, false, false}},
    {26, {"I32", 1, 4, false, false}},
    {27, {"I64", 1, 8, false, false}},
    {28, {"F64", 1, 8, false, false}},
    {30, {"BF16", 1, 2, false, true}},
    {1002, {"Q4_0x8", 32, 18, true, true}},
    {1003, {"Q4_Kx8", 256, 144, true, true}},
    {1004, {"Q6_Kx8", 256, 210, true, true}},
    {1005, {"Q8_0x8", 32, 34, true, true}},
    {1006, {"Q5_0x8", 32, 22, true, true}},
    // 2:4 blocks of 32 values: a u32 of positions, then the 16 kept values.
    {1007, {"F32_2:4", 32, 68, true, true}},
    {1008, {"F16_2:4", 32, 36, true, true}},
    {1009, {"BF16_2:4", 32, 36, true, true}},
    {1010, {"W8A8", 32, 34, true, true}},
}};
// clang-format on

}  // namespace

std::optional<DTypeTraits> dtype_traits(uint32_t id) {
  if (id >= kFirstInternalDType) return std::nullopt;  // never a file's type
  for (const auto& e : kTable)
    if (e.id == id) return e.t;
  return std::nullopt;
}

const DTypeTraits& traits(DType t) {
  for (const auto& e : kTable)
    if (e.id == static_cast<uint32_t>(t)) return e.t;
  throw Error("[dtype] unknown dtype id " + std::to_string(static_cast<uint32_t>(t)));
}

std::string_view dtype_name(DType t) { return traits(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& e : kTable)
    if (e.t.name == upper && e.id < kFirstInternalDType) return static_cast<DType>(e.id);
  return std::nullopt;
}

size_t row_bytes(DType t, int64_t n) {
  const DTypeTraits& tr = traits(t);
  if (n < 0 || n % tr.block_size != 0)
    throw Error("[dtype] row of " + std::to_string(n) + " elements is not a multiple of the " +
                std::string(tr.name) + " block size " + std::to_string(tr.block_size));
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (abs < 0x38800000) {  // result is subnormal or zero
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = abs - 0x38000000;  // rebias exponent 127 -> 15
  const uint32_t lsb = (r >> 13) & 1;
  r += 0xfff + lsb;  // round to nearest even
  return static_cast<uint16_t>(sign | (r >> 13));
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace nexus
