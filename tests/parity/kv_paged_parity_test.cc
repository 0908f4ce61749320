// The paged KV cache: block accounting (reserve, clear, share_prefix with copy on write, a full
// pool), and attention over blocks scattered through the pool against the same data in one
// contiguous run, for every kernel path (decode over runs, keys split over threads, tiles with a
// window, query blocks, naive) and cache type.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/kv_cache.h"
#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "ops/attention.h"
#include "ops/attention_naive.h"

namespace nexus {
namespace {

KvCacheLayout small_layout(int64_t block, int64_t blocks, int n_seq = 3) {
  KvCacheLayout l;
  l.n_layers = 2;
  l.n_seq = n_seq;
  l.n_ctx = 100;
  l.n_kv_heads = 1;
  l.head_dim = 32;
  l.type = DType::kF32;
  l.block_size = block;
  l.n_blocks = blocks;
  return l;
}

std::vector<float> row_of(float x) { return std::vector<float>(32, x); }

float first_k(const KvCache& kv, int64_t layer, int seq, int32_t pos) {
  float out[32], tmp[32];
  kv.load_k(layer, seq, pos, 1, 0, out, tmp);
  return out[0];
}

TEST(KvPaged, BlocksAreTakenAsSequencesGrowAndGivenBack) {
  KvCache kv(small_layout(16, 6));
  EXPECT_EQ(kv.block_size(), 16);
  EXPECT_EQ(kv.free_blocks(), 6);
  ASSERT_TRUE(kv.reserve(0, 20).is_ok());  // two blocks
  ASSERT_TRUE(kv.reserve(1, 5).is_ok());   // one
  ASSERT_TRUE(kv.reserve(0, 40).is_ok());  // a third for sequence 0, after sequence 1's
  EXPECT_EQ(kv.free_blocks(), 2);
  EXPECT_EQ(std::vector<int32_t>(kv.block_table(0).begin(), kv.block_table(0).end()),
            (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(kv.run_end(0, 3), 32);   // blocks 0 and 1 are one run
  EXPECT_EQ(kv.run_end(0, 33), 48);  // block 3 stands alone
  // Too many blocks: an error naming the pool, and nothing taken.
  const Status full = kv.reserve(2, 50);
  ASSERT_FALSE(full);
  EXPECT_NE(full.message().find("KV cache full"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("4 of 6 blocks of 16 positions"), std::string::npos);
  EXPECT_EQ(kv.free_blocks(), 2);
  EXPECT_FALSE(kv.reserve(2, 101));  // past n_ctx
  // Clearing gives back the blocks past the kept positions; the lowest free block goes first.
  kv.clear(0, 17);
  EXPECT_EQ(kv.block_table(0).size(), 2u);
  EXPECT_EQ(kv.free_blocks(), 3);
  kv.clear(0);
  EXPECT_EQ(kv.free_blocks(), 5);
  ASSERT_TRUE(kv.reserve(2, 16).is_ok());
  EXPECT_EQ(kv.block_table(2)[0], 0);
}

TEST(KvPaged, SharedPrefixIsStoredOnceAndCopiedOnWrite) {
  KvCache kv(small_layout(16, 6));
  ASSERT_TRUE(kv.reserve(0, 40).is_ok());
  for (int32_t p = 0; p < 40; ++p)
    for (int64_t l = 0; l < 2; ++l) {
      const std::vector<float> k = row_of(100.0f * l + p), v = row_of(-p);
      kv.store(l, 0, p, k.data(), v.data());
    }
  kv.set_len(0, 40);
  ASSERT_TRUE(kv.share_prefix(0, 1, 37).is_ok());  // two full blocks shared, 5 positions copied
  EXPECT_EQ(kv.len(1), 37);
  EXPECT_EQ(kv.block_table(1)[0], kv.block_table(0)[0]);
  EXPECT_EQ(kv.block_table(1)[1], kv.block_table(0)[1]);
  EXPECT_NE(kv.block_table(1)[2], kv.block_table(0)[2]);
  EXPECT_EQ(kv.block_refs(kv.block_table(0)[0]), 2);
  EXPECT_EQ(kv.free_blocks(), 2);
  for (int32_t p : {0, 15, 16, 31, 32, 36}) EXPECT_EQ(first_k(kv, 1, 1, p), 100.0f + p) << p;
  EXPECT_FALSE(kv.share_prefix(0, 1, 10));  // sequence 1 is not empty
  EXPECT_FALSE(kv.share_prefix(1, 2, 38));  // sequence 1 holds 37
  // Writing into a shared block is refused until reserve copies it.
  kv.clear(1, 20);
  EXPECT_THROW(kv.store(0, 1, 20, row_of(7).data(), row_of(7).data()), Error);
  ASSERT_TRUE(kv.reserve(1, 21).is_ok());
  EXPECT_NE(kv.block_table(1)[1], kv.block_table(0)[1]);
  kv.store(0, 1, 20, row_of(7).data(), row_of(7).data());
  EXPECT_EQ(first_k(kv, 0, 1, 20), 7.0f);
  EXPECT_EQ(first_k(kv, 0, 0, 20), 20.0f);  // the other sequence's copy is untouched
  EXPECT_EQ(first_k(kv, 0, 1, 19), 19.0f);  // the copy holds the block's earlier rows
  EXPECT_EQ(kv.block_refs(kv.block_table(0)[1]), 1);
}

// Attention of every path over a cache whose blocks are scattered (block 16, sequences grown in
// turns) against one cache with a single run, same data; within 1e-5 (the runs are merged).
TEST(KvPaged, AttentionOverScatteredBlocksMatchesOneRun) {
  struct Case {
    int64_t n_heads, n_kv_heads, head_dim, window;
    int32_t len;
    int n;  // query tokens at the end of the sequence
  } cases[] = {
      {4, 2, 32, 0, 300, 1},   // decode: runs merged; split over threads from 256 keys
      {4, 2, 32, 40, 200, 1},  // decode with a window starting mid-block
      {4, 4, 16, 0, 200, 3},   // narrow heads: whole-row tiles
      {4, 2, 64, 0, 130, 40},  // query blocks (prefill path)
      {2, 1, 8, 24, 90, 20},   // window, tile path over several tokens
  };
  for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    for (const Case& c : cases) {
      const int64_t width = c.n_kv_heads * c.head_dim, qw = c.n_heads * c.head_dim;
      if (type == DType::kQ8_0 && width % 32 != 0) continue;
      std::mt19937 rng(static_cast<uint32_t>(c.len * 7 + c.head_dim));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> k(c.len * width), v(c.len * width), q(c.n * qw);
      for (float& x : k) x = nd(rng);
      for (float& x : v) x = nd(rng);
      for (float& x : q) x = nd(rng);
      KvCacheLayout lay;
      lay.n_layers = 1;
      lay.n_seq = 2;
      lay.n_ctx = c.len;
      lay.n_kv_heads = c.n_kv_heads;
      lay.head_dim = c.head_dim;
      lay.type = type;
      KvCache one(lay);
      lay.block_size = 16;
      KvCache paged(lay);
      ASSERT_TRUE(one.reserve(1, c.len).is_ok());
      // Sequence 1 grows 16 positions at a time, sequence 0 takes a block between each two.
      for (int32_t p = 16; p < c.len + 16; p += 16) {
        ASSERT_TRUE(paged.reserve(1, std::min(p, c.len)).is_ok());
        if (p < c.len) {
          ASSERT_TRUE(paged.reserve(0, p).is_ok());
        }
      }
      ASSERT_LT(paged.run_end(1, 0), c.len);
      for (int32_t j = 0; j < c.len; ++j) {
        one.store(0, 1, j, &k[j * width], &v[j * width]);
        paged.store(0, 1, j, &k[j * width], &v[j * width]);
      }
      one.set_len(1, c.len);
      paged.set_len(1, c.len);
      const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.window,
                               1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      std::vector<int32_t> seq(c.n, 1), pos(c.n);
      for (int i = 0; i < c.n; ++i) pos[i] = c.len - c.n + i;
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> scratch(attention_scratch_floats(ap, width) * threads);
        for (AttentionImpl impl : {AttentionImpl::kFlash, AttentionImpl::kNaive}) {
          const ScopedAttentionImpl scope(impl);
          std::vector<float> a(c.n * qw), b(c.n * qw);
          attention(q.data(), one, 0, seq.data(), pos.data(), c.n, ap, a.data(), pool,
                    scratch.data());
          attention(q.data(), paged, 0, seq.data(), pos.data(), c.n, ap, b.data(), pool,
                    scratch.data());
          for (size_t i = 0; i < a.size(); ++i)
            ASSERT_NEAR(a[i], b[i], 1e-5) << dtype_name(type) << " len " << c.len << " n " << c.n
                                          << " threads " << threads << " i " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nexus
