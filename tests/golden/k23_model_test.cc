// Models with Q2_K and Q3_K matrices end to end: a random llama whose rows fill the 256-element
// super-blocks, converted to each type, against the f32 model of its own dequantized weights:
// prefill (sgemm) and decode (the dot kernels).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/compress/gguf_convert.h"
#include "harness/random_model.h"
#include "nexus/context.h"
#include "nexus/model.h"

namespace nexus {
namespace {

std::unique_ptr<Model> converted(const GgufFile& src, DType type) {
  auto conv = convert_gguf(src, type);
  EXPECT_TRUE(conv) << conv.status().message();
  if (!conv) return nullptr;
  auto bytes = std::make_shared<std::vector<uint8_t>>(conv->serialize());
  auto parsed = GgufFile::parse(*bytes, bytes, src.path() + "-" + std::string(dtype_name(type)));
  EXPECT_TRUE(parsed) << parsed.status().message();
  if (!parsed) return nullptr;
  auto model = Model::from_gguf(std::make_shared<const GgufFile>(std::move(parsed).value()));
  EXPECT_TRUE(model) << model.status().message();
  return model ? std::move(model).value() : nullptr;
}

// Logits of every position of a 20-token prompt, in one batch or one token per call.
std::vector<float> logits(const Model& m, bool stepwise) {
  ContextOptions o;
  o.n_ctx = 32;
  o.kv_type = DType::kF32;
  o.n_threads = 2;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  std::vector<float> all, out;
  Batch b;
  for (int i = 0; i < 20; ++i) {
    b.add((i * 53 + 7) % 300, i, 0, true);
    if (!stepwise && i < 19) continue;
    EXPECT_TRUE((*ctx)->decode(b, &out).is_ok());
    all.insert(all.end(), out.begin(), out.end());
    b.clear();
  }
  return all;
}

// max |a - b| / max |b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

TEST(K23Model, MatchesTheF32ModelOfItsWeights) {
  GenModelOptions g;
  g.shape = parse_model_shape("custom:dim=256,layers=2,heads=4,ffn=512,vocab=300").value();
  const std::string path = ::testing::TempDir() + "nexus_k23_" + std::to_string(getpid()) + ".gguf";
  ASSERT_TRUE(write_random_model(g, path).is_ok());
  auto src = GgufFile::open(path);
  ASSERT_TRUE(src) << src.status().message();
  for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
    const std::string name(dtype_name(t));
    auto quant = converted(*src, t);
    ASSERT_TRUE(quant);
    EXPECT_EQ(quant->weights().layers[0].w_up.dtype(), t) << name;
    auto exact = converted(quant->gguf(), DType::kF32);
    ASSERT_TRUE(exact);
    const auto want = logits(*exact, false);
    // Prefill (20 tokens) runs sgemm on the exactly dequantized weights: f32 rounding.
    EXPECT_LT(rel_diff(logits(*quant, false), want), 1e-4) << name;
    // Decode runs the AVX2 or scalar dot kernels on 8-bit activations (Q8_K): 1.0-1.1% of the
    // largest logit here, as Q4_K's and Q6_K's kernels on the same model (1.2-1.4%).
    EXPECT_LT(rel_diff(logits(*quant, true), want), 0.03) << name;
    // And the weights are the quantized ones, not the source's: the f32 source model differs.
    auto source = Model::load(path);
    ASSERT_TRUE(source);
    EXPECT_GT(rel_diff(logits(**source, false), want), 1e-3) << name;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nexus
