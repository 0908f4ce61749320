// Flash-style attention over the KV cache against the plain reference (full score rows, doubles),
// for narrow and wide heads, GQA, sliding windows, every cache type and 1-3 threads, with
// problems large enough to take the multi-threaded path.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/quant.h"
#include "backends/cpu/attention_tile.h"
#include "ops/attention.h"

namespace nexus {
namespace {

struct Case {
  int64_t n_heads, n_kv_heads, head_dim, window;
};

TEST(AttentionParity, MatchesReferenceForAllCacheTypesAndThreads) {
  // GQA groups of 1, 2, 3 and 4; the F32/F16 decode kernel reads the cache in place for every
  // head_dim that is a multiple of 8 (qwen3's 128 included).
  const Case cases[] = {{8, 4, 8, 0},   {8, 2, 64, 0},  {4, 4, 32, 0},   {8, 4, 8, 37},
                        {4, 2, 64, 50}, {4, 2, 128, 0}, {6, 2, 16, 0},   {3, 3, 24, 20}};
  for (const Case& c : cases) {
    for (DType kv_type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      const int64_t width = c.n_kv_heads * c.head_dim;
      if (kv_type == DType::kQ8_0 && width % 32 != 0) continue;
      const int32_t n_pos = 150;  // > two 64-key tiles
      std::mt19937 rng(static_cast<uint32_t>(c.head_dim * 31 + c.window));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> k(n_pos * width), v(n_pos * width), q(n_pos * c.n_heads * c.head_dim);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      for (float& x : q) x = nd(rng);
      // The reference sees the cache's rounding: round-trip K and V through the cache type.
      std::vector<uint8_t> enc(row_bytes(kv_type, width));
      for (int32_t j = 0; j < n_pos; ++j) {
        for (float* r : {k.data() + j * width, v.data() + j * width}) {
          cpu::quantize_row(kv_type, r, enc.data(), width);
          cpu::dequantize_row(kv_type, enc.data(), r, width);
        }
      }
      const AttentionParams p{c.n_heads, c.n_kv_heads, c.head_dim, c.window,
                              1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      for (int threads : {1, 2, 3}) {
        KvCache cache(1, 2, n_pos, c.n_kv_heads, c.head_dim, kv_type);
        ASSERT_TRUE(cache.reserve(1, n_pos).is_ok());
        for (int32_t j = 0; j < n_pos; ++j) cache.store(0, 1, j, &k[j * width], &v[j * width]);
        ThreadPool pool(threads);
        std::vector<float> scratch(attention_scratch_floats(p, width) * threads);
        // All positions as one batch of queries in sequence slot 1.
        std::vector<int32_t> seq(n_pos, 1), pos(n_pos);
        for (int32_t j = 0; j < n_pos; ++j) pos[j] = j;
        const int64_t qw = c.n_heads * c.head_dim;
        std::vector<float> out(n_pos * qw), ref(qw);
        attention(q.data(), cache, 0, seq.data(), pos.data(), n_pos, p, out.data(), pool,
                  scratch.data());
        // And the last query alone (the decode shape: one token, heads split over threads).
        std::vector<float> one(qw);
        attention(q.data() + (n_pos - 1) * qw, cache, 0, seq.data(), pos.data() + n_pos - 1, 1, p,
                  one.data(), pool, scratch.data());
        // And the last five queries as one small batch (tokens split over threads).
        std::vector<float> five(5 * qw);
        attention(q.data() + (n_pos - 5) * qw, cache, 0, seq.data(), pos.data() + n_pos - 5, 5, p,
                  five.data(), pool, scratch.data());
        double max_err = 0;
        for (int32_t j = 0; j < n_pos; ++j) {
          attention_reference(q.data() + j * qw, k.data(), v.data(), j, p, ref.data());
          for (int64_t e = 0; e < qw; ++e)
            max_err = std::max(max_err, std::fabs(double(out[j * qw + e]) - ref[e]));
          if (j >= n_pos - 5) {
            for (int64_t e = 0; e < qw; ++e)
              ASSERT_NEAR(five[(j - n_pos + 5) * qw + e], ref[e], 1e-5) << j << " " << e;
          }
          if (j == n_pos - 1) {
            for (int64_t e = 0; e < qw; ++e) ASSERT_NEAR(one[e], ref[e], 1e-5) << e;
          }
        }
        EXPECT_LT(max_err, 1e-5) << "hd=" << c.head_dim << " window=" << c.window << " "
                                 << dtype_name(kv_type) << " threads=" << threads;
      }
    }
  }
}

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// The AVX2 tile step (vectorised exp) against the scalar one, at odd head sizes and tile lengths.
TEST(AttentionParity, Avx2TileStepMatchesScalar) {
  if (cpu::active_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int64_t hd : {1, 7, 8, 13, 64, 128}) {
    for (int32_t cnt : {1, 5, 8, 17, 64}) {
      const int64_t stride = hd + 3;
      std::vector<float> q(hd), k(cnt * stride), v(cnt * stride);
      for (float& x : q) x = nd(rng);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      float acc_s[128] = {}, acc_v[128] = {}, sc_s[64], sc_v[64];
      float max_s = 0.3f, max_v = 0.3f, sum_s = 1.5f, sum_v = 1.5f;  // a previous tile's state
      for (int64_t e = 0; e < hd; ++e) acc_s[e] = acc_v[e] = nd(rng);
      cpu::attn_tile_scalar({q.data(), k.data(), v.data(), stride, cnt, hd, 0.25f, sc_s, acc_s,
                             &max_s, &sum_s});
      cpu::attn_tile_avx2({q.data(), k.data(), v.data(), stride, cnt, hd, 0.25f, sc_v, acc_v,
                           &max_v, &sum_v});
      EXPECT_NEAR(max_v, max_s, 1e-5 * (1 + std::fabs(max_s)));
      EXPECT_NEAR(sum_v, sum_s, 2e-6 * sum_s) << hd << " " << cnt;
      for (int64_t e = 0; e < hd; ++e)
        EXPECT_NEAR(acc_v[e], acc_s[e], 2e-5 * (1 + std::fabs(acc_s[e]))) << hd << " " << cnt;
    }
  }
}

}  // namespace
}  // namespace nexus
