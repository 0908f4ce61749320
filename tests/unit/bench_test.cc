// Benchmark tooling: random-model shapes and type plans, the streaming GGUF writer, generated
// models loading through Model::load, and the bench runner's statistics and output formats.
#include "harness/bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/cpu/quant.h"
#include "nexus/io/gguf.h"
#include "io/gguf_stream_writer.h"
#include "harness/random_model.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;

// A fresh directory for one test's files, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("nexus_bench_test_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ModelShape tiny_shape(const std::string& arch) {
  auto s = parse_model_shape(arch == "qwen3" ? "custom:arch=qwen3,dim=64,layers=2,heads=4,"
                                               "kv_heads=2,head_dim=32,ffn=96,vocab=320,ctx=64"
                                             : "custom:dim=64,layers=2,heads=4,ffn=96,vocab=300");
  return s.value();
}

DType planned_type(const std::vector<PlannedTensor>& plan, const std::string& name) {
  for (const auto& t : plan)
    if (t.name == name) return t.dtype;
  ADD_FAILURE() << "no tensor " << name;
  return DType::kI8;
}

// Mean and standard deviation of a matrix, dequantized row by row.
std::pair<double, double> moments(const Tensor& t) {
  std::vector<float> row(t.cols());
  double s = 0, s2 = 0;
  for (int64_t r = 0; r < t.rows(); ++r) {
    cpu::dequantize_row(t.dtype(), t.row(r), row.data(), t.cols());
    for (float v : row) s += v, s2 += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(t.numel());
  return {s / n, std::sqrt(s2 / n - (s / n) * (s / n))};
}

TEST(RandomModel, PresetShapes) {
  const ModelShape l15 = parse_model_shape("L15M").value();
  EXPECT_EQ(l15.arch, "llama");
  EXPECT_EQ(l15.dim, 288);
  EXPECT_EQ(l15.n_layers, 6);
  EXPECT_EQ(l15.n_heads, 6);
  EXPECT_EQ(l15.ffn_dim, 768);
  EXPECT_EQ(l15.n_vocab, 32000);
  EXPECT_TRUE(l15.tied);
  EXPECT_NEAR(model_shape_params(l15) / 1e6, 15.19, 0.01);
  EXPECT_NEAR(model_shape_params(parse_model_shape("l110m").value()) / 1e6, 109.5, 0.1);
  const ModelShape q = parse_model_shape("Q06B").value();
  EXPECT_EQ(q.arch, "qwen3");
  EXPECT_EQ(q.n_kv_heads, 8);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.n_vocab, 151936);
  EXPECT_EQ(q.n_ctx, 40960);
  EXPECT_NEAR(model_shape_params(q) / 1e6, 596.0, 0.1);
}

TEST(RandomModel, CustomShapeParsing) {
  const ModelShape s = parse_model_shape("custom:arch=qwen3,dim=128,heads=8,kv_heads=2").value();
  EXPECT_EQ(s.arch, "qwen3");
  EXPECT_EQ(s.head_dim, 16);
  EXPECT_EQ(s.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(s.rope_theta, 1e6f);
  EXPECT_EQ(parse_model_shape("custom").value().dim, 64);
  for (const char* bad : {"L7B", "custom:dim=abc", "custom:foo=1", "custom:heads=6,kv_heads=4",
                          "custom:vocab=100", "custom:arch=gpt2", "custom:dim"}) {
    auto r = parse_model_shape(bad);
    EXPECT_FALSE(r) << bad;
  }
  EXPECT_NE(parse_model_shape("custom:foo=1").status().message().find("foo"), std::string::npos);
}

TEST(RandomModel, TypePlanFollowsLlamaQuantize) {
  const ModelShape l15 = parse_model_shape("L15M").value();
  // q4_0: the tied head would be Q6_K, but 288 is not a multiple of 256 -> Q8_0.
  auto p = plan_model_tensors(l15, ModelFileType::kQ4_0, false).value();
  EXPECT_EQ(planned_type(p, "token_embd.weight"), DType::kQ8_0);
  EXPECT_EQ(planned_type(p, "blk.0.attn_q.weight"), DType::kQ4_0);
  EXPECT_EQ(planned_type(p, "blk.0.attn_norm.weight"), DType::kF32);
  EXPECT_EQ(p.size(), 2u + 6 * 9);
  // q4_k: rows of 288 fall back to Q5_0; ffn_down rows of 768 keep K-quants.
  p = plan_model_tensors(l15, ModelFileType::kQ4_K_M, false).value();
  EXPECT_EQ(planned_type(p, "blk.0.attn_q.weight"), DType::kQ5_0);
  EXPECT_EQ(planned_type(p, "blk.0.ffn_down.weight"), DType::kQ4_K);  // 6 layers: 2 and 5 get more
  EXPECT_EQ(planned_type(p, "blk.1.ffn_down.weight"), DType::kQ4_K);
  EXPECT_EQ(planned_type(p, "blk.2.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(planned_type(p, "blk.5.ffn_down.weight"), DType::kQ6_K);
  // --pure: every matrix in the target type.
  p = plan_model_tensors(l15, ModelFileType::kQ4_0, true).value();
  EXPECT_EQ(planned_type(p, "token_embd.weight"), DType::kQ4_0);

  const ModelShape q = parse_model_shape("Q06B").value();
  p = plan_model_tensors(q, ModelFileType::kQ4_K_M, false).value();
  EXPECT_EQ(planned_type(p, "token_embd.weight"), DType::kQ6_K);
  EXPECT_EQ(planned_type(p, "blk.0.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(planned_type(p, "blk.3.attn_v.weight"), DType::kQ4_K);
  EXPECT_EQ(planned_type(p, "blk.5.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(planned_type(p, "blk.27.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(planned_type(p, "blk.3.attn_q.weight"), DType::kQ4_K);
  EXPECT_EQ(planned_type(p, "blk.3.attn_q_norm.weight"), DType::kF32);
  p = plan_model_tensors(q, ModelFileType::kQ8_0, false).value();
  EXPECT_EQ(planned_type(p, "token_embd.weight"), DType::kQ8_0);
  p = plan_model_tensors(q, ModelFileType::kF16, false).value();
  EXPECT_EQ(planned_type(p, "token_embd.weight"), DType::kF16);
  EXPECT_EQ(planned_type(p, "output_norm.weight"), DType::kF32);
  // A row that fits no block: 48 values for Q4_0.
  auto bad = plan_model_tensors(parse_model_shape("custom:dim=48,heads=4").value(),
                                ModelFileType::kQ4_0, false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("not a multiple"), std::string::npos);
}

TEST(GgufStreamWriter, MatchesGgufWriterBytes) {
  TempDir dir;
  std::vector<float> a(6), b(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f * i;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -1.0f * i;
  GgufWriter ref;
  ref.set_string("general.architecture", "llama");
  ref.set_u32("n", 7);
  ref.set_string_array("toks", {"a", "bc"});
  ref.add_tensor("a", DType::kF32, {2, 3}, a.data());
  ref.add_tensor("b", DType::kF32, {64}, b.data());
  GgufStreamWriter w;
  w.set("general.architecture", gguf_str("llama"));
  w.set("n", gguf_u32(7));
  w.set("toks", gguf_str_array({"a", "bc"}));
  auto rows_of = [](const std::vector<float>& v, int64_t cols) {
    return [&v, cols](int64_t r0, int64_t n, uint8_t* out) {
      std::memcpy(out, v.data() + r0 * cols, n * cols * sizeof(float));
    };
  };
  w.add_tensor("a", DType::kF32, {2, 3}, rows_of(a, 3));
  w.add_tensor("b", DType::kF32, {64}, rows_of(b, 64));
  w.set_chunk_bytes(1);  // one row per call
  ASSERT_TRUE(w.write(dir.file("s.gguf")));
  EXPECT_EQ(read_bytes(dir.file("s.gguf")), ref.serialize());
  EXPECT_EQ(w.file_size(), ref.serialize().size());
  // A producer's exception becomes an error naming the tensor, and no file is left behind.
  GgufStreamWriter bad;
  bad.add_tensor("x", DType::kF32, {4}, [](int64_t, int64_t, uint8_t*) { throw Error("boom"); });
  const Status st = bad.write(dir.file("bad.gguf"));
  EXPECT_NE(st.message().find("'x'"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("bad.gguf")));
}

TEST(RandomModel, LlamaF32RoundTripsThroughModelLoad) {
  TempDir dir;
  GenModelOptions o;
  o.shape = tiny_shape("llama");
  o.type = ModelFileType::kF32;
  GenModelStats stats;
  ASSERT_TRUE(write_random_model(o, dir.file("m.gguf"), &stats));
  auto m = Model::load(dir.file("m.gguf"));
  ASSERT_TRUE(m) << m.status().message();
  const ModelConfig& c = m.value()->config();
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_vocab, 300);
  EXPECT_EQ(c.ffn_dim, 96);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(m.value()->n_params(), stats.n_params);
  EXPECT_EQ(stats.n_params, model_shape_params(o.shape));
  const LayerWeights& l0 = m.value()->weights().layers[0];
  EXPECT_EQ(l0.w_gate.shape(), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(l0.w_down.shape(), (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(l0.wq.dtype(), DType::kF32);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(l0.attn_norm.data_as<float>()[i], 1.0f);
  const auto [mean, sd] = moments(m.value()->weights().tok_embd);  // 19200 values
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.001);
  const GgufFile& g = m.value()->gguf();
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "llama");
  ASSERT_NE(g.get_string_array("tokenizer.ggml.tokens"), nullptr);
  const auto& toks = *g.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(toks.size(), 300u);
  EXPECT_EQ(std::set<std::string>(toks.begin(), toks.end()).size(), 300u);
  EXPECT_EQ(toks[3 + '\n'], "<0x0A>");
  EXPECT_EQ(g.get_int("general.file_type"), 0);
}

TEST(RandomModel, Qwen3Q8RoundTripsWithByteLevelVocab) {
  TempDir dir;
  GenModelOptions o;
  o.shape = tiny_shape("qwen3");
  o.type = ModelFileType::kQ8_0;
  ASSERT_TRUE(write_random_model(o, dir.file("q.gguf")));
  // The file's own layout (loading repacks Q8_0 to Q8_0x8 otherwise).
  setenv("NEXUS_REPACK", "0", 1);
  auto m = Model::load(dir.file("q.gguf"));
  unsetenv("NEXUS_REPACK");
  ASSERT_TRUE(m) << m.status().message();
  const ModelConfig& c = m.value()->config();
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_kv_heads, 2);
  const LayerWeights& l1 = m.value()->weights().layers[1];
  EXPECT_EQ(l1.wq.shape(), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(l1.wq.dtype(), DType::kQ8_0);
  EXPECT_FALSE(l1.q_norm.empty());
  EXPECT_EQ(m.value()->weights().tok_embd.dtype(), DType::kQ8_0);
  const auto [mean, sd] = moments(m.value()->weights().tok_embd);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 0.02, 0.001);
  const GgufFile& g = m.value()->gguf();
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "qwen2");
  const auto& toks = *g.get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(toks.size(), 320u);
  EXPECT_EQ(std::set<std::string>(toks.begin(), toks.end()).size(), 320u);
  EXPECT_EQ(toks['A'], "A");
  EXPECT_EQ(toks['\n'], "\xC4\x8A");  // GPT-2's byte-level newline, U+010A
  EXPECT_EQ(toks.back(), "<|im_end|>");
  ASSERT_NE(g.get_string_array("tokenizer.ggml.merges"), nullptr);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.merges")->size(), 320u - 256 - 3);
  EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 319);
}

TEST(RandomModel, BytesDependOnSeedNotThreadsOrChunks) {
  TempDir dir;
  GenModelOptions o;
  o.shape = tiny_shape("llama");
  o.type = ModelFileType::kF16;
  ASSERT_TRUE(write_random_model(o, dir.file("a.gguf")));
  o.n_threads = 3;
  o.chunk_bytes = 1000;
  ASSERT_TRUE(write_random_model(o, dir.file("b.gguf")));
  o.seed = 2;
  ASSERT_TRUE(write_random_model(o, dir.file("c.gguf")));
  EXPECT_EQ(read_bytes(dir.file("a.gguf")), read_bytes(dir.file("b.gguf")));
  EXPECT_NE(read_bytes(dir.file("a.gguf")), read_bytes(dir.file("c.gguf")));
}

class BenchRun : public ::testing::Test {
 protected:
  void SetUp() override {
    GenModelOptions o;
    o.shape = tiny_shape("llama");
    ASSERT_TRUE(write_random_model(o, dir_.file("m.gguf")));
    model_ = std::move(Model::load(dir_.file("m.gguf"))).value();
    info_ = describe_model(*model_, "m.gguf");
  }
  TempDir dir_;
  std::unique_ptr<Model> model_;
  BenchModelInfo info_;
};

TEST_F(BenchRun, DescribesTheModel) {
  EXPECT_EQ(info_.type, "llama 89K F32");
  EXPECT_EQ(info_.n_params, model_shape_params(tiny_shape("llama")));
  EXPECT_EQ(info_.size, model_->weight_bytes());
}

TEST_F(BenchRun, BytesPerTokenCountsWeightsOncePerStepAndTheKvCache) {
  // Tied f32 model: every tensor read per step (token_embd as the head) + one embedding row per
  // token; K and V rows of 64 f16 values per layer, (n_gen + 1) / 2 positions on average.
  const double weights = static_cast<double>(model_->weight_bytes());
  const double row = 64 * 4;
  const double kv = 2 * 2 * (64 * 2) * (16 + 1) / 2.0;
  EXPECT_NEAR(tg_bytes_per_token(*model_, 16, 1, DType::kF16), weights + row + kv, 1e-6);
  EXPECT_NEAR(tg_bytes_per_token(*model_, 16, 4, DType::kF16), weights / 4 + row + kv, 1e-6);
  // After a context of 100 tokens every generated token also reads those 100 rows.
  const double kv_depth = 2 * 2 * (64 * 2) * (100 + (16 + 1) / 2.0);
  EXPECT_NEAR(tg_bytes_per_token(*model_, 16, 1, DType::kF16, 100), weights + row + kv_depth, 1e-6);
}

TEST_F(BenchRun, DepthRunsAfterAnUntimedContext) {
  BenchOptions opts;
  opts.repetitions = 1;
  BenchTest tg{0, 4, 2, 1};
  auto plain = run_bench_test(*model_, info_, tg, opts);
  ASSERT_TRUE(plain) << plain.status().message();
  // 600 tokens of context: two fill batches of 512 and 88 per sequence, then positions 600-603.
  tg.n_depth = 600;
  auto deep = run_bench_test(*model_, info_, tg, opts);
  ASSERT_TRUE(deep) << deep.status().message();
  EXPECT_EQ(deep->test_name(), "tg4 x2 @ d600");
  EXPECT_EQ(deep->n_batch, 2);
  // The cache holds the context and the generated tokens of both sequences.
  EXPECT_EQ(deep->kv_bytes, plain->kv_bytes / 4 * 604);
  // Only the generated tokens are timed and counted.
  EXPECT_NEAR(deep->samples_ts[0], 8 * 1e9 / deep->samples_ns[0], 1e-6 * deep->samples_ts[0]);
  EXPECT_NEAR(deep->bytes_per_token, tg_bytes_per_token(*model_, 4, 2, DType::kF16, 600), 1e-9);
  auto pp = run_bench_test(*model_, info_, {8, 0, 1, 1, 40}, opts);
  ASSERT_TRUE(pp) << pp.status().message();
  EXPECT_EQ(pp->test_name(), "pp8 @ d40");
  EXPECT_EQ(pp->n_batch, 8);
  const auto j = nlohmann::json::parse(bench_to_json({deep.value(), pp.value()}, {"a", "b"}));
  EXPECT_EQ(j[0]["n_depth"], 600);
  EXPECT_EQ(j[1]["n_depth"], 40);
  EXPECT_EQ(j[1]["test"], "pp8 @ d40");
  EXPECT_FALSE(run_bench_test(*model_, info_, {0, 4, 1, 1, -1}, opts));
}

TEST_F(BenchRun, RunsPpAndBatchedTgAndFormatsResults) {
  BenchOptions opts;
  opts.repetitions = 2;
  opts.bandwidth_gbps = 10;
  std::vector<std::string> seen;
  opts.progress = [&seen](const std::string& s) { seen.push_back(s); };
  auto pp = run_bench_test(*model_, info_, {8, 0, 1, 1}, opts);
  ASSERT_TRUE(pp) << pp.status().message();
  EXPECT_EQ(seen, (std::vector<std::string>{"warm-up", "run 1/2", "run 2/2"}));
  auto tg = run_bench_test(*model_, info_, {0, 4, 3, 2}, opts);
  ASSERT_TRUE(tg) << tg.status().message();
  for (const BenchResult* r : {&pp.value(), &tg.value()}) {
    EXPECT_EQ(r->samples_ns.size(), 2u);
    EXPECT_EQ(r->samples_ts.size(), 2u);
    EXPECT_GT(r->avg_ts, 0);
    EXPECT_GE(r->stddev_ts, 0);
    EXPECT_GT(r->avg_ns, 0u);
    EXPECT_GT(r->peak_rss_bytes, 0u);
  }
  EXPECT_EQ(pp->test_name(), "pp8");
  EXPECT_EQ(pp->n_batch, 8);
  EXPECT_EQ(tg->test_name(), "tg4 x3");
  EXPECT_EQ(tg->n_batch, 3);
  // tokens/s of a sample = tokens / seconds: 4 steps x 3 sequences for tg.
  EXPECT_NEAR(tg->samples_ts[0], 12 * 1e9 / tg->samples_ns[0], 1e-6 * tg->samples_ts[0]);
  EXPECT_GT(tg->bound_ts, 0);
  EXPECT_NEAR(tg->bound_fraction, tg->avg_ts / tg->bound_ts, 1e-12);

  const BenchEnv env{"abc1234", "Test CPU"};
  const auto j = nlohmann::json::parse(bench_to_json({pp.value(), tg.value()}, env));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const char* f :
       {"build_commit",   "cpu_info",       "model_filename",  "model_type", "model_size",
        "model_n_params", "n_batch",        "n_ubatch",        "n_threads",  "type_k",
        "type_v",         "n_prompt",       "n_gen",           "test_time",  "avg_ns",
        "stddev_ns",      "avg_ts",         "stddev_ts",       "samples_ns", "samples_ts",
        "n_seq",          "peak_rss_bytes", "bytes_per_token", "bound_ts"})
    EXPECT_TRUE(j[0].contains(f)) << f;
  EXPECT_EQ(j[0]["n_prompt"], 8);
  EXPECT_EQ(j[0]["n_gen"], 0);
  EXPECT_TRUE(j[0]["bytes_per_token"].is_null());
  EXPECT_EQ(j[1]["n_gen"], 4);
  EXPECT_EQ(j[1]["n_seq"], 3);
  EXPECT_EQ(j[1]["n_threads"], 2);
  EXPECT_EQ(j[1]["type_k"], "f16");
  EXPECT_EQ(j[1]["build_commit"], "abc1234");
  EXPECT_GT(j[1]["bytes_per_token"].get<double>(), 0);

  const std::string csv = bench_to_csv({pp.value(), tg.value()}, env);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_EQ(csv.rfind("build_commit,cpu_info,", 0), 0u);
  const std::string md = bench_to_markdown({pp.value(), tg.value()}, env);
  EXPECT_NE(md.find("| model"), std::string::npos);
  EXPECT_NE(md.find("| tg4 x3"), std::string::npos);
  EXPECT_NE(md.find("build: abc1234"), std::string::npos);
}

TEST_F(BenchRun, RejectsImpossibleTests) {
  BenchOptions opts;
  EXPECT_FALSE(run_bench_test(*model_, info_, {0, 0, 1, 1}, opts));
  opts.repetitions = 0;
  EXPECT_FALSE(run_bench_test(*model_, info_, {8, 0, 1, 1}, opts));
}

}  // namespace
}  // namespace nexus
