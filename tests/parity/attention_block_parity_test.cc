// Query-block prefill attention (attention_block.cc) against the plain reference on batches that
// cut blocks in awkward places: two sequences interleaved in runs, a prompt continuing a cache
// that already holds 37 positions, a run longer than one block, a position jump, and a block
// late in a long cache whose keys span three key tiles (the online-softmax rescaling between
// tiles), and a block across a key tile's start. F32 and F16 caches (on AVX2 hosts the in-place
// GEMM form).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/attention_block.h"
#include "backends/cpu/quant.h"
#include "ops/attention.h"

namespace nexus {
namespace {

TEST(AttentionBlockParity, MixedSequencesAndOffsetsMatchReference) {
  struct Case {
    int64_t n_heads, n_kv_heads, head_dim;
  };
  for (const Case c : {Case{8, 2, 16}, Case{6, 6, 48}, Case{4, 1, 8}}) {
    for (DType kv_type : {DType::kF32, DType::kF16}) {
      const int64_t width = c.n_kv_heads * c.head_dim;
      const int64_t qw = c.n_heads * c.head_dim;
      const int32_t n_pos = 1200;
      std::mt19937 rng(static_cast<uint32_t>(c.head_dim + 7));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      // Keys/values of both sequences, rounded through the cache type as the kernel sees them.
      std::vector<float> kv_data[2][2];
      std::vector<uint8_t> enc(row_bytes(kv_type, width));
      KvCache cache(1, 2, n_pos, c.n_kv_heads, c.head_dim, kv_type);
      for (int s = 0; s < 2; ++s) ASSERT_TRUE(cache.reserve(s, n_pos).is_ok());
      for (int s = 0; s < 2; ++s) {
        for (auto& m : kv_data[s]) {
          m.resize(n_pos * width);
          for (float& x : m) x = nd(rng);
          for (int32_t j = 0; j < n_pos; ++j) {
            cpu::quantize_row(kv_type, &m[j * width], enc.data(), width);
            cpu::dequantize_row(kv_type, enc.data(), &m[j * width], width);
          }
        }
        for (int32_t j = 0; j < n_pos; ++j)
          cache.store(0, s, j, &kv_data[s][0][j * width], &kv_data[s][1][j * width]);
      }
      // Sequence 0: positions 37..136 (100 tokens: a full block then 36); sequence 1: 0..19,
      // then 150..159 (a jump), the runs interleaved; then sequence 1 at 1100..1163 (keys 0..1163:
      // three tiles of kBlockKeyTile = 512); then sequence 0 at 480..543, a block whose first 32
      // rows see none of the second key tile.
      std::vector<int32_t> seq, pos;
      for (int32_t j = 37; j < 107; ++j) seq.push_back(0), pos.push_back(j);
      for (int32_t j = 0; j < 20; ++j) seq.push_back(1), pos.push_back(j);
      for (int32_t j = 107; j < 137; ++j) seq.push_back(0), pos.push_back(j);
      for (int32_t j = 150; j < 160; ++j) seq.push_back(1), pos.push_back(j);
      for (int32_t j = 1100; j < 1164; ++j) seq.push_back(1), pos.push_back(j);
      for (int32_t j = 480; j < 544; ++j) seq.push_back(0), pos.push_back(j);
      static_assert(cpu::kBlockKeyTile <= 512, "the last run must span several key tiles");
      const int64_t n = static_cast<int64_t>(seq.size());
      std::vector<float> q(n * qw);
      for (float& x : q) x = nd(rng);
      const AttentionParams p{c.n_heads, c.n_kv_heads, c.head_dim, 0,
                              1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> scratch(attention_scratch_floats(p, width) * threads);
        std::vector<float> out(n * qw, std::nanf("")), ref(qw);  // NaN: every output written
        cpu::attention_blocks(q.data(), cache, 0, seq.data(), pos.data(), n, p, out.data(), pool,
                              scratch.data());
        double max_err = 0;
        for (int64_t t = 0; t < n; ++t) {
          attention_reference(q.data() + t * qw, kv_data[seq[t]][0].data(),
                              kv_data[seq[t]][1].data(), pos[t], p, ref.data());
          for (int64_t e = 0; e < qw; ++e) {
            ASSERT_FALSE(std::isnan(out[t * qw + e])) << t << " " << e;
            max_err = std::max(max_err, std::fabs(double(out[t * qw + e]) - ref[e]));
          }
        }
        EXPECT_LT(max_err, 1e-5) << "hd=" << c.head_dim << " " << dtype_name(kv_type)
                                 << " threads=" << threads;
      }
    }
  }
}

}  // namespace
}  // namespace nexus
