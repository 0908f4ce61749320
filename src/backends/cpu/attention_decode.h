// Single-token attention for a range of KV heads, reading the keys and values straight from the
// cache's rows (F32, F16 or Q8_0, converted in registers; no f32 copy of the tile), with the
// query heads of each group. Keys are taken in chunks of kDecodeChunk: within
// a chunk the softmax is exact (scores, max, exp, sum), chunks are joined by an online-softmax
// rescale, so a context up to kDecodeChunk keys is a single pass with no rescaling.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nexus/dtype.h"

namespace nexus::cpu {

inline constexpr int32_t kDecodeChunk = 256;

struct AttnDecode {
  const float* q;    // [(h1 - h0) * group][hd]: the query heads of KV heads h0..h1
  const uint8_t* k;  // cache row of the first visible key (position lo)
  const uint8_t* v;  // likewise for the values
  size_t row_bytes;  // bytes from one position's row to the next
  int64_t h0, h1;    // the KV heads this call computes
  int32_t cnt;       // visible keys, >= 1
  int64_t hd;        // head dim, a multiple of 8
  int64_t group;     // query heads per KV head
  float scale;
  float* scores;  // scratch: attn_decode_scratch_floats((h1 - h0) * group) floats
  float* out;     // [(h1 - h0) * group][hd]: softmax(q K^T * scale) V
  // Optional: per query head, the softmax's max score and its sum of exp(score - max), so outputs
  // over disjoint key ranges can be joined (attn_decode_join).
  float* max = nullptr;
  float* sum = nullptr;
};

inline size_t attn_decode_scratch_floats(int64_t query_heads) {
  return static_cast<size_t>(query_heads * (kDecodeChunk + 2));
}

// The floats one call's joinable result takes: its output, then its max and its sum per head.
inline size_t attn_decode_part_floats(int64_t heads, int64_t hd) {
  return static_cast<size_t>(heads * (hd + 2));
}

// Joins the results of `parts` calls over disjoint key ranges of the same `heads` query heads. Part
// i is at parts + i * stride: its out (heads * hd floats), then its max and its sum (heads floats
// each). out[h] = the parts' outputs weighted by sum_i * exp(max_i - max): one call's output over
// all the keys, up to rounding.
void attn_decode_join(const float* parts, size_t stride, int n_parts, int64_t heads, int64_t hd,
                      float* out);

// Merges a joinable result (out2, max2, sum2) over other keys into (out, max, sum), which then
// covers both key ranges: the pairwise form of attn_decode_join, for runs of a paged cache.
void attn_decode_merge(float* out, float* max, float* sum, const float* out2, const float* max2,
                       const float* sum2, int64_t heads, int64_t hd);

using AttnDecodeFn = void (*)(const AttnDecode& a);

// The kernel for a cache of type `kv_type` and heads of `hd`, or nullptr where there is none
// (no AVX2 at run time, hd not a multiple of 8, or an unsupported type): callers then use the
// tile path.
AttnDecodeFn attn_decode_kernel(DType kv_type, int64_t hd);

void attn_decode_f32_avx2(const AttnDecode& a);
void attn_decode_f16_avx2(const AttnDecode& a);
void attn_decode_q8_0_avx2(const AttnDecode& a);

}  // namespace nexus::cpu
