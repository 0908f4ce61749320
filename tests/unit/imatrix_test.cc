// Importance matrices: collected sums against a hand computation of the first layer's attention
// input (embedding, RMSNorm, norm weight) on the demo model; the llama.cpp GGUF layout written and
// read back; read errors by name; and the weighted quantizers, whose importance-weighted error is
// below the unweighted quantizers' for every type that takes importances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/quant.h"
#include "nexus/compress/imatrix.h"
#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;

const std::string kDemo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
constexpr const char* kText =
    "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is "
    "the sun. Arise, fair sun, and kill the envious moon, who is already sick and pale with "
    "grief, that thou her maid art far more fair than she. JULIET: O Romeo, Romeo, wherefore art "
    "thou Romeo? Deny thy father and refuse thy name.";

TEST(Imatrix, SumsTheSquaredInputsOfEveryLayerMatrix) {
  auto model = Model::load(kDemo);
  ASSERT_TRUE(model) << model.status().message();
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok);
  const Model& m = **model;
  const ModelConfig& c = m.config();
  ImatrixOptions o;
  o.n_ctx = 16;
  o.dataset = "romeo";
  int64_t calls = 0;
  auto im = collect_imatrix(m, **tok, kText, o, [&](int64_t, int64_t) { ++calls; });
  ASSERT_TRUE(im) << im.status().message();
  const std::vector<int32_t> ids = (*tok)->encode(kText, false);
  const int64_t chunks = static_cast<int64_t>(ids.size()) / o.n_ctx;
  ASSERT_GE(chunks, 2);
  EXPECT_EQ(calls, chunks);
  EXPECT_EQ(im->chunk_count, chunks);
  EXPECT_EQ(im->chunk_size, 16);
  EXPECT_EQ(im->datasets, std::vector<std::string>{"romeo"});
  EXPECT_EQ(static_cast<int64_t>(im->entries.size()), 7 * c.n_layers);  // q k v o gate up down
  EXPECT_EQ(im->entries.count("output.weight") + im->entries.count("token_embd.weight"), 0u);
  for (const auto& [name, e] : im->entries) EXPECT_EQ(e.count, chunks * o.n_ctx) << name;

  // Layer 0's Q/K/V input by hand: RMSNorm of the token embeddings times attn_norm.
  const Tensor& emb = m.weights().tok_embd;
  const Tensor& norm = m.weights().layers[0].attn_norm;
  ASSERT_EQ(emb.dtype(), DType::kF32);
  std::vector<double> want(static_cast<size_t>(c.dim), 0.0);
  for (int64_t ch = 0; ch < chunks; ++ch)
    for (int64_t i = 0; i < o.n_ctx; ++i) {
      const int32_t id = i == 0 ? (*tok)->bos_id() : ids[static_cast<size_t>(ch * o.n_ctx + i)];
      const float* e = static_cast<const float*>(emb.data()) + id * c.dim;
      double ss = 0.0;
      for (int64_t d = 0; d < c.dim; ++d) ss += static_cast<double>(e[d]) * e[d];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.dim) + c.norm_eps);
      for (int64_t d = 0; d < c.dim; ++d) {
        const double v = e[d] * inv * static_cast<const float*>(norm.data())[d];
        want[static_cast<size_t>(d)] += v * v;
      }
    }
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    const ImatrixEntry& e = im->entries.at(w);
    ASSERT_EQ(static_cast<int64_t>(e.sum2.size()), c.dim);
    for (int64_t d = 0; d < c.dim; ++d)
      ASSERT_NEAR(e.sum2[d], want[d], 1e-4 * want[d] + 1e-6) << w << " column " << d;
  }
  EXPECT_EQ(im->entries.at("blk.2.ffn_gate.weight").sum2, im->entries.at("blk.2.ffn_up.weight").sum2);
  EXPECT_EQ(im->entries.at("blk.1.ffn_down.weight").sum2.size(), static_cast<size_t>(c.ffn_dim));
  const std::vector<float> imp = im->importance("blk.0.attn_q.weight");
  EXPECT_NEAR(imp[3], want[3] / static_cast<double>(chunks * o.n_ctx), 1e-4 * imp[3]);
  EXPECT_TRUE(im->importance("nope").empty());

  // Written as llama-imatrix writes it, and read back the same.
  const std::string path = ::testing::TempDir() + "nexus_imatrix_" + std::to_string(getpid());
  ASSERT_TRUE(write_imatrix(*im, path).is_ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->get_string("general.type"), "imatrix");
  EXPECT_EQ(file->get_int("imatrix.chunk_count"), chunks);
  EXPECT_EQ(file->get_int("imatrix.chunk_size"), 16);
  const GgufTensorInfo* s2 = file->find_tensor("blk.0.attn_q.weight.in_sum2");
  const GgufTensorInfo* cnt = file->find_tensor("blk.0.attn_q.weight.counts");
  ASSERT_TRUE(s2 && cnt);
  EXPECT_EQ(s2->shape, (std::vector<int64_t>{1, c.dim}));  // GGUF ne = {dim, 1}
  EXPECT_EQ(cnt->shape, (std::vector<int64_t>{1, 1}));
  auto back = read_imatrix(path);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->entries.size(), im->entries.size());
  EXPECT_EQ(back->entries.at("blk.3.attn_output.weight").sum2,
            im->entries.at("blk.3.attn_output.weight").sum2);
  EXPECT_EQ(back->entries.at("blk.3.attn_output.weight").count, chunks * o.n_ctx);
  fs::remove(path);

  ImatrixOptions big = o;
  big.n_ctx = 4096;
  auto none = collect_imatrix(m, **tok, kText, big, nullptr);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("fewer than one chunk"), std::string::npos);
}

TEST(Imatrix, ReadErrorsNameTheProblem) {
  const std::string dir = ::testing::TempDir();
  auto model = read_imatrix(kDemo);
  ASSERT_FALSE(model);
  EXPECT_NE(model.status().message().find("not an imatrix file"), std::string::npos);
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  const float sums[4] = {1, 2, 3, 4};
  w.add_tensor("blk.0.attn_q.weight.in_sum2", DType::kF32, {1, 4}, sums);
  const std::string lone = dir + "nexus_imatrix_lone_" + std::to_string(getpid());
  ASSERT_TRUE(w.write(lone).is_ok());
  auto r = read_imatrix(lone);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("has no blk.0.attn_q.weight.counts"), std::string::npos)
      << r.status().message();
  fs::remove(lone);
  EXPECT_FALSE(read_imatrix(dir + "does-not-exist.gguf"));
}

// Rows whose columns matter unequally (a few columns 30x the importance): the weighted quantizer
// must give a lower importance-weighted squared error than the plain one, summed over the rows.
TEST(Imatrix, WeightedQuantizersLowerTheWeightedError) {
  constexpr int64_t n = 512, rows = 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> qw(n);
  for (float& v : qw) v = u(rng) < 0.1f ? 30.0f : 0.2f + u(rng);
  std::vector<float> x(n * rows);
  for (float& v : x) v = d(rng);
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K,
                  DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    ASSERT_TRUE(cpu::takes_importance(t));
    std::vector<uint8_t> q(row_bytes(t, n));
    std::vector<float> back(n);
    double plain = 0.0, weighted = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * n;
      cpu::quantize_row(t, row, q.data(), n);
      cpu::dequantize_row(t, q.data(), back.data(), n);
      for (int64_t i = 0; i < n; ++i) plain += qw[i] * std::pow(back[i] - row[i], 2.0);
      cpu::quantize_row_imp(t, row, q.data(), n, qw.data());
      cpu::dequantize_row(t, q.data(), back.data(), n);
      for (int64_t i = 0; i < n; ++i) weighted += qw[i] * std::pow(back[i] - row[i], 2.0);
    }
    std::printf("  %-5s weighted error %.4g with importances, %.4g without (%.2fx)\n",
                std::string(dtype_name(t)).c_str(), weighted, plain, plain / weighted);
    EXPECT_LT(weighted, 0.97 * plain) << dtype_name(t);
  }
  EXPECT_FALSE(cpu::takes_importance(DType::kQ8_0));
}

}  // namespace
}  // namespace nexus
