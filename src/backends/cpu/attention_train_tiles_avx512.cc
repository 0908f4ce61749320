// The register-tiled attention kernels (attention_train_tiles.h) on 16 lanes: bit-identical to the
// 8-lane build in attention_train_tiles_avx2.cc. Called only when cpu::avx512_active(). Like every
// AVX-512 file (docs/KERNELS.md) it includes no AVX2 helper header and instantiates no library
// template.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/attention_train_tiles.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

struct V16 {
  using vec = __m512;
  static constexpr int kW = 16;
  static constexpr int kAcc = 24;   // of the 32 registers: the rest hold operands
  static constexpr int kSlice = 4;  // vectors of dimensions per nn/tn tile (64 floats)
  static vec zero() { return _mm512_setzero_ps(); }
  static vec set1(float x) { return _mm512_set1_ps(x); }
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, vec v, int n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
  }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
};

}  // namespace

void attn_forward_head_tiled_avx512(float* out, float* att, const float* q, const float* k,
                                    const float* v, const AttnShape& s, int64_t b, int64_t h,
                                    float* yt) {
  tiles::forward_head<V16>(out, att, q, k, v, s, b, h, yt, softmax_causal_row_avx512);
}

void attn_backward_group_tiled_avx512(float* dq, float* dk, float* dv, const float* dout,
                                      const float* att, const float* q, const float* k,
                                      const float* v, const AttnShape& s, int64_t b, int64_t kh,
                                      float* dp, float* yt) {
  tiles::backward_group<V16>(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp, yt,
                             softmax_causal_row_backward_avx2);
}

}  // namespace nexus::cpu
