// The register-tiled attention kernels (attention_train_tiles.h) on 8 lanes: bit-identical to the
// 16-lane build in attention_train_tiles_avx512.cc.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/attention_train_tiles.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

struct V8 {
  using vec = __m256;
  static constexpr int kW = 8;
  static constexpr int kAcc = 12;   // of the 16 registers: the rest hold operands
  static constexpr int kSlice = 2;  // vectors of dimensions per nn/tn tile (16 floats)
  static vec zero() { return _mm256_setzero_ps(); }
  static vec set1(float x) { return _mm256_set1_ps(x); }
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, vec v, int n) {
    alignas(32) static const int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                  0,  0,  0,  0,  0,  0,  0,  0};
    _mm256_maskstore_ps(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n)),
                        v);
  }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
};

}  // namespace

void attn_forward_head_tiled_avx2(float* out, float* att, const float* q, const float* k,
                                  const float* v, const AttnShape& s, int64_t b, int64_t h,
                                  float* yt) {
  tiles::forward_head<V8>(out, att, q, k, v, s, b, h, yt, softmax_causal_row_avx2);
}

void attn_backward_group_tiled_avx2(float* dq, float* dk, float* dv, const float* dout,
                                    const float* att, const float* q, const float* k,
                                    const float* v, const AttnShape& s, int64_t b, int64_t kh,
                                    float* dp, float* yt) {
  tiles::backward_group<V8>(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp, yt,
                            softmax_causal_row_backward_avx2);
}

}  // namespace nexus::cpu
