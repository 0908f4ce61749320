// Golden tests of the forward pass: every architecture's logits against PyTorch references
// (tests/fixtures/models, written by scripts/gen_*_fixtures.py), through one-batch prefill,
// token-by-token decoding, split prompts, cache truncation, KV cache types and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "golden/reference_logits.h"
#include "nexus/io/gguf.h"
#include "nexus/compress/gguf_convert.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "backends/cpu/gemm_amx.h"
#include "ops/matmul.h"
#include "test_paths.h"

namespace nexus {
namespace {

using test::read_reference;
using test::Reference;

// hf_*: GGUFs written by llama.cpp's converter from Hugging Face checkpoints
// (scripts/gen_hf_ssm_fixtures.py).
constexpr std::array<const char*, 12> kFixtures = {
    "llama_gqa_tied", "llama_untied",       "qwen2",    "qwen3",    "gpt2",   "llama_swa",
    "mamba",          "mamba2",             "granitehybrid",        "granitehybrid_rope",
    "hf_mamba",       "hf_mamba2"};

std::string fixture_path(const std::string& name, const char* ext) {
  return test::fixtures_dir() + "/models/" + name + ext;
}

// A reference row that a decoded row should equal.
struct WantRow {
  int seq = 0;
  int pos = 0;
  std::span<const float> logits;
};

WantRow want_row(const Reference& ref, int seq, int pos) { return {seq, pos, ref.row(seq, pos)}; }

// |got - want| <= abs + rel * |want| for every logit. F32 caches must match the float64
// reference to float32 rounding; F16 / Q8_0 caches get an absolute bound scaled by max|logit|
// (the generator's simulation of those caches gives ~7e-4 and ~2e-2 of max|logit|).
struct Tolerance {
  double abs = 1e-4;
  double rel = 1e-5;
};

Tolerance tolerance_for(DType kv, const Reference& ref) {
  if (kv == DType::kF16) return {1e-2 * ref.max_abs, 0.0};
  if (kv == DType::kQ8_0) return {6e-2 * ref.max_abs, 0.0};
  return {};
}

// Compares rows of logits (batch order) with the reference rows they should equal, and prints the
// largest error so a passing run still shows the margin.
::testing::AssertionResult logits_match(std::span<const float> got,
                                        const std::vector<WantRow>& want, const Tolerance& tol,
                                        const std::string& what) {
  const size_t n_vocab = want.empty() ? 0 : want[0].logits.size();
  if (got.size() != want.size() * n_vocab)
    return ::testing::AssertionFailure() << what << ": got " << got.size() << " logits, want "
                                         << want.size() << " rows of " << n_vocab;
  double max_err = 0;
  size_t worst = 0, bad = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    for (size_t c = 0; c < n_vocab; ++c) {
      const double g = got[r * n_vocab + c], w = want[r].logits[c];
      const double err = std::isfinite(g) ? std::fabs(g - w) : INFINITY;
      if (err > tol.abs + tol.rel * std::fabs(w)) ++bad;
      if (!(err <= max_err)) {
        max_err = err;
        worst = r * n_vocab + c;
      }
    }
  }
  std::printf("  %-48s max |err| %.3g (abs tol %.3g)\n", what.c_str(), max_err, tol.abs);
  if (bad == 0) return ::testing::AssertionSuccess();
  const WantRow& w = want[worst / n_vocab];
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << got.size() << " logits out of tolerance; worst in "
         << "output row " << worst / n_vocab << " (seq " << w.seq << " pos " << w.pos
         << "), vocab id " << worst % n_vocab << ": got " << got[worst] << ", want "
         << w.logits[worst % n_vocab] << " (|err| " << max_err << ")";
}

class GoldenModel {
 public:
  explicit GoldenModel(const std::string& name) : name_(name) {
    auto m = Model::load(fixture_path(name, ".gguf"));
    if (!m) {
      error_ = m.status().message();
      return;
    }
    model_ = std::move(m).value();
    auto r = read_reference(fixture_path(name, ".logits.bin"));
    if (!r) {
      error_ = r.status().message();
      return;
    }
    ref_ = std::move(r).value();
  }
  const std::string& error() const { return error_; }
  const Model& model() const { return *model_; }
  const Reference& ref() const { return ref_; }
  const std::string& name() const { return name_; }

  // kv_block > 0: a paged cache of blocks that small (sequences take them in turns).
  std::unique_ptr<Context> context(DType kv, int threads, std::string* err,
                                   int64_t kv_block = 0) const {
    ContextOptions o;
    o.n_ctx = 64;
    o.n_seq = 2;
    o.kv_type = kv;
    o.n_threads = threads;
    o.kv_block = kv_block;
    auto c = Context::create(*model_, o);
    if (!c) {
      *err = c.status().message();
      return nullptr;
    }
    return std::move(c).value();
  }

 private:
  std::string name_, error_;
  std::unique_ptr<Model> model_;
  Reference ref_;
};

#define NEXUS_LOAD_GOLDEN(var, name)               \
  GoldenModel var(name);                           \
  ASSERT_TRUE(var.error().empty()) << var.error(); \
  ASSERT_EQ(var.model().config().n_vocab, var.ref().n_vocab)

#define NEXUS_MAKE_CONTEXT(var, golden, kv, threads, ...)                                \
  std::string var##_err;                                                                \
  std::unique_ptr<Context> var = (golden).context(kv, threads, &var##_err, ##__VA_ARGS__); \
  ASSERT_NE(var, nullptr) << var##_err

#define NEXUS_DECODE(ctx, batch, logits)         \
  do {                                           \
    Status st_ = (ctx).decode(batch, &(logits)); \
    ASSERT_TRUE(st_) << st_.message();           \
  } while (0)

// Scenario shared by the split-prompt test and the KV type x thread count sweep: sequence 0's
// first 5 tokens and sequence 1's first 8 in one batch, then one token of each unfinished
// sequence per decode call (so one batch holds two sequences at different positions).
void run_split_prompt(const GoldenModel& g, DType kv, int threads, int64_t kv_block = 0) {
  NEXUS_MAKE_CONTEXT(ctx, g, kv, threads, kv_block);
  const Reference& ref = g.ref();
  const Tolerance tol = tolerance_for(kv, ref);
  const std::array<int, 2> prompt = {5, 8};
  Batch b;
  std::vector<WantRow> want;
  for (int s = 0; s < 2; ++s) {
    for (int p = 0; p < prompt[s]; ++p) {
      b.add(ref.tokens[s][p], p, s, true);
      want.push_back(want_row(ref, s, p));
    }
  }
  std::vector<float> logits;
  NEXUS_DECODE(*ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, want, tol, g.name() + " split prompt"));
  for (int step = 0;; ++step) {
    b.clear();
    want.clear();
    for (int s = 0; s < 2; ++s) {
      const int p = prompt[s] + step;
      if (p >= static_cast<int>(ref.tokens[s].size())) continue;
      b.add(ref.tokens[s][p], p, s, true);
      want.push_back(want_row(ref, s, p));
    }
    if (b.size() == 0) break;
    NEXUS_DECODE(*ctx, b, logits);
    // Later steps build on earlier ones: report the first divergence only.
    ::testing::AssertionResult r =
        logits_match(logits, want, tol, g.name() + " split step " + std::to_string(step));
    if (!r) {
      ADD_FAILURE() << r.message();
      return;
    }
  }
  EXPECT_EQ(ctx->seq_len(0), static_cast<int32_t>(ref.tokens[0].size()));
  EXPECT_EQ(ctx->seq_len(1), static_cast<int32_t>(ref.tokens[1].size()));
}

class ModelGolden : public ::testing::TestWithParam<const char*> {};

// The loader reads the hyper-parameters the fixture was made with (NAME.json).
TEST_P(ModelGolden, ConfigMatchesFixture) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  std::ifstream in(fixture_path(GetParam(), ".json"));
  ASSERT_TRUE(in) << "missing " << fixture_path(GetParam(), ".json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& f = j.at("config");
  const ModelConfig& c = g.model().config();
  const std::string arch = f.at("arch");
  EXPECT_EQ(c.arch_name, arch);
  const Arch want_arch = arch == "llama"    ? Arch::kLlama
                         : arch == "qwen2"  ? Arch::kQwen2
                         : arch == "qwen3"  ? Arch::kQwen3
                         : arch == "mamba"  ? Arch::kMamba
                         : arch == "mamba2" ? Arch::kMamba2
                         : arch == "granitehybrid" ? Arch::kGraniteHybrid
                                            : Arch::kGpt2;
  EXPECT_EQ(c.arch, want_arch);
  EXPECT_EQ(c.n_vocab, f.at("n_vocab").get<int64_t>());
  EXPECT_EQ(c.n_ctx_train, f.at("n_ctx").get<int64_t>());
  EXPECT_EQ(c.dim, f.at("dim").get<int64_t>());
  EXPECT_EQ(c.n_layers, f.at("n_layers").get<int64_t>());
  EXPECT_EQ(c.tied_output, f.at("tied").get<bool>());
  EXPECT_FLOAT_EQ(c.norm_eps, f.at("norm_eps").get<float>());
  EXPECT_EQ(g.model().n_params(), j.at("n_params").get<int64_t>());
  if (c.hybrid()) {
    EXPECT_EQ(c.n_heads, f.at("n_heads").get<int64_t>());
    EXPECT_EQ(c.n_kv_heads, f.at("n_kv_heads").get<int64_t>());
    EXPECT_EQ(c.head_dim, f.at("head_dim").get<int64_t>());
    EXPECT_EQ(c.ffn_dim, f.at("ffn_dim").get<int64_t>());
    EXPECT_EQ(c.rope, f.at("rope").get<bool>() ? RopeStyle::kNormal : RopeStyle::kNone);
    EXPECT_EQ(c.ssm_inner, f.at("d_inner").get<int64_t>());
    EXPECT_EQ(c.ssm_state, f.at("d_state").get<int64_t>());
    EXPECT_EQ(c.ssm_heads(), f.at("n_head").get<int64_t>());
    EXPECT_EQ(c.ssm_n_groups(), f.at("n_group").get<int64_t>());
    const auto kinds = f.at("layer_kinds").get<std::vector<std::string>>();
    ASSERT_EQ(static_cast<int64_t>(kinds.size()), c.n_layers);
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const LayerWeights& lw = g.model().weights().layers[l];
      EXPECT_EQ(c.recurrent_layer(l), kinds[l] == "ssm") << "layer " << l;
      EXPECT_EQ(lw.ssm_in.empty(), kinds[l] != "ssm") << "layer " << l;
      EXPECT_EQ(lw.wq.empty(), kinds[l] == "ssm") << "layer " << l;
      EXPECT_FALSE(lw.w_gate.empty()) << "layer " << l;
    }
    return;
  }
  if (c.ssm()) {
    EXPECT_EQ(c.ssm_inner, f.at("d_inner").get<int64_t>());
    EXPECT_EQ(c.ssm_state, f.at("d_state").get<int64_t>());
    EXPECT_EQ(c.ssm_conv, f.at("d_conv").get<int64_t>());
    EXPECT_EQ(c.n_heads, 0);
    const LayerWeights& l = g.model().weights().layers[1];
    if (c.arch == Arch::kMamba2) {
      EXPECT_EQ(c.ssm_heads(), f.at("n_head").get<int64_t>());
      EXPECT_EQ(c.ssm_head_dim(), f.at("head_dim").get<int64_t>());
      EXPECT_EQ(c.ssm_n_groups(), f.at("n_group").get<int64_t>());
      EXPECT_EQ(l.ssm_norm.shape(), (std::vector<int64_t>{c.ssm_groups, c.ssm_inner / c.ssm_groups}));
    } else {
      EXPECT_EQ(c.ssm_dt_rank, f.at("dt_rank").get<int64_t>());
      EXPECT_EQ(l.ssm_a.shape(), (std::vector<int64_t>{c.ssm_inner, c.ssm_state}));
    }
    return;
  }
  EXPECT_EQ(c.n_heads, f.at("n_heads").get<int64_t>());
  EXPECT_EQ(c.n_kv_heads, f.at("n_kv_heads").get<int64_t>());
  EXPECT_EQ(c.head_dim, f.at("head_dim").get<int64_t>());
  EXPECT_EQ(c.ffn_dim, f.at("ffn_dim").get<int64_t>());
  EXPECT_FLOAT_EQ(c.norm_eps, f.at("norm_eps").get<float>());
  const std::string rope = f.at("rope");
  EXPECT_EQ(c.rope, rope == "normal" ? RopeStyle::kNormal
                    : rope == "neox" ? RopeStyle::kNeox
                                     : RopeStyle::kNone);
  if (rope != "none") {
    EXPECT_FLOAT_EQ(c.rope_theta, f.at("rope_base").get<float>());
    EXPECT_EQ(c.rope_dim, f.at("rope_dim").get<int64_t>());
  }
  EXPECT_EQ(c.sliding_window, f.at("window").get<int64_t>());
  EXPECT_EQ(c.tied_output, f.at("tied").get<bool>());
  EXPECT_EQ(g.model().n_params(), j.at("n_params").get<int64_t>());

  // Weight views are outermost-first (tensor.h): a linear layer is {n_out, n_in}.
  const ModelWeights& w = g.model().weights();
  ASSERT_EQ(w.layers.size(), static_cast<size_t>(c.n_layers));
  EXPECT_EQ(w.tok_embd.shape(), (std::vector<int64_t>{c.n_vocab, c.dim}));
  EXPECT_EQ(w.output.shape(), (std::vector<int64_t>{c.n_vocab, c.dim}));
  if (c.tied_output) {
    EXPECT_EQ(w.output.data(), w.tok_embd.data());
  }
  const LayerWeights& l = w.layers[1];
  const int64_t q_width = c.n_heads * c.head_dim, kv_width = c.n_kv_heads * c.head_dim;
  if (c.arch == Arch::kGpt2) {
    EXPECT_EQ(w.pos_embd.shape(), (std::vector<int64_t>{c.n_ctx_train, c.dim}));
    EXPECT_EQ(l.wqkv.shape(), (std::vector<int64_t>{q_width + 2 * kv_width, c.dim}));
  } else {
    EXPECT_EQ(l.wq.shape(), (std::vector<int64_t>{q_width, c.dim}));
    EXPECT_EQ(l.wk.shape(), (std::vector<int64_t>{kv_width, c.dim}));
    EXPECT_EQ(l.wo.shape(), (std::vector<int64_t>{c.dim, q_width}));
    EXPECT_EQ(l.w_gate.shape(), (std::vector<int64_t>{c.ffn_dim, c.dim}));
  }
  EXPECT_EQ(l.w_down.shape(), (std::vector<int64_t>{c.dim, c.ffn_dim}));
  if (c.arch == Arch::kQwen3) {
    EXPECT_EQ(l.q_norm.shape(), (std::vector<int64_t>{c.head_dim}));
    EXPECT_EQ(l.k_norm.shape(), (std::vector<int64_t>{c.head_dim}));
  }
}

// (a) Both sequences in one batch, interleaved token by token, logits for every row.
TEST_P(ModelGolden, TwoSequencesInOneBatch) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1);
  const Reference& ref = g.ref();
  Batch b;
  std::vector<WantRow> want;
  const size_t n = std::max(ref.tokens[0].size(), ref.tokens[1].size());
  for (size_t p = 0; p < n; ++p) {
    for (int s = 0; s < 2; ++s) {
      if (p >= ref.tokens[s].size()) continue;
      b.add(ref.tokens[s][p], static_cast<int32_t>(p), s, true);
      want.push_back(want_row(ref, s, static_cast<int>(p)));
    }
  }
  std::vector<float> logits;
  NEXUS_DECODE(*ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, want, {}, g.name() + " one batch"));
  EXPECT_EQ(ctx->seq_len(0), static_cast<int32_t>(ref.tokens[0].size()));
  EXPECT_EQ(ctx->seq_len(1), static_cast<int32_t>(ref.tokens[1].size()));
}

// (b) One token per decode call (the KV-cache path): sequence 0 in slot 0, then sequence 1 in
// slot 1 while slot 0 is full.
TEST_P(ModelGolden, TokenByToken) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1);
  const Reference& ref = g.ref();
  std::vector<float> logits;
  for (int s = 0; s < 2; ++s) {
    for (int p = 0; p < static_cast<int>(ref.tokens[s].size()); ++p) {
      Batch b;
      b.add(ref.tokens[s][p], p, s, true);
      NEXUS_DECODE(*ctx, b, logits);
      ::testing::AssertionResult r =
          logits_match(logits, {want_row(ref, s, p)}, {},
                       g.name() + " seq " + std::to_string(s) + " pos " + std::to_string(p));
      if (!r) {  // later positions build on this one: report the first divergence only
        ADD_FAILURE() << r.message();
        return;
      }
    }
    EXPECT_EQ(ctx->seq_len(s), static_cast<int32_t>(ref.tokens[s].size()));
  }
}

// (c) Prompts as one batch, then one token per sequence per call.
TEST_P(ModelGolden, SplitPrompt) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  run_split_prompt(g, DType::kF32, 1);
}

// The same on a cache paged in blocks of 4 positions: the two sequences take blocks in turns, so
// attention reads every sequence over several runs of the pool.
TEST_P(ModelGolden, SplitPromptOnPagedCache) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  run_split_prompt(g, DType::kF32, 2, 4);
}

// A sequence forked from another's first 6 positions (share_prefix: one full block of 4 shared,
// the partial one copied) continues exactly as the original would, and so does the original (its
// writes into the shared prefix's partial block go to its own copy).
TEST_P(ModelGolden, SharedPrefixContinuesBothSequences) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1, 4);
  const Reference& ref = g.ref();
  const std::vector<int32_t>& s0 = ref.tokens[0];
  const int n0 = static_cast<int>(s0.size()), k = 6;
  ASSERT_GT(n0, k + 1);
  Batch b;
  for (int p = 0; p < k; ++p) b.add(s0[p], p, 0, false);
  b.want_logits.back() = 1;
  std::vector<float> logits;
  NEXUS_DECODE(*ctx, b, logits);
  const Context::KvUsage before = ctx->kv_usage();
  ASSERT_TRUE(ctx->share_prefix(0, 1, k).is_ok());
  EXPECT_EQ(ctx->seq_len(1), k);
  EXPECT_EQ(ctx->kv_usage().blocks_used, before.blocks_used + 1);  // only the partial block
  EXPECT_FALSE(ctx->share_prefix(0, 1, k).is_ok());                 // slot 1 is not empty
  if (!g.model().config().has_recurrent()) {  // nothing to snapshot: refused by name
    RecurrentSnapshot snap;
    const Status st = ctx->save_state(0, &snap);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("no recurrent state"), std::string::npos) << st.message();
  }
  // Both slots continue with sequence 0's tokens, in one batch each step.
  for (int p = k; p < n0; ++p) {
    b.clear();
    b.add(s0[p], p, 0, true);
    b.add(s0[p], p, 1, true);
    NEXUS_DECODE(*ctx, b, logits);
    EXPECT_TRUE(logits_match(logits, {want_row(ref, 0, p), want_row(ref, 0, p)}, {},
                             g.name() + " fork at " + std::to_string(p)));
  }
}

// A pool of three 4-position blocks: a batch that needs a fourth is refused with the pool's use
// named (and takes nothing), and the context serves again once a sequence gives its blocks back.
TEST_P(ModelGolden, FullKvPoolIsAClearErrorAndRecovers) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  ContextOptions o;
  o.n_ctx = 64;
  o.n_seq = 2;
  o.kv_type = DType::kF32;
  o.kv_block = 4;
  o.kv_blocks = 3;
  auto created = Context::create(g.model(), o);
  ASSERT_TRUE(created) << created.status().message();
  Context& ctx = **created;
  const Reference& ref = g.ref();
  ASSERT_GE(ref.tokens[0].size(), 8u);
  Batch b;
  for (int p = 0; p < 8; ++p) b.add(ref.tokens[0][p], p, 0, p == 7);  // two blocks
  std::vector<float> logits;
  NEXUS_DECODE(ctx, b, logits);
  b.clear();
  for (int p = 0; p < 5; ++p) b.add(ref.tokens[1][p], p, 1, p == 4);  // two more: one too many
  const Status full = ctx.decode(b, &logits);
  ASSERT_FALSE(full);
  EXPECT_NE(full.message().find("KV cache full"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("2 of 3 blocks of 4 positions in use"), std::string::npos)
      << full.message();
  EXPECT_EQ(ctx.seq_len(1), 0);
  EXPECT_EQ(ctx.kv_usage().blocks_used, 2);
  ctx.clear_seq(0);
  NEXUS_DECODE(ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, {want_row(ref, 1, 4)}, {}, g.name() + " after the pool freed"));
}

// State-space models: after sequence 0, every recurrent layer's conv rows and scan state equal
// the PyTorch reference's (NAME.json's final_state).
class ModelGoldenState : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelGoldenState, RecurrentStateMatchesFixture) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  ASSERT_TRUE(g.model().config().has_recurrent());
  std::ifstream in(fixture_path(GetParam(), ".json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& fs = j.at("final_state");
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1);
  const std::vector<int32_t>& s0 = g.ref().tokens[fs.at("sequence").get<int>()];
  ASSERT_EQ(static_cast<int>(s0.size()), fs.at("after_tokens").get<int>());
  Batch b;
  for (int p = 0; p < static_cast<int>(s0.size()); ++p) b.add(s0[p], p, 0, false);
  std::vector<float> logits;
  NEXUS_DECODE(*ctx, b, logits);
  int64_t recurrent = 0;
  for (int64_t l = 0; l < g.model().config().n_layers; ++l)
    recurrent += g.model().config().recurrent_layer(l) ? 1 : 0;
  ASSERT_EQ(static_cast<int64_t>(fs.at("layers").size()), recurrent);
  int64_t idx = 0;
  for (const nlohmann::json& layer : fs.at("layers")) {
    const int64_t l = layer.contains("layer") ? layer.at("layer").get<int64_t>() : idx;
    ++idx;
    const Context::RecurrentState got = ctx->recurrent_state(0, l);
    for (const auto& [name, span] : {std::pair{"conv", got.conv}, {"ssm", got.scan}}) {
      const auto want = layer.at(name).get<std::vector<float>>();
      ASSERT_EQ(span.size(), want.size()) << "layer " << l << " " << name;
      double scale = 1e-3, worst = 0.0;
      for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(span[i]) - want[i]));
      EXPECT_LE(worst, 1e-5 * scale + 1e-6) << "layer " << l << " " << name << " (max " << scale << ")";
    }
  }
  EXPECT_TRUE(ctx->recurrent_state(0, -1).scan.empty());
}

// A snapshot of the recurrent state after k positions takes a sequence back there (the tokens
// after it replayed give the reference's logits again) and starts another sequence there, its
// full KV blocks shared: a shared prefix short of the source's latest position.
TEST_P(ModelGoldenState, SnapshotRollsBackAndStartsASharedPrefix) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1, 4);
  const std::vector<int32_t>& s0 = g.ref().tokens[1];  // 13 tokens
  const int n0 = static_cast<int>(s0.size()), k = 8;
  ASSERT_GT(n0, k + 1);
  std::vector<float> logits;
  Batch b;
  for (int p = 0; p < k; ++p) b.add(s0[p], p, 0, false);
  NEXUS_DECODE(*ctx, b, logits);
  RecurrentSnapshot snap;
  ASSERT_TRUE(ctx->save_state(0, &snap).is_ok());
  EXPECT_EQ(snap.pos, k);
  auto continue_from_k = [&](int seq, const std::string& what) {
    b.clear();
    std::vector<WantRow> want;
    for (int p = k; p < n0; ++p) {
      b.add(s0[p], p, seq, true);
      want.push_back(want_row(g.ref(), 1, p));
    }
    std::vector<float> out;
    const Status st = ctx->decode(b, &out);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_TRUE(logits_match(out, want, {}, g.name() + " " + what));
  };
  continue_from_k(0, "seq 0 past the snapshot");
  // Rolled back to k, sequence 0 replays the same tokens with the same logits.
  ASSERT_TRUE(ctx->restore_state(0, snap).is_ok());
  EXPECT_EQ(ctx->seq_len(0), k);
  continue_from_k(0, "seq 0 after restore_state");
  // Sequence 1 starts at k from sequence 0's blocks and the snapshot (two full blocks shared).
  const Context::KvUsage before = ctx->kv_usage();
  EXPECT_FALSE(ctx->share_prefix(0, 1, k).is_ok());  // the state is at n0, not k
  ASSERT_TRUE(ctx->share_prefix(0, 1, snap).is_ok());
  EXPECT_EQ(ctx->seq_len(1), k);
  EXPECT_EQ(ctx->kv_usage().blocks_used, before.blocks_used);
  continue_from_k(1, "seq 1 started from the snapshot");
  // Snapshots that do not fit are refused by name.
  RecurrentSnapshot wrong = snap;
  wrong.state.pop_back();
  EXPECT_FALSE(ctx->restore_state(0, wrong).is_ok());
  wrong = snap;
  wrong.pos = n0 + 1;
  const Status past = ctx->restore_state(0, wrong);
  EXPECT_FALSE(past.is_ok());
  EXPECT_NE(past.message().find("holds " + std::to_string(n0) + " positions"), std::string::npos)
      << past.message();
  EXPECT_FALSE(ctx->share_prefix(0, 0, snap).is_ok());
}

// A prompt long enough for the chunked scan (three chunks of 64 and a part) in one batch on two
// threads gives the logits and the final state of the same prompt token by token (the
// sequential recurrence), at every position.
TEST_P(ModelGoldenState, LongPromptChunkedEqualsTokenByToken) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  const int n = 200;
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i)
    tokens.push_back(static_cast<int32_t>((i * 29 + i / 7 + 3) % g.model().config().n_vocab));
  ContextOptions o;
  o.n_ctx = n;
  o.kv_type = DType::kF32;
  o.n_threads = 2;
  auto batch_ctx = Context::create(g.model(), o);
  o.n_threads = 1;
  auto step_ctx = Context::create(g.model(), o);
  ASSERT_TRUE(batch_ctx && step_ctx);
  Batch b;
  for (int p = 0; p < n; ++p) b.add(tokens[p], p, 0, true);
  std::vector<float> all, one;
  NEXUS_DECODE(**batch_ctx, b, all);
  const int64_t v = g.model().config().n_vocab;
  ASSERT_EQ(static_cast<int64_t>(all.size()), n * v);
  double worst = 0.0;
  for (int p = 0; p < n; ++p) {
    Batch s;
    s.add(tokens[p], p, 0, true);
    NEXUS_DECODE(**step_ctx, s, one);
    for (int64_t i = 0; i < v; ++i)
      worst = std::max(worst, std::fabs(double(all[p * v + i]) - one[i]) / (1.0 + std::fabs(one[i])));
  }
  EXPECT_LT(worst, 1e-4);
  for (int64_t l = 0; l < g.model().config().n_layers; ++l) {
    if (!g.model().config().recurrent_layer(l)) continue;
    const auto x = (*batch_ctx)->recurrent_state(0, l).scan, y = (*step_ctx)->recurrent_state(0, l).scan;
    ASSERT_EQ(x.size(), y.size());
    double d = 0.0, m = 1e-3;
    for (size_t i = 0; i < x.size(); ++i) {
      d = std::max(d, std::fabs(double(x[i]) - y[i]));
      m = std::max(m, std::fabs(double(y[i])));
    }
    EXPECT_LT(d, 1e-4 * m) << "layer " << l;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelGoldenState,
                         ::testing::Values("mamba", "mamba2", "granitehybrid",
                                           "granitehybrid_rope"));

// want_logits left empty returns only the last row; clear_seq(seq, from) truncates a sequence
// so it can be re-decoded from there; a cleared slot takes a new, longer sequence.
TEST_P(ModelGolden, ClearAndReplay) {
  NEXUS_LOAD_GOLDEN(g, GetParam());
  NEXUS_MAKE_CONTEXT(ctx, g, DType::kF32, 1);
  const Reference& ref = g.ref();
  const std::vector<int32_t>& s0 = ref.tokens[0];
  const std::vector<int32_t>& s1 = ref.tokens[1];
  const int n0 = static_cast<int>(s0.size()), n1 = static_cast<int>(s1.size());
  std::vector<float> logits;

  Batch b;
  for (int p = 0; p < n0; ++p) {
    b.token.push_back(s0[p]);
    b.pos.push_back(p);
    b.seq.push_back(0);
  }
  NEXUS_DECODE(*ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, {want_row(ref, 0, n0 - 1)}, {}, g.name() + " default last row"));
  EXPECT_EQ(ctx->seq_len(0), n0);
  EXPECT_EQ(ctx->seq_len(1), 0);

  ctx->clear_seq(0, 5);
  EXPECT_EQ(ctx->seq_len(0), 5);
  b.clear();
  std::vector<WantRow> want;
  if (g.model().config().has_recurrent()) {
    // A recurrent state holds the latest position only: replaying from 5 is refused by name.
    b.add(s0[5], 5, 0, true);
    const Status st = ctx->decode(b, &logits);
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("cannot be rolled back"), std::string::npos) << st.message();
    EXPECT_FALSE(ctx->share_prefix(0, 1, 3).is_ok());  // nor shared short of its last position
    ctx->clear_seq(0);
    b.clear();
    for (int p = 0; p < 5; ++p) b.add(s0[p], p, 0, false);
  }
  for (int p = 5; p < n0; ++p) {
    b.add(s0[p], p, 0, p % 2 == 0);  // only some rows
    if (p % 2 == 0) want.push_back(want_row(ref, 0, p));
  }
  NEXUS_DECODE(*ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, want, {}, g.name() + " replay after clear_seq(0, 5)"));

  ctx->clear_seq(0);
  EXPECT_EQ(ctx->seq_len(0), 0);
  b.clear();
  want.clear();
  for (int p = 0; p < n1; ++p) {
    b.add(s1[p], p, 0, true);
    want.push_back(want_row(ref, 1, p));
  }
  NEXUS_DECODE(*ctx, b, logits);
  EXPECT_TRUE(logits_match(logits, want, {}, g.name() + " seq 1 in cleared slot 0"));
  EXPECT_EQ(ctx->seq_len(0), n1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelGolden, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param); });

// The split-prompt scenario for every KV cache type and 1-3 threads.
class ModelGoldenKv : public ::testing::TestWithParam<std::tuple<const char*, DType, int>> {};

TEST_P(ModelGoldenKv, SplitPrompt) {
  const auto& [name, kv, threads] = GetParam();
  NEXUS_LOAD_GOLDEN(g, name);
  run_split_prompt(g, kv, threads);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelGoldenKv,
                         ::testing::Combine(::testing::ValuesIn(kFixtures),
                                            ::testing::Values(DType::kF32, DType::kF16,
                                                              DType::kQ8_0),
                                            ::testing::Values(1, 2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param))) + "_t" +
                                  std::to_string(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// Weights converted to each type (in memory, with nexus convert's fallbacks for rows that do not
// fill a block). Two checks per type:
//  - against the F32 PyTorch reference, for the types whose rounding leaves the logits close
//    (bound ~2x the largest error measured over all fixtures, relative to max|logit|);
//  - against nexus's F32 path run on the same weights dequantized back to F32 (itself checked
//    against PyTorch above), which isolates the quantized kernels: what remains is the 8-bit
//    rounding of the activations in the quantized dot products (up to ~4.5% of max|logit| on
//    these deliberately sensitive fixtures; a wrong scale or nibble order gives ~100%).
struct WeightCase {
  DType type;
  double vs_torch;    // max |err| / max|logit| against PyTorch; 0 = not compared
  double vs_dequant;  // max |err| / max|logit| against F32 on the dequantized weights
};

std::unique_ptr<Model> converted_model(const GgufFile& src, DType type, std::string* err) {
  auto conv = convert_gguf(src, type);
  if (!conv) {
    *err = conv.status().message();
    return nullptr;
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(conv->serialize());
  auto parsed = GgufFile::parse(*bytes, bytes, src.path() + "-" + std::string(dtype_name(type)));
  if (!parsed) {
    *err = parsed.status().message();
    return nullptr;
  }
  auto model = Model::from_gguf(std::make_shared<const GgufFile>(std::move(parsed).value()));
  if (!model) {
    *err = model.status().message();
    return nullptr;
  }
  return std::move(model).value();
}

// Logits of both sequences, decoded in one batch (prefill path: from kBlasMinTokens tokens on,
// f32 activations through sgemm, except for the repacked layouts, whose integer kernels take
// 8-bit activations at every token count: matmul_on_blas) or step by step, one token of each
// sequence per call (decode path: the quantized dot products with 8-bit activations). Rows are in
// (seq, pos) order.
std::vector<float> batch_logits(const Model& m, const Reference& ref, bool stepwise,
                                std::string* err) {
  ContextOptions o;
  o.n_ctx = 64;
  o.n_seq = 2;
  o.kv_type = DType::kF32;
  o.n_threads = 2;
  std::vector<float> logits;
  auto ctx = Context::create(m, o);
  if (!ctx) {
    *err = ctx.status().message();
    return logits;
  }
  if (!stepwise) {
    Batch b;
    for (int s = 0; s < 2; ++s)
      for (size_t p = 0; p < ref.tokens[s].size(); ++p)
        b.add(ref.tokens[s][p], static_cast<int32_t>(p), s, true);
    if (Status st = (*ctx)->decode(b, &logits); !st) *err = st.message();
    return logits;
  }
  const size_t nv = static_cast<size_t>(ref.n_vocab);
  std::vector<float> out((ref.tokens[0].size() + ref.tokens[1].size()) * nv), step;
  const size_t max_len = std::max(ref.tokens[0].size(), ref.tokens[1].size());
  for (size_t p = 0; p < max_len; ++p) {
    Batch b;
    std::vector<size_t> rows;
    for (int s = 0; s < 2; ++s) {
      if (p >= ref.tokens[s].size()) continue;
      b.add(ref.tokens[s][p], static_cast<int32_t>(p), s, true);
      rows.push_back((s == 0 ? 0 : ref.tokens[0].size()) + p);
    }
    if (Status st = (*ctx)->decode(b, &step); !st) {
      *err = st.message();
      return logits;
    }
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy(step.begin() + i * nv, step.begin() + (i + 1) * nv, out.begin() + rows[i] * nv);
  }
  return out;
}

// The layer matrices of m whose prefill matmuls (n tokens) run on sgemm, and all of them.
std::pair<int, int> matrices_on_blas(const Model& m, int64_t n) {
  int blas = 0, all = 0;
  for (const LayerWeights& l : m.weights().layers)
    for (const Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.ssm_in,
                            &l.ssm_x, &l.ssm_dt, &l.ssm_out}) {
      if (t->empty()) continue;
      ++all;
      blas += matmul_on_blas(t->dtype(), n) ? 1 : 0;
    }
  return {blas, all};
}

class ModelGoldenWeights : public ::testing::TestWithParam<std::tuple<const char*, WeightCase>> {};

TEST_P(ModelGoldenWeights, BothSequencesInOneBatch) {
  const auto [name, wc] = GetParam();
  auto file = GgufFile::open(fixture_path(name, ".gguf"));
  ASSERT_TRUE(file) << file.status().message();
  auto ref = read_reference(fixture_path(name, ".logits.bin"));
  ASSERT_TRUE(ref) << ref.status().message();
  std::string err;
  std::unique_ptr<Model> quant = converted_model(file.value(), wc.type, &err);
  ASSERT_NE(quant, nullptr) << err;
  const std::vector<float> got = batch_logits(*quant, *ref, false, &err);
  ASSERT_TRUE(err.empty()) << err;
  const std::vector<float> got_steps = batch_logits(*quant, *ref, true, &err);
  ASSERT_TRUE(err.empty()) << err;
  std::vector<WantRow> want;
  for (int s = 0; s < 2; ++s)
    for (size_t p = 0; p < ref->tokens[s].size(); ++p)
      want.push_back(want_row(*ref, s, static_cast<int>(p)));
  // The hybrid without positional encoding is the most sensitive fixture to 8-bit rounding: its
  // worst quantized logits (Q8_0, Q5_1) err up to 1.4x the bound the others stay within.
  const double slack = std::string(name) == "granitehybrid" ? 1.5 : 1.0;
  const std::string what = std::string(name) + " weights " + std::string(dtype_name(wc.type));
  if (wc.vs_torch > 0) {
    EXPECT_TRUE(logits_match(got, want, {slack * wc.vs_torch * ref->max_abs, 0.0}, what + " vs torch"));
    EXPECT_TRUE(
        logits_match(got_steps, want, {slack * wc.vs_torch * ref->max_abs, 0.0}, what + " steps vs torch"));
  }

  // The same weights dequantized to F32 (a second conversion of the quantized file).
  std::unique_ptr<Model> deq = converted_model(quant->gguf(), DType::kF32, &err);
  ASSERT_NE(deq, nullptr) << err;
  const std::vector<float> exact = batch_logits(*deq, *ref, false, &err);
  ASSERT_TRUE(err.empty()) << err;
  std::vector<WantRow> want_exact = want;
  const size_t nv = static_cast<size_t>(ref->n_vocab);
  for (size_t r = 0; r < want_exact.size(); ++r)
    want_exact[r].logits = std::span<const float>(exact).subspan(r * nv, nv);
  EXPECT_TRUE(logits_match(got_steps, want_exact, {slack * wc.vs_dequant * ref->max_abs, 0.0},
                           what + " steps vs f32 of its weights"));
  const auto [on_blas, matrices] =
      matrices_on_blas(*quant, static_cast<int64_t>(got.size()) / ref->n_vocab);
  ASSERT_GT(matrices, 0);
  if (wc.type == DType::kBF16 && cpu::bf16w_amx_usable(quant->config().dim)) {
    // AMX prefill (the matrices whose k is a multiple of 32) rounds the activations to bf16, as
    // llama.cpp's BF16 dot does: as far from the f32 of its weights as bf16 weights are from
    // torch's f32 ones.
    EXPECT_TRUE(logits_match(got, want_exact, {slack * wc.vs_torch * ref->max_abs, 0.0},
                             what + " (AMX, bf16 activations) vs f32 of its weights"));
  } else if (on_blas == matrices) {
    // Prefill multiplies the exactly dequantized weights by f32 activations: float32 rounding.
    EXPECT_TRUE(
        logits_match(got, want_exact, {1e-5 * ref->max_abs, 0.0}, what + " vs f32 of its weights"));
  } else {
    // Some or all matrices (those of 8 rows and more, repacked at load) run the integer kernels of
    // decode on 8-bit activations in prefill too: the batch is as far from f32 as the steps, and
    // when every matrix does, it differs from the steps only in how attention rounds.
    EXPECT_TRUE(logits_match(got, want_exact, {slack * wc.vs_dequant * ref->max_abs, 0.0},
                             what + " vs f32 of its weights"));
    // State-space models: a batch runs the chunked scan, steps the sequential one; their last-bit
    // differences can move an 8-bit activation by a quantum, so only the bound above applies.
    if (on_blas > 0 || quant->config().has_recurrent()) return;
    std::vector<WantRow> want_steps = want;
    for (size_t r = 0; r < want_steps.size(); ++r)
      want_steps[r].logits = std::span<const float>(got_steps).subspan(r * nv, nv);
    EXPECT_TRUE(logits_match(got, want_steps, {1e-5 * ref->max_abs, 0.0}, what + " vs steps"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ModelGoldenWeights,
    ::testing::Combine(::testing::ValuesIn(kFixtures),
                       ::testing::Values(WeightCase{DType::kF16, 4e-3, 1e-5},
                                         WeightCase{DType::kBF16, 3e-2, 1e-5},
                                         WeightCase{DType::kQ8_0, 8e-2, 8e-2},
                                         WeightCase{DType::kQ5_0, 0, 8e-2},
                                         WeightCase{DType::kQ5_1, 0, 8e-2},
                                         WeightCase{DType::kQ4_0, 0, 8e-2},
                                         WeightCase{DType::kQ4_1, 0, 8e-2})),
    [](const auto& info) {
      return std::string(std::get<0>(info.param)) + "_" +
             std::string(dtype_name(std::get<1>(info.param).type));
    });

}  // namespace
}  // namespace nexus
