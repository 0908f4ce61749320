// convert_hf against the golden models: each Hugging Face folder in tests/fixtures/hf (written by
// scripts/gen_hf_fixtures.py from the same weights as tests/fixtures/models/NAME.gguf, in
// transformers' layouts) must convert to the same tensors as that GGUF, bit for bit, and its
// logits must match the PyTorch reference. Then the weight types: the converter's default, --type,
// and BF16 / F16 checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "golden/reference_logits.h"
#include "nexus/compress/hf_convert.h"
#include "nexus/context.h"
#include "nexus/io/gguf.h"
#include "nexus/io/safetensors.h"
#include "nexus/model.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string hf_dir(const std::string& name) { return test::fixtures_dir() + "/hf/" + name; }
std::string model_path(const std::string& name, const char* ext) {
  return test::fixtures_dir() + "/models/" + name + ext;
}

// Converts `dir` and parses the result (the image is kept alive by the file).
Result<std::shared_ptr<const GgufFile>> convert(const std::string& dir, std::optional<DType> type) {
  HfConvertOptions opt;
  opt.type = type;
  auto r = convert_hf(dir, opt);
  if (!r) return r.status();
  auto image = std::make_shared<std::vector<uint8_t>>(r->writer.serialize());
  auto g = GgufFile::parse(*image, image, dir);
  if (!g) return g.status();
  return std::make_shared<const GgufFile>(std::move(g).value());
}

class HfGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(HfGolden, SameTensorsAsTheGgufFixture) {
  const std::string name = GetParam();
  auto got = convert(hf_dir(name), DType::kF32);
  ASSERT_TRUE(got) << got.status().message();
  auto want = GgufFile::open(model_path(name, ".gguf"));
  ASSERT_TRUE(want) << want.status().message();
  const GgufFile& g = *got.value();
  ASSERT_EQ(g.tensors().size(), want->tensors().size());
  for (const GgufTensorInfo& w : want->tensors()) {
    SCOPED_TRACE(w.name);
    const GgufTensorInfo* t = g.find_tensor(w.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, DType::kF32);
    EXPECT_EQ(t->shape, w.shape);
    ASSERT_EQ(t->nbytes, w.nbytes);
    EXPECT_EQ(std::memcmp(t->data, w.data, w.nbytes), 0) << "bytes differ";
  }
  // The hyper-parameters the loader reads agree with the fixture's.
  const std::string a = *want->get_string("general.architecture");
  EXPECT_EQ(g.get_string("general.architecture"), a);
  EXPECT_EQ(g.get_int("general.file_type"), 0);
  for (const char* key :
       {".context_length", ".embedding_length", ".block_count", ".feed_forward_length",
        ".attention.head_count", ".attention.head_count_kv", ".attention.key_length"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(g.get_int(a + key), want->get_int(a + key));
  }
  for (const char* key :
       {".rope.freq_base", ".attention.layer_norm_rms_epsilon", ".attention.layer_norm_epsilon"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(g.get_float(a + key).has_value(), want->get_float(a + key).has_value());
    if (want->get_float(a + key) && g.get_float(a + key)) {
      EXPECT_FLOAT_EQ(*g.get_float(a + key), *want->get_float(a + key));
    }
  }
}

// Both reference sequences decoded in one batch by `model`, every row compared with the
// reference: an error counts when it exceeds abs_tol + rel_tol * |reference|.
::testing::AssertionResult matches_reference(const Model& model, const test::Reference& ref,
                                             int n_ctx, double abs_tol, double rel_tol,
                                             const std::string& what) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.n_seq = 2;
  o.kv_type = DType::kF32;
  auto ctx = Context::create(model, o);
  if (!ctx) return ::testing::AssertionFailure() << what << ": " << ctx.status().message();
  Batch b;
  for (int s = 0; s < 2; ++s)
    for (size_t p = 0; p < ref.tokens[s].size(); ++p)
      b.add(ref.tokens[s][p], static_cast<int32_t>(p), s, true);
  std::vector<float> logits;
  if (Status st = (*ctx)->decode(b, &logits); !st)
    return ::testing::AssertionFailure() << what << ": " << st.message();
  size_t row = 0, bad = 0;
  double worst = 0;
  for (int s = 0; s < 2; ++s)
    for (size_t p = 0; p < ref.tokens[s].size(); ++p, ++row)
      for (int32_t v = 0; v < ref.n_vocab; ++v) {
        const double w = ref.row(s, static_cast<int>(p))[v];
        const double err = std::fabs(logits[row * ref.n_vocab + v] - w);
        worst = std::max(worst, err);
        bad += !(err <= abs_tol + rel_tol * std::fabs(w));
      }
  std::printf("  %-18s max |err| %.3g over %zu rows\n", what.c_str(), worst, row);
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " logits out of tolerance, worst |err| " << worst;
}

TEST_P(HfGolden, LogitsMatchTheReference) {
  const std::string name = GetParam();
  auto got = convert(hf_dir(name), DType::kF32);
  ASSERT_TRUE(got) << got.status().message();
  auto model = Model::from_gguf(got.value());
  ASSERT_TRUE(model) << model.status().message();
  auto ref = test::read_reference(model_path(name, ".logits.bin"));
  ASSERT_TRUE(ref) << ref.status().message();
  ASSERT_EQ((*model)->config().n_vocab, ref->n_vocab);
  // The golden test's F32 tolerance.
  EXPECT_TRUE(matches_reference(**model, *ref, 64, 1e-4, 1e-5, name));
}

// The vocabulary loads as a nexus tokenizer and, for the byte-level ones, tokenizes like the
// tokenizer.json it came from.
TEST_P(HfGolden, VocabularyLoads) {
  const std::string name = GetParam();
  auto got = convert(hf_dir(name), DType::kF32);
  ASSERT_TRUE(got) << got.status().message();
  auto tok = Tokenizer::from_gguf(*got.value());
  ASSERT_TRUE(tok) << tok.status().message();
  const GgufFile& g = *got.value();
  EXPECT_EQ((*tok)->n_vocab(),
            static_cast<int64_t>(g.get_string_array("tokenizer.ggml.tokens")->size()));
  const bool llama = std::string(name).rfind("llama", 0) == 0;
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), llama ? "llama" : "gpt2");
  if (llama) {
    EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 1);
    EXPECT_EQ(g.get_int("tokenizer.ggml.eos_token_id"), 2);
    EXPECT_EQ(g.get_int("tokenizer.ggml.unknown_token_id"), 0);
    EXPECT_EQ(g.get_int("tokenizer.ggml.add_bos_token"), 1);
    // "aaa" is "▁aa" + "a": the merges' order reaches the longest piece.
    const auto ids = (*tok)->encode("aa a", false);
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->at(ids[0]),
              "\xE2\x96\x81"
              "aa");
    return;
  }
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), name == std::string("gpt2") ? "gpt-2" : "qwen2");
  EXPECT_FALSE(g.get_string_array("tokenizer.ggml.merges")->empty());
  std::ifstream in(hf_dir(name) + "/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto hf = Tokenizer::from_hf_json(ss.str(), "", "tokenizer.json");
  ASSERT_TRUE(hf) << hf.status().message();
  for (const char* text : {"the other set", "Hi! tests are [short]", "  oh\n\nhe"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ((*tok)->encode(text, false), (*hf)->encode(text, false));
  }
  if (name != std::string("gpt2")) {
    EXPECT_NE(g.get_string("tokenizer.chat_template").value_or("").find("<|im_start|>"),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfGolden,
                         ::testing::Values("llama_gqa_tied", "llama_untied", "qwen2", "qwen3",
                                           "gpt2"),
                         [](const auto& info) { return std::string(info.param); });

// Weight types: F16 by default for an F32 checkpoint (the converter's "auto"); --type applies the
// convert -i path (Q8_0 here, with norms and biases kept F32).
TEST(HfConvert, DefaultTypeAndQuantization) {
  auto f16 = convert(hf_dir("qwen2"), std::nullopt);
  ASSERT_TRUE(f16) << f16.status().message();
  EXPECT_EQ(f16.value()->find_tensor("blk.0.attn_q.weight")->dtype, DType::kF16);
  EXPECT_EQ(f16.value()->find_tensor("blk.0.attn_q.bias")->dtype, DType::kF32);
  EXPECT_EQ(f16.value()->find_tensor("output_norm.weight")->dtype, DType::kF32);
  EXPECT_EQ(f16.value()->get_int("general.file_type"), 1);  // MOSTLY_F16
  auto q8 = convert(hf_dir("qwen2"), DType::kQ8_0);
  ASSERT_TRUE(q8) << q8.status().message();
  EXPECT_EQ(q8.value()->find_tensor("blk.1.ffn_up.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(q8.value()->find_tensor("blk.1.ffn_norm.weight")->dtype, DType::kF32);
  EXPECT_EQ(q8.value()->get_int("general.file_type"), 7);  // MOSTLY_Q8_0
}

// qwen3_bf16 is qwen3 rounded to BF16 by torch (scripts/gen_hf_fixtures.py): converted with the
// default type, every matrix must hold the bits nexus's own rounding gives the F32 weights (both
// round to nearest even), every vector the same values widened to F32, and the model must run.
TEST(HfConvert, TorchBf16CheckpointMatchesNexusRounding) {
  auto got = convert(hf_dir("qwen3_bf16"), std::nullopt);
  ASSERT_TRUE(got) << got.status().message();
  const GgufFile& g = *got.value();
  EXPECT_EQ(g.get_int("general.file_type"), 32);  // MOSTLY_BF16
  auto want = GgufFile::open(model_path("qwen3", ".gguf"));
  ASSERT_TRUE(want) << want.status().message();
  ASSERT_EQ(g.tensors().size(), want->tensors().size());
  for (const GgufTensorInfo& w : want->tensors()) {
    SCOPED_TRACE(w.name);
    const GgufTensorInfo* t = g.find_tensor(w.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, w.shape.size() >= 2 ? DType::kBF16 : DType::kF32);
    size_t bad = 0;
    for (size_t i = 0; i < w.nbytes / 4; ++i) {
      float x;
      std::memcpy(&x, w.data + 4 * i, 4);
      if (t->dtype == DType::kBF16) {
        uint16_t v;
        std::memcpy(&v, t->data + 2 * i, 2);
        bad += v != f32_to_bf16(x);
      } else {
        float y;
        std::memcpy(&y, t->data + 4 * i, 4);
        bad += y != bf16_to_f32(f32_to_bf16(x));
      }
    }
    EXPECT_EQ(bad, 0u);
  }
  auto model = Model::from_gguf(got.value());
  ASSERT_TRUE(model) << model.status().message();
  ContextOptions o;
  o.n_ctx = 16;
  auto ctx = Context::create(**model, o);
  ASSERT_TRUE(ctx) << ctx.status().message();
  Batch b;
  for (int32_t p = 0; p < 4; ++p) b.add(p + 10, p, 0, true);
  std::vector<float> logits;
  ASSERT_TRUE((*ctx)->decode(b, &logits));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// A real checkpoint written by transformers and the safetensors library (mozilla-ai/lm-buddy's
// tiny GPT2Model, tests/fixtures/hf/lm_buddy_tiny_gpt2, with GPT-2's slow tokenizer files): its
// logits and greedy continuation against scripts/gen_hf_real_reference.py's PyTorch forward pass.
TEST(HfConvertReal, LmBuddyTinyGpt2) {
  const std::string dir = hf_dir("lm_buddy_tiny_gpt2");
  auto st = SafetensorsFile::open(dir + "/model.safetensors");
  ASSERT_TRUE(st) << st.status().message();
  EXPECT_EQ(st->tensors().size(), 16u);
  EXPECT_EQ(st->metadata().at("format"), "pt");
  ASSERT_NE(st->find("h.0.attn.c_attn.weight"), nullptr);
  EXPECT_EQ(st->find("h.0.attn.c_attn.weight")->shape, (std::vector<int64_t>{2, 6}));

  auto got = convert(dir, DType::kF32);
  ASSERT_TRUE(got) << got.status().message();
  const GgufFile& g = *got.value();
  EXPECT_EQ(g.get_string("general.architecture"), "gpt2");
  EXPECT_EQ(g.get_int("gpt2.context_length"), 1024);
  EXPECT_EQ(g.get_int("gpt2.feed_forward_length"), 8);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  ASSERT_NE(g.find_tensor("blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("blk.0.attn_qkv.weight")->shape, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(g.get_int("tokenizer.ggml.bos_token_id"), 20);
  EXPECT_EQ(g.get_int("tokenizer.ggml.unknown_token_id"), 19);
  EXPECT_EQ(g.get_int("tokenizer.ggml.add_bos_token"), 0);
  auto tok = Tokenizer::from_gguf(g);
  ASSERT_TRUE(tok) << tok.status().message();
  // transformers' own GPT-2 tokenizer test: " lower newer" in this vocabulary.
  EXPECT_EQ((*tok)->encode(" lower newer", false), (std::vector<int32_t>{14, 15, 10, 9, 3, 2, 15}));

  auto model = Model::from_gguf(got.value());
  ASSERT_TRUE(model) << model.status().message();
  auto ref = test::read_reference(test::fixtures_dir() + "/hf/lm_buddy_tiny_gpt2.logits.bin");
  ASSERT_TRUE(ref) << ref.status().message();
  // The logits are small (|logit| < 0.08, the model is untrained), so the bound is absolute and
  // tight: float32 rounding of the forward pass is ~1e-8 here.
  EXPECT_TRUE(matches_reference(**model, *ref, 32, 1e-6, 0.0, "lm_buddy_tiny_gpt2"));

  // Greedy decoding from the prompt the reference continued.
  std::ifstream in(test::fixtures_dir() + "/hf/lm_buddy_tiny_gpt2.json");
  const json j = json::parse(in);
  const auto prompt = j.at("greedy_prompt").get<std::vector<int32_t>>();
  const auto want = j.at("greedy").get<std::vector<int32_t>>();
  ContextOptions o1;
  o1.n_ctx = 32;
  auto c1 = Context::create(**model, o1);
  ASSERT_TRUE(c1) << c1.status().message();
  Batch b;
  std::vector<float> logits;
  for (size_t p = 0; p < prompt.size(); ++p)
    b.add(prompt[p], static_cast<int32_t>(p), 0, p + 1 == prompt.size());
  std::vector<int32_t> greedy;
  for (size_t step = 0; step < want.size(); ++step) {
    ASSERT_TRUE((*c1)->decode(b, &logits));
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.end() - ref->n_vocab, logits.end()) -
                             (logits.end() - ref->n_vocab));
    greedy.push_back(next);
    b.clear();
    b.add(next, static_cast<int32_t>(prompt.size() + step), 0, true);
  }
  EXPECT_EQ(greedy, want);
}

// A checkpoint stored in BF16 (or F16) converts to BF16 (F16) matrices by default, each value the
// checkpoint's; vectors become F32 holding the same values.
class HfConvertHalf : public ::testing::TestWithParam<DType> {};

TEST_P(HfConvertHalf, HalfCheckpointsKeepTheirType) {
  const DType half = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("nexus_hf_half_" + std::to_string(getpid()) +
                                                    "_" + std::string(dtype_name(half)));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(hf_dir("qwen3") + "/" + f, dir / f);
  // Rewrite model.safetensors with every tensor rounded to `half`.
  auto src = SafetensorsFile::open(hf_dir("qwen3") + "/model.safetensors");
  ASSERT_TRUE(src) << src.status().message();
  json header = json::object();
  std::vector<uint8_t> data;
  for (const SafetensorsTensor& t : src->tensors()) {
    const size_t begin = data.size();
    for (int64_t i = 0; i < t.numel(); ++i) {
      float x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      const uint16_t h = half == DType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x);
      data.push_back(static_cast<uint8_t>(h));
      data.push_back(static_cast<uint8_t>(h >> 8));
    }
    header[t.name] = {{"dtype", half == DType::kBF16 ? "BF16" : "F16"},
                      {"shape", t.shape},
                      {"data_offsets", {begin, data.size()}}};
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t n = h.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
  }
  auto got = convert(dir.string(), std::nullopt);
  ASSERT_TRUE(got) << got.status().message();
  const GgufFile& g = *got.value();
  EXPECT_EQ(g.get_int("general.file_type"), half == DType::kBF16 ? 32 : 1);
  const GgufTensorInfo* q = g.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, half);
  const SafetensorsTensor* hq = src->find("model.layers.0.self_attn.q_proj.weight");
  for (int64_t i = 0; i < hq->numel(); i += 37) {
    float x;
    std::memcpy(&x, hq->bytes.data() + 4 * i, 4);
    uint16_t v;
    std::memcpy(&v, q->data + 2 * i, 2);
    EXPECT_EQ(v, half == DType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x)) << i;
  }
  const GgufTensorInfo* qn = g.find_tensor("blk.0.attn_q_norm.weight");
  ASSERT_NE(qn, nullptr);
  EXPECT_EQ(qn->dtype, DType::kF32);
  float x, y;
  std::memcpy(&x, src->find("model.layers.0.self_attn.q_norm.weight")->bytes.data(), 4);
  std::memcpy(&y, qn->data, 4);
  EXPECT_EQ(y, half == DType::kBF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x)));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, HfConvertHalf, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace nexus
