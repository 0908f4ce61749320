// Per-ISA kernels of the sampler's copy with block maxima (picked by active_isa()).
#pragma once

#include <cstdint>

namespace nexus::cpu {

// dst[i] = src[i]; block_max[b] = the largest of src[b * 64 .. b * 64 + 63] (the last block may be
// shorter); returns false when some src[i] is NaN or +inf (the copy is made all the same). No copy
// when dst is null.
bool copy_block_max_scalar(const float* src, float* dst, int64_t n, float* block_max);
bool copy_block_max_avx2(const float* src, float* dst, int64_t n, float* block_max);

}  // namespace nexus::cpu
