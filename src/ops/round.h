// Rounding to bf16 or fp16 (mixed precision): f32 values rounded in place or into a copy, and
// their 16-bit encodings packed and unpacked. Round to nearest even; fp16 overflows to inf, NaN
// stays NaN. With a pool the elements are split over its threads (the same result).
#pragma once

#include <cstdint>

#include "backends/api/round.h"
#include "backends/cpu/round.h"
#include "backends/cuda/kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/device.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<RoundArgs> {
  static constexpr const char* kName = "round";
  static KernelVariants<RoundArgs> cpu() { return cpu::round_kernels(); }
  static KernelVariants<RoundArgs> cuda() { return cuda::round_kernels(); }
};
template <>
struct OpKernels<RoundPackArgs> {
  static constexpr const char* kName = "round_pack";
  static KernelVariants<RoundPackArgs> cpu() { return cpu::round_pack_kernels(); }
  static KernelVariants<RoundPackArgs> cuda() { return cuda::round_pack_kernels(); }
};
template <>
struct OpKernels<UnpackArgs> {
  static constexpr const char* kName = "unpack";
  static KernelVariants<UnpackArgs> cpu() { return cpu::unpack_kernels(); }
  static KernelVariants<UnpackArgs> cuda() { return cuda::unpack_kernels(); }
};

// On a device other than the CPU the arrays live there.
// x[i] = x[i] rounded to p (kF32 leaves x alone).
void round_to(Precision p, float* x, int64_t n, ThreadPool* pool = nullptr,
              Device device = Device::cpu());
// y[i] = x[i] rounded to p, as f32 (the rounded copy of the weights a pass computes with).
void round_copy(Precision p, const float* x, float* y, int64_t n, ThreadPool* pool = nullptr,
                Device device = Device::cpu());
// Rounds x in place and writes the 16-bit encodings to h (p is kBF16 or kF16).
void round_pack(Precision p, float* x, uint16_t* h, int64_t n, ThreadPool* pool = nullptr,
                Device device = Device::cpu());
// x[i] = the value of h[i] (p is kBF16 or kF16): exact.
void unpack(Precision p, const uint16_t* h, float* x, int64_t n, ThreadPool* pool = nullptr,
            Device device = Device::cpu());

}  // namespace nexus
