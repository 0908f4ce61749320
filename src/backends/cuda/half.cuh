// bf16 and fp16 encodings on the device, the CPU's bit for bit (core/dtype.cc): round to nearest
// even, fp16 overflowing to inf; a bf16 NaN is quieted by setting bit 6 and an fp16 NaN becomes
// 0x7e00 with its sign. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "nexus/dtype.h"

namespace nexus::cuda {

__device__ inline uint16_t encode_16(float f, Precision p) {
  const uint32_t x = __float_as_uint(f);
  if (p == Precision::kBF16) {
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
  }
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>(((x >> 16) & 0x8000) | 0x7e00);
  return __half_as_ushort(__float2half_rn(f));
}

__device__ inline float decode_16(uint16_t h, Precision p) {
  return p == Precision::kBF16 ? __uint_as_float(static_cast<uint32_t>(h) << 16)
                               : __half2float(__ushort_as_half(h));
}

// x rounded to p as f32 (kF32 leaves it).
__device__ inline float round_16(float x, Precision p) {
  return p == Precision::kF32 ? x : decode_16(encode_16(x, p), p);
}

}  // namespace nexus::cuda
