// CPU kernels of the rounding ops (backends/api/round.h): the variant tables and the per-range
// kernels they split over the pool (a scalar reference and AVX2/F16C versions with the same bits).
#pragma once

#include <cstdint>

#include "backends/api/kernel.h"
#include "backends/api/round.h"

namespace nexus::cpu {

KernelVariants<RoundArgs> round_kernels();
KernelVariants<RoundPackArgs> round_pack_kernels();
KernelVariants<UnpackArgs> unpack_kernels();

void round_scalar(Precision p, const float* x, float* y, int64_t n);
void round_avx2(Precision p, const float* x, float* y, int64_t n);
void round_pack_scalar(Precision p, float* x, uint16_t* h, int64_t n);
void round_pack_avx2(Precision p, float* x, uint16_t* h, int64_t n);
void unpack_scalar(Precision p, const uint16_t* h, float* x, int64_t n);
void unpack_avx2(Precision p, const uint16_t* h, float* x, int64_t n);

}  // namespace nexus::cpu
