// TrainModel plumbing: export to GGUF and reload through the inference path (same logits), import
// of F16 weights, random init, config validation, and the optimizer's clipping and LR schedules.
#include "nexus/train/train_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "backends/cpu/quant.h"
#include "nexus/io/gguf.h"
#include "nexus/context.h"
#include "test_paths.h"
#include "nexus/train/optimizer.h"

namespace nexus::train {
namespace {

std::string fixture(const std::string& name) { return test::fixtures_dir() + "/train/" + name; }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::testing::UnitTest::GetInstance()->random_seed())))
      .string();
}

// Max |a - b| over the first n values, and max |b|.
std::pair<double, double> max_diff(const float* a, const float* b, size_t n) {
  double err = 0.0, mag = 0.0;
  for (size_t i = 0; i < n; ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return {err, mag};
}

TEST(TrainModel, RealCheckpointMatchesTheInferencePath) {
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  const std::string path = test::shared_path("models/stories260K.gguf");
  const int64_t t = 24;
  auto m = TrainModel::from_gguf(path, 1, t);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  std::vector<int32_t> tokens(t), targets(t);
  for (int64_t i = 0; i < t; ++i) {
    tokens[i] = static_cast<int32_t>(1 + (i * 37) % 500);
    targets[i] = static_cast<int32_t>(1 + ((i + 1) * 37) % 500);
  }
  m.value()->forward(tokens, targets, 1, t);
  auto model = Model::load(path);
  ASSERT_TRUE(model.is_ok());
  ContextOptions co;
  co.kv_type = DType::kF32;
  auto ctx = Context::create(*model.value(), co);
  ASSERT_TRUE(ctx.is_ok());
  Batch batch;
  for (int64_t p = 0; p < t; ++p) batch.add(tokens[p], static_cast<int32_t>(p), 0, true);
  std::vector<float> got;
  ASSERT_TRUE(ctx.value()->decode(batch, &got).is_ok());
  const std::vector<float> logits = m.value()->logits();
  ASSERT_EQ(logits.size(), got.size());
  const auto [err, mag] = max_diff(got.data(), logits.data(), got.size());
  std::printf("stories260K: training vs inference logits differ by %.3g (max |logit| %.2f)\n", err,
              mag);
  EXPECT_LE(err, 1e-4 * std::max(1.0, mag));
}

// Trains the fixture `name` a few steps, exports it and checks that the inference path computes
// the training forward's logits from the export.
void check_export_round_trip(const std::string& name, const TrainOptions& opts) {
  const int64_t b = 2, t = 11;
  auto m = TrainModel::from_gguf(fixture(name + ".gguf"), b, t, opts);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  TrainModel& model = **m;
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (int64_t i = 0; i < b * t; ++i) {
    tokens[i] = static_cast<int32_t>((i * 7 + 3) % model.config().n_vocab);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % model.config().n_vocab);
  }
  // A few optimizer steps so the exported weights are not the imported ones.
  AdamW opt(model, {});
  for (int s = 0; s < 3; ++s) {
    model.zero_grad();
    model.forward(tokens, targets, b, t);
    model.backward();
    opt.step(model.params(), model.grads(), 1e-2f);
  }
  model.forward(tokens, targets, b, t);
  const int64_t v = model.config().n_vocab;
  const std::vector<float> want = model.logits();
  ASSERT_EQ(static_cast<int64_t>(want.size()), b * t * v);

  auto src = GgufFile::open(fixture(name + ".gguf"));
  ASSERT_TRUE(src.is_ok());
  const std::string path = temp_path("nexus_train_export_" + name + ".gguf");
  ASSERT_TRUE(model.export_gguf(path, &src.value()).is_ok());
  auto loaded = Model::load(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded.value()->config().arch, model.config().arch);
  EXPECT_EQ(loaded.value()->config().tied_output, model.config().tied_output);
  EXPECT_NE(loaded.value()->gguf().get_string_array("tokenizer.ggml.tokens"), nullptr);
  ContextOptions co;
  co.n_seq = static_cast<int>(b);
  co.kv_type = DType::kF32;
  auto ctx = Context::create(*loaded.value(), co);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().message();
  Batch batch;
  for (int64_t s = 0; s < b; ++s)
    for (int64_t p = 0; p < t; ++p)
      batch.add(tokens[s * t + p], static_cast<int32_t>(p), static_cast<int32_t>(s), true);
  std::vector<float> got;
  ASSERT_TRUE(ctx.value()->decode(batch, &got).is_ok());
  ASSERT_EQ(got.size(), want.size());
  double max_err = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_err = std::max(max_err, std::abs(static_cast<double>(got[i]) - want[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(want[i])));
  }
  std::printf("[%s] export round trip: max logit difference %.3g (max |logit| %.3f)\n",
              name.c_str(), max_err, max_abs);
  EXPECT_LE(max_err, 1e-4 * std::max(1.0, max_abs));
  std::filesystem::remove(path);
}

TEST(TrainModel, ExportedGgufRunsWithTheSameLogits) { check_export_round_trip("llama_untied", {}); }

TEST(TrainModel, ExportedGpt2RunsWithTheSameLogits) {
  check_export_round_trip("gpt2_tied", {.recompute_blocks = true});
}

TEST(TrainModel, ImportsF16WeightsAndRoundTripsTiedModels) {
  // Rewrite the tied fixture with F16 matrices; the import must give the f16-rounded values.
  auto src = GgufFile::open(fixture("llama_tied.gguf"));
  ASSERT_TRUE(src.is_ok());
  GgufWriter w;
  w.copy_metadata(src.value());
  std::vector<uint8_t> buf;
  for (const GgufTensorInfo& info : src.value().tensors()) {
    if (info.shape.size() < 2) {
      w.add_tensor(info.name, DType::kF32, info.shape, info.data);
      continue;
    }
    int64_t numel = 1;
    for (int64_t d : info.shape) numel *= d;
    buf.resize(numel * 2);
    cpu::quantize_row(DType::kF16, reinterpret_cast<const float*>(info.data), buf.data(), numel);
    w.add_tensor(info.name, DType::kF16, info.shape, buf.data());
  }
  const std::string path = temp_path("nexus_train_f16.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  auto m = TrainModel::from_gguf(path, 1, 4);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_TRUE(m.value()->config().tied_output);
  const GgufTensorInfo* q = src.value().find_tensor("blk.1.attn_q.weight");
  const float* got = m.value()->param("blk.1.attn_q.weight").data_as<const float>();
  const float* orig = reinterpret_cast<const float*>(q->data);
  for (int64_t i = 0; i < 32; ++i) {
    EXPECT_NEAR(got[i], orig[i], 1e-3 * std::abs(orig[i]) + 1e-6);
  }
  EXPECT_EQ(m.value()->tensors().back().name, "output_norm.weight");  // no output.weight
  std::filesystem::remove(path);
}

ModelConfig tiny_config() {
  ModelConfig c;
  c.n_vocab = 50;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  c.rope_dim = 4;
  c.ffn_dim = 24;
  c.n_ctx_train = 32;
  c.tied_output = true;
  return c;
}

TEST(TrainModel, RandomInitAndValidation) {
  auto m = TrainModel::create(tiny_config(), 2, 8, {0.02f, 7, true});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const Tensor norm = m.value()->param("blk.0.ffn_norm.weight");
  EXPECT_EQ(norm.data_as<float>()[3], 1.0f);
  auto std_of = [&](const std::string& name) {
    const Tensor t = m.value()->param(name);
    double ss = 0.0;
    for (int64_t i = 0; i < t.numel(); ++i) ss += std::pow(t.data_as<float>()[i], 2);
    return std::sqrt(ss / t.numel());
  };
  EXPECT_NEAR(std_of("token_embd.weight"), 0.02, 0.002);
  EXPECT_NEAR(std_of("blk.1.ffn_down.weight"), 0.01, 0.0015);  // 0.02 / sqrt(2 * 2 layers)
  size_t total = 0;
  for (const ParamInfo& info : m.value()->tensors()) total += info.numel;
  EXPECT_EQ(total, m.value()->params().size());

  ModelConfig bad = tiny_config();
  bad.n_kv_heads = 3;
  auto r = TrainModel::create(bad, 1, 4);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("kv_heads"), std::string::npos) << r.status().message();
  std::vector<int32_t> tok(9, 1);
  EXPECT_THROW(m.value()->forward(tok, tok, 1, 9), Error);  // longer than the arena's seq 8
  tok.resize(8);
  tok[3] = 50;
  EXPECT_THROW(m.value()->forward(tok, tok, 1, 8), Error);  // token id out of range
  EXPECT_THROW(m.value()->backward(), Error);               // no successful forward yet
}

TEST(TrainModel, Gpt2RandomInitAndValidation) {
  ModelConfig c = tiny_config();
  c.arch = Arch::kGpt2;
  c.n_kv_heads = 4;
  c.rope = RopeStyle::kNormal;  // ignored: gpt2 has learned positions
  auto m = TrainModel::create(c, 2, 8);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m.value()->param("position_embd.weight").shape(), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(m.value()->param("blk.1.attn_qkv.weight").shape(), (std::vector<int64_t>{48, 16}));
  EXPECT_EQ(m.value()->param("blk.0.ffn_up.bias").data_as<float>()[5], 0.0f);
  EXPECT_EQ(m.value()->param("output_norm.weight").data_as<float>()[5], 1.0f);
  EXPECT_NE(m.value()->param("position_embd.weight").data_as<float>()[5], 0.0f);
  std::vector<int32_t> tok(16, 3);
  EXPECT_GT(m.value()->forward(tok, tok, 2, 8), 0.0f);
  // A new model exports as a gpt2 file with its whole position table.
  const std::string path = temp_path("nexus_train_gpt2_new.gguf");
  ASSERT_TRUE(m.value()->export_gguf(path).is_ok());
  auto loaded = Model::load(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  EXPECT_EQ(loaded.value()->config().arch, Arch::kGpt2);
  EXPECT_EQ(loaded.value()->config().n_ctx_train, 32);
  EXPECT_EQ(loaded.value()->config().norm_eps, c.norm_eps);
  std::filesystem::remove(path);

  ModelConfig short_ctx = c;
  short_ctx.n_ctx_train = 6;
  auto r = TrainModel::create(short_ctx, 1, 8);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("position table"), std::string::npos) << r.status().message();
  // qwen2 and qwen3 train with their own RoPE style only, in f32 and mixed precision.
  ModelConfig qwen = tiny_config();
  qwen.arch = Arch::kQwen2;
  r = TrainModel::create(qwen, 1, 8);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("qwen2 uses NeoX"), std::string::npos)
      << r.status().message();
  qwen.rope = RopeStyle::kNeox;
  EXPECT_TRUE(TrainModel::create(qwen, 1, 8).is_ok());
  qwen.arch = Arch::kQwen3;
  qwen.arch_name = "qwen3";
  EXPECT_TRUE(TrainModel::create(qwen, 1, 8).is_ok());
  TrainOptions bf16;
  bf16.precision = Precision::kBF16;
  EXPECT_TRUE(TrainModel::create(qwen, 1, 8, {}, bf16).is_ok());
}

TEST(Optimizer, ClipAndSchedules) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_FLOAT_EQ(clip_grad_norm(g, 1.0f), 5.0f);
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
  std::vector<float> small = {0.3f, 0.4f};
  clip_grad_norm(small, 1.0f);
  EXPECT_EQ(small[0], 0.3f);  // below the limit: untouched

  LrSchedule s{1.0f, 0.1f, 10, 110, LrDecay::kCosine};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);
  EXPECT_NEAR(s.at(60), 0.55f, 1e-6);
  EXPECT_NEAR(s.at(110), 0.1f, 1e-6);
  s.decay = LrDecay::kLinear;
  EXPECT_NEAR(s.at(35), 0.775f, 1e-6);
  s.decay = LrDecay::kConstant;
  EXPECT_FLOAT_EQ(s.at(100), 1.0f);
}

TEST(Optimizer, NoWeightDecayOnNormWeights) {
  auto m = TrainModel::create(tiny_config(), 1, 4);
  ASSERT_TRUE(m.is_ok());
  TrainModel& model = **m;
  AdamWOptions o;
  o.weight_decay = 0.5f;
  AdamW opt(model, o);
  model.zero_grad();  // zero gradients: only decay can move a parameter
  const float before_mat = model.param("blk.0.attn_q.weight").data_as<float>()[0];
  opt.step(model.params(), model.grads(), 0.1f);
  EXPECT_FLOAT_EQ(model.param("blk.0.attn_norm.weight").data_as<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(model.param("blk.0.attn_q.weight").data_as<float>()[0], before_mat * 0.95f);
}

// A whole step's gradients are the same bits on 1, 2 and 3 threads (our f32 GEMM gives every split
// the one-call bits, the element-wise ops split on whole vectors): a 2-layer llama with a
// 32000-token head and 512 tokens, big enough that every op splits. Before the element-wise
// chunks were aligned, 3 threads changed the last bit of gradients in every tensor (and 1.1 M of
// the 16.4 M logits) while the loss kept its bits.
TEST(TrainModel, GradientsDoNotDependOnTheThreadCount) {
  ModelConfig c = tiny_config();  // with a 32000-token head and 96 wide
  c.n_vocab = 32000;
  c.dim = 96;
  c.head_dim = 24;
  c.rope_dim = 24;
  c.ffn_dim = 256;
  c.n_ctx_train = 128;
  constexpr int64_t kB = 4, kT = 128;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(kB * kT), targets(kB * kT);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 32000);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng() % 32000);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    auto m = TrainModel::create(c, kB, kT, {0.02f, 7, true});
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    m.value()->set_threads(threads);
    m.value()->zero_grad();
    m.value()->forward(tokens, targets, kB, kT, true);
    m.value()->backward();
    const auto g = m.value()->grads();
    if (first.empty()) {
      first.assign(g.begin(), g.end());
      continue;
    }
    for (const ParamInfo& info : m.value()->tensors()) {
      int64_t differ = 0;
      for (size_t i = info.offset; i < info.offset + info.numel; ++i) differ += g[i] != first[i];
      EXPECT_EQ(differ, 0) << info.name << " on " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace nexus::train
