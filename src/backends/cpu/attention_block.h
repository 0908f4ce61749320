// Prefill attention by query blocks: consecutive tokens of one sequence share every K/V tile, so
// a tile is converted to f32 once per block of up to kQueryBlock tokens (not once per token), and
// the score and value products become small GEMMs (OpenBLAS sgemm) around an online softmax. On
// AVX2 hosts with an F32 or F16 cache the GEMMs are ours and read the cache in place (nothing
// converted first), one pair per tile for a GQA group's heads stacked.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/core/thread_pool.h"
#include "backends/cpu/attention.h"
#include "backends/cpu/kv_cache.h"

namespace nexus::cpu {

inline constexpr int64_t kQueryBlock = 64;      // query tokens per block
inline constexpr int32_t kBlockKeyTile = 512;   // keys per tile (64: L15M pp512 9% slower)
inline constexpr int64_t kBlockMinTokens = 16;  // batches smaller than this use per-token tiles

// Floats of per-thread scratch attention_blocks() needs.
size_t attention_block_scratch_floats(const AttentionParams& p, int64_t kv_row_width);

// Same contract as attention() for full causal attention (p.window == 0). Tokens are cut into
// blocks of consecutive positions of one sequence (a new block wherever seq or pos jumps).
void attention_blocks(const float* q, const KvCache& kv, int64_t layer, const int32_t* seq,
                      const int32_t* pos, int64_t n, const AttentionParams& p, float* out,
                      ThreadPool& pool, float* scratch);

}  // namespace nexus::cpu
