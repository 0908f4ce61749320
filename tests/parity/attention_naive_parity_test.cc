// The naive attention kernel (ladder baseline) against the flash kernel and attention_reference:
// odd sequence lengths, grouped-query heads, sliding windows, 1-3 threads and every KV type; plus
// the thread-local kernel selection that ContextOptions::attention drives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nexus/profile.h"
#include "ops/attention.h"
#include "ops/attention_naive.h"

namespace nexus {
namespace {

struct Case {
  int64_t n_heads, n_kv_heads, head_dim, window;
  int32_t len;  // cached positions of sequence 1
};

// Fills a cache (sequence 0 with 5 rows, sequence 1 with c.len) and runs one query per position of
// sequence 1 through `impl`; returns the outputs.
std::vector<float> run(const Case& c, DType kv_type, int threads, AttentionImpl impl,
                       std::vector<float>* k_f32, std::vector<float>* v_f32,
                       std::vector<float>* q_out) {
  const int64_t kvw = c.n_kv_heads * c.head_dim, qw = c.n_heads * c.head_dim;
  KvCache kv(1, 2, std::max<int32_t>(c.len, 5), c.n_kv_heads, c.head_dim, kv_type);
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(kvw), v(kvw);
  for (int s = 0; s < 2; ++s) {
    const int32_t len = s == 0 ? 5 : c.len;
    EXPECT_TRUE(kv.reserve(s, len).is_ok());
    for (int32_t p = 0; p < len; ++p) {
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      kv.store(0, s, p, k.data(), v.data());
      if (s == 1 && k_f32) {
        k_f32->insert(k_f32->end(), k.begin(), k.end());
        v_f32->insert(v_f32->end(), v.begin(), v.end());
      }
    }
    kv.set_len(s, len);
  }
  std::vector<float> q(c.len * qw), out(c.len * qw, -1.0f);
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> seq(c.len, 1), pos(c.len);
  for (int32_t p = 0; p < c.len; ++p) pos[p] = p;
  const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.window,
                           1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  ThreadPool pool(threads);
  std::vector<float> scratch(attention_scratch_floats(ap, kvw) * pool.size());
  const ScopedAttentionImpl scope(impl);
  attention(q.data(), kv, 0, seq.data(), pos.data(), c.len, ap, out.data(), pool, scratch.data());
  if (q_out) *q_out = q;
  return out;
}

class AttentionNaiveParity : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionNaiveParity, MatchesFlashAndReference) {
  const DType kv_type = GetParam();
  const Case cases[] = {{4, 4, 8, 0, 1}, {8, 4, 8, 0, 67}, {6, 2, 16, 0, 130}, {4, 1, 32, 9, 75}};
  for (const Case& c : cases) {
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE("heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) +
                   " len " + std::to_string(c.len) + " window " + std::to_string(c.window) +
                   " threads " + std::to_string(threads));
      std::vector<float> k, v, q;
      const auto flash = run(c, kv_type, threads, AttentionImpl::kFlash, &k, &v, &q);
      const auto naive = run(c, kv_type, threads, AttentionImpl::kNaive, nullptr, nullptr, nullptr);
      ASSERT_EQ(flash.size(), naive.size());
      for (size_t i = 0; i < flash.size(); ++i) ASSERT_NEAR(naive[i], flash[i], 2e-5f) << i;
      if (kv_type != DType::kF32) continue;
      // Exact f32 K/V: both against the double-precision reference.
      const int64_t qw = c.n_heads * c.head_dim;
      const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.window,
                               1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      std::vector<float> ref(qw);
      for (int32_t p = 0; p < c.len; ++p) {
        attention_reference(q.data() + p * qw, k.data(), v.data(), p, ap, ref.data());
        for (int64_t e = 0; e < qw; ++e) ASSERT_NEAR(naive[p * qw + e], ref[e], 2e-5f);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionNaiveParity,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kQ8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The profiler sees which kernel ran: the scope really switches attention() to the naive kernel.
TEST(AttentionImplScope, DispatchesToTheNaiveKernel) {
  profile::reset();
  profile::start();
  const Case c{4, 2, 16, 0, 9};
  run(c, DType::kF32, 1, AttentionImpl::kNaive, nullptr, nullptr, nullptr);
  run(c, DType::kF32, 1, AttentionImpl::kFlash, nullptr, nullptr, nullptr);
  profile::stop();
  int64_t naive = 0, flash = 0;
  for (const auto& s : profile::stats().spans) {
    if (s.name == "attention_naive") naive = s.calls;
    if (s.name == "attention") flash = s.calls;
  }
  profile::reset();
  EXPECT_EQ(naive, 1);
  EXPECT_EQ(flash, 1);
}

TEST(AttentionImplScope, DefaultsToFlashAndRestores) {
  EXPECT_EQ(current_attention_impl(), AttentionImpl::kFlash);
  {
    const ScopedAttentionImpl a(AttentionImpl::kNaive);
    EXPECT_EQ(current_attention_impl(), AttentionImpl::kNaive);
    {
      const ScopedAttentionImpl b(AttentionImpl::kFlash);
      EXPECT_EQ(current_attention_impl(), AttentionImpl::kFlash);
    }
    EXPECT_EQ(current_attention_impl(), AttentionImpl::kNaive);
  }
  EXPECT_EQ(current_attention_impl(), AttentionImpl::kFlash);
}

}  // namespace
}  // namespace nexus
