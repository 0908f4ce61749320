// The single-token attention kernels that read the KV cache rows directly (attention_decode.h)
// against the plain double reference: every cache type, head dims 8/48/64/128, GQA groups 1-4,
// context lengths around the 8-key score blocks and the kDecodeChunk chunks, sliding windows,
// peaked softmaxes (scores rescaled across chunks), small batches, 1-4 threads, and one token's
// keys split over threads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/attention_decode.h"
#include "backends/cpu/quant.h"
#include "ops/attention.h"

namespace nexus {
namespace {

struct Shape {
  int64_t n_heads, n_kv_heads, head_dim;
};

// K and V of `len` positions in sequence slot 1 of a fresh cache, and the same values rounded
// through the cache type (what the reference must see).
struct Filled {
  std::vector<float> k, v;
};

Filled fill(KvCache& cache, int32_t len, int64_t width, DType type, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Filled f{std::vector<float>(len * width), std::vector<float>(len * width)};
  for (float& x : f.k) x = nd(rng);
  for (float& x : f.v) x = nd(rng);
  std::vector<uint8_t> enc(row_bytes(type, width));
  EXPECT_TRUE(cache.reserve(1, len).is_ok());
  for (int32_t j = 0; j < len; ++j) {
    cache.store(0, 1, j, &f.k[j * width], &f.v[j * width]);
    for (float* r : {&f.k[j * width], &f.v[j * width]}) {
      cpu::quantize_row(type, r, enc.data(), width);
      cpu::dequantize_row(type, enc.data(), r, width);
    }
  }
  return f;
}

double max_err_vs_reference(const Shape& s, DType type, int32_t len, int64_t window, float q_gain,
                            int threads, int n_tokens) {
  const int64_t width = s.n_kv_heads * s.head_dim, qw = s.n_heads * s.head_dim;
  std::mt19937 rng(static_cast<uint32_t>(len * 131 + s.head_dim * 7 + s.n_heads));
  KvCache cache(1, 2, len, s.n_kv_heads, s.head_dim, type);
  const Filled f = fill(cache, len, width, type, rng);
  std::normal_distribution<float> nd(0.0f, q_gain);
  std::vector<float> q(n_tokens * qw), out(n_tokens * qw), ref(qw);
  for (float& x : q) x = nd(rng);
  const AttentionParams p{s.n_heads, s.n_kv_heads, s.head_dim, window,
                          1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  // The last n_tokens positions as one batch (smaller than the prefill block threshold).
  std::vector<int32_t> seq(n_tokens, 1), pos(n_tokens);
  for (int i = 0; i < n_tokens; ++i) pos[i] = len - n_tokens + i;
  ThreadPool pool(threads);
  std::vector<float> scratch(attention_scratch_floats(p, width) * threads);
  attention(q.data(), cache, 0, seq.data(), pos.data(), n_tokens, p, out.data(), pool,
            scratch.data());
  double err = 0;
  for (int i = 0; i < n_tokens; ++i) {
    attention_reference(q.data() + i * qw, f.k.data(), f.v.data(), pos[i], p, ref.data());
    for (int64_t e = 0; e < qw; ++e)
      err = std::max(err, std::fabs(double(out[i * qw + e]) - ref[e]));
  }
  return err;
}

TEST(AttentionDecodeParity, KernelExistsForEveryCacheTypeOnAvx2) {
  if (cpu::active_isa() != cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0})
    for (int64_t hd : {8, 48, 64, 128}) EXPECT_NE(cpu::attn_decode_kernel(t, hd), nullptr);
  EXPECT_EQ(cpu::attn_decode_kernel(DType::kF16, 12), nullptr);  // not a multiple of 8
  EXPECT_EQ(cpu::attn_decode_kernel(DType::kQ4_0, 64), nullptr);
}

TEST(AttentionDecodeParity, OneTokenMatchesReference) {
  const Shape shapes[] = {{8, 4, 8}, {6, 6, 48}, {4, 4, 64}, {4, 2, 128}, {8, 2, 64}, {6, 2, 48}};
  for (const Shape& s : shapes) {
    for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      if (type == DType::kQ8_0 && (s.n_kv_heads * s.head_dim) % 32 != 0) continue;
      for (int32_t len : {1, 7, 8, 9, 64, 255, 256, 257, 600}) {
        const double err = max_err_vs_reference(s, type, len, 0, 1.0f, 1, 1);
        EXPECT_LT(err, 1e-5) << s.n_heads << "/" << s.n_kv_heads << "x" << s.head_dim << " "
                             << dtype_name(type) << " len=" << len;
      }
    }
  }
}

TEST(AttentionDecodeParity, PeakedScoresWindowsBatchesAndThreads) {
  const Shape shapes[] = {{8, 4, 8}, {4, 2, 128}, {12, 12, 64}};
  for (const Shape& s : shapes) {
    for (DType type : {DType::kF16, DType::kQ8_0}) {
      // A large query gain makes the softmax peaked, so chunk maxima differ widely and the
      // cross-chunk rescale matters.
      for (float gain : {1.0f, 6.0f}) {
        for (int64_t window : {0, 5, 100, 300}) {
          for (int threads : {1, 2, 3}) {
            for (int n_tokens : {1, 3}) {
              const double err =
                  max_err_vs_reference(s, type, 530, window, gain, threads, n_tokens);
              EXPECT_LT(err, 1e-5) << s.n_heads << "/" << s.n_kv_heads << "x" << s.head_dim << " "
                                   << dtype_name(type) << " gain=" << gain << " window=" << window
                                   << " threads=" << threads << " n=" << n_tokens;
            }
          }
        }
      }
    }
  }
}

// One token over 256 keys or more on several threads: each thread takes every head over its share
// of the keys and the shares are joined (attn_decode_join). Peaked softmaxes put the shares' maxima
// far apart, so a join that ignored them would fail; windows move the first key off 0.
TEST(AttentionDecodeParity, KeysSplitOverThreadsMatchReference) {
  const Shape shapes[] = {{4, 2, 128}, {6, 6, 48}, {8, 4, 8}};
  for (const Shape& s : shapes) {
    for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      if (type == DType::kQ8_0 && (s.n_kv_heads * s.head_dim) % 32 != 0) continue;
      for (float gain : {1.0f, 8.0f}) {
        for (int32_t len : {255, 256, 257, 700, 1100}) {
          for (int64_t window : {0, 256, 600}) {
            for (int threads : {2, 3, 4}) {
              const double err = max_err_vs_reference(s, type, len, window, gain, threads, 1);
              EXPECT_LT(err, 1e-5) << s.n_heads << "/" << s.n_kv_heads << "x" << s.head_dim << " "
                                   << dtype_name(type) << " gain=" << gain << " len=" << len
                                   << " window=" << window << " threads=" << threads;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nexus
