// llama2.c import: tensor layout and names on a synthetic checkpoint, header and tokenizer
// validation, and bit-exact agreement with the shared stories260K.gguf.
#include <gtest/gtest.h>

#include <cstring>

#include "nexus/io/llama2c.h"
#include "nexus/io/mapped_file.h"
#include "test_paths.h"

namespace nexus {
namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
void append(Bytes& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &v, sizeof(T));
}

// A checkpoint whose i-th float is i, so every value names its position in the file.
Bytes checkpoint(std::vector<int32_t> h) {
  Bytes out;
  for (int32_t v : h) append(out, v);
  const int64_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
  const int64_t vocab = std::abs(h[5]), seq = h[6], head_dim = dim / heads;
  const int64_t kv = kv_heads * head_dim;
  const int64_t n = vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * kv) +
                    layers * 3 * dim * hidden + dim + seq * head_dim + (h[5] < 0 ? vocab * dim : 0);
  for (int64_t i = 0; i < n; ++i) append(out, static_cast<float>(i));
  return out;
}

Bytes tokenizer(const std::vector<std::string>& tokens, int32_t max_len = 8) {
  Bytes out;
  append(out, max_len);
  for (size_t i = 0; i < tokens.size(); ++i) {
    append(out, -static_cast<float>(i));
    append(out, static_cast<int32_t>(tokens[i].size()));
    out.insert(out.end(), tokens[i].begin(), tokens[i].end());
  }
  return out;
}

const std::vector<std::string> kTokens = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", " the", ""};
const std::vector<int32_t> kSeparate = {8, 12, 2, 2, 1, -6, 4};  // head_dim 4, kv_dim 4

Result<GgufFile> import_and_parse(const Bytes& ckpt, const Bytes& tok, Bytes* image) {
  auto w = import_llama2c(ckpt, tok, "ckpt", "tok", "tiny");
  if (!w) return w.status();
  *image = w->serialize();
  return GgufFile::parse(*image, nullptr, "out");
}

float first(const GgufFile& g, const std::string& name) {
  const GgufTensorInfo* t = g.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return -1;
  float f;
  std::memcpy(&f, t->data, sizeof(f));
  return f;
}

TEST(Llama2c, SyntheticCheckpointLayout) {
  Bytes img;
  auto g = import_and_parse(checkpoint(kSeparate), tokenizer(kTokens), &img);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->tensors().size(), 2u * 9 + 3);
  EXPECT_EQ(g->find_tensor("blk.1.attn_k.weight")->shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(g->find_tensor("blk.0.ffn_down.weight")->shape, (std::vector<int64_t>{8, 12}));
  EXPECT_EQ(g->find_tensor("output.weight")->shape, (std::vector<int64_t>{6, 8}));
  // Offsets (in floats) of each array in run.c's order for dim 8, hidden 12, 2 layers, kv_dim 4.
  const float emb = 0, rms_att = 48, wq = 64, wk = 192, wv = 256, wo = 320, rms_ffn = 448;
  const float w1 = 464, w2 = 656, w3 = 848, rms_final = 1040, wcls = 1040 + 8 + 16;
  EXPECT_EQ(first(*g, "token_embd.weight"), emb);
  EXPECT_EQ(first(*g, "blk.1.attn_norm.weight"), rms_att + 8);
  EXPECT_EQ(first(*g, "blk.1.attn_q.weight"), wq + 64);
  EXPECT_EQ(first(*g, "blk.1.attn_k.weight"), wk + 32);
  EXPECT_EQ(first(*g, "blk.1.attn_v.weight"), wv + 32);
  EXPECT_EQ(first(*g, "blk.1.attn_output.weight"), wo + 64);
  EXPECT_EQ(first(*g, "blk.1.ffn_norm.weight"), rms_ffn + 8);
  EXPECT_EQ(first(*g, "blk.1.ffn_gate.weight"), w1 + 96);
  EXPECT_EQ(first(*g, "blk.1.ffn_down.weight"), w2 + 96);
  EXPECT_EQ(first(*g, "blk.1.ffn_up.weight"), w3 + 96);
  EXPECT_EQ(first(*g, "output_norm.weight"), rms_final);
  EXPECT_EQ(first(*g, "output.weight"), wcls);
  EXPECT_EQ(g->get_int("llama.rope.dimension_count"), 4);
  EXPECT_EQ(g->get_int("llama.attention.head_count_kv"), 1);
  EXPECT_EQ(g->get_int("llama.context_length"), 4);
  EXPECT_EQ(g->get_string("general.name"), "tiny");
}

TEST(Llama2c, SharedClassifierHasNoOutputTensor) {
  std::vector<int32_t> h = kSeparate;
  h[5] = 6;
  Bytes img;
  auto g = import_and_parse(checkpoint(h), tokenizer(kTokens), &img);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g->tensors().size(), 2u * 9 + 2);
}

TEST(Llama2c, TokenizerConventions) {
  auto v = parse_llama2c_tokenizer(tokenizer(kTokens), 6, "tok");
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v->tokens,
            (std::vector<std::string>{"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81the", ""}));
  EXPECT_EQ(v->types, (std::vector<int64_t>{2, 3, 3, 6, 1, 3}));
  EXPECT_EQ(v->scores[4], -4.0);
}

std::string config_error(const Bytes& ckpt) {
  auto r = parse_llama2c_config(ckpt, "ckpt");
  EXPECT_FALSE(r);
  return r ? std::string() : r.status().message();
}

TEST(Llama2c, HeaderValidation) {
  struct Case {
    int field;
    int32_t value;
    const char* message;
  };
  const Case cases[] = {
      {0, 0, "header at offset 0: dim = 0 is not a positive count"},
      {2, -1, "header at offset 8: n_layers = -1 is not a positive count"},
      {5, 0, "header at offset 20: vocab_size = 0 is not a positive count"},
      {6, -5, "header at offset 24: seq_len = -5 is not a positive count"},
      {3, 3, "n_heads 3 does not divide dim 8"},
      {4, 3, "n_kv_heads 3 does not divide n_heads 2"},
      {3, 8, "head dimension 1 is odd"},
      {5, 2, "vocab_size 2 is too small"},
  };
  for (const Case& c : cases) {
    Bytes ckpt = checkpoint(kSeparate);
    std::memcpy(ckpt.data() + 4 * c.field, &c.value, 4);
    const std::string e = config_error(ckpt);
    EXPECT_NE(e.find("llama2c: ckpt: "), std::string::npos) << e;
    EXPECT_NE(e.find(c.message), std::string::npos) << e;
  }
}

TEST(Llama2c, FileSizeMustMatchTheHeader) {
  Bytes ckpt = checkpoint(kSeparate);
  const size_t n = ckpt.size();
  ckpt.resize(n - 4);
  std::string e = config_error(ckpt);
  EXPECT_NE(e.find("file is " + std::to_string(n - 4) + " bytes but the header (dim=8, " +
                   "hidden_dim=12, n_layers=2, n_heads=2, n_kv_heads=1, vocab_size=6 (separate " +
                   "classifier), seq_len=4) implies " + std::to_string(n)),
            std::string::npos)
      << e;
  ckpt.resize(n + 4);
  EXPECT_NE(config_error(ckpt).find("implies " + std::to_string(n)), std::string::npos);
  EXPECT_NE(config_error(Bytes(10)).find("shorter than the 28-byte llama2.c header"),
            std::string::npos);
  // A header claiming an enormous model is rejected without overflowing the size arithmetic.
  Bytes huge;
  for (int32_t v : {1 << 30, INT32_MAX, INT32_MAX, 1 << 20, 1 << 20, INT32_MAX, INT32_MAX})
    append(huge, v);
  EXPECT_NE(config_error(huge).find("implies more than 2^60 floats"), std::string::npos);
}

TEST(Llama2c, OtherFormatsAreNamed) {
  Bytes ckpt = checkpoint(kSeparate);
  std::memcpy(ckpt.data(), "24ka", 4);
  EXPECT_NE(config_error(ckpt).find("versioned llama2.c export (magic 'ak42')"), std::string::npos);
  std::memcpy(ckpt.data(), "GGUF", 4);
  EXPECT_NE(config_error(ckpt).find("is a GGUF file"), std::string::npos);
}

std::string tokenizer_error(const Bytes& tok, int32_t vocab = 6) {
  auto r = parse_llama2c_tokenizer(tok, vocab, "tok");
  EXPECT_FALSE(r);
  return r ? std::string() : r.status().message();
}

TEST(Llama2c, TokenizerValidation) {
  const Bytes tok = tokenizer(kTokens);
  std::string e = tokenizer_error(tok, 7);
  EXPECT_NE(e.find("llama2c tokenizer: tok: at offset " + std::to_string(tok.size()) +
                   ": file truncated while reading token 6 of 7"),
            std::string::npos)
      << e;
  e = tokenizer_error(tok, 5);
  EXPECT_NE(e.find("bytes left after the last of 5 tokens"), std::string::npos) << e;
  e = tokenizer_error(Bytes(tok.begin(), tok.end() - 9));
  EXPECT_NE(e.find("at offset 66: file truncated inside token 4 (4 bytes, 3 left)"),
            std::string::npos)
      << e;
  e = tokenizer_error(tokenizer(kTokens, 3));
  EXPECT_NE(e.find("at offset 8: token 0 length 5 is outside 0..3"), std::string::npos) << e;
  e = tokenizer_error(tokenizer(kTokens, 0));
  EXPECT_NE(e.find("at offset 0: max_token_length 0 is not positive"), std::string::npos) << e;
  Bytes neg = tok;
  const int32_t minus = -1;
  std::memcpy(neg.data() + 8, &minus, 4);
  e = tokenizer_error(neg);
  EXPECT_NE(e.find("at offset 8: token 0 length -1"), std::string::npos) << e;
}

// Our conversion of the shared llama2.c files matches the shared GGUF bit for bit: every tensor,
// the hyper-parameters and the vocabulary (the shared file also stores the tied classifier as
// output.weight, which we leave out because it equals token_embd.weight).
TEST(Llama2c, MatchesSharedStories260K) {
  NEXUS_REQUIRE_SHARED("models/stories260K.bin");
  NEXUS_REQUIRE_SHARED("models/tok512.bin");
  NEXUS_REQUIRE_SHARED("models/stories260K.gguf");
  auto w = import_llama2c(test::shared_path("models/stories260K.bin"),
                          test::shared_path("models/tok512.bin"));
  ASSERT_TRUE(w) << w.status().message();
  const Bytes img = w->serialize();
  auto ours = GgufFile::parse(img, nullptr, "ours");
  ASSERT_TRUE(ours) << ours.status().message();
  auto ref = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(ref) << ref.status().message();

  EXPECT_EQ(ours->tensors().size() + 1, ref->tensors().size());
  for (const GgufTensorInfo& t : ref->tensors()) {
    const std::string name = t.name == "output.weight" ? "token_embd.weight" : t.name;
    const GgufTensorInfo* o = ours->find_tensor(name);
    ASSERT_NE(o, nullptr) << "missing " << name;
    EXPECT_EQ(o->dtype, t.dtype) << name;
    EXPECT_EQ(o->shape, t.shape) << name;
    ASSERT_EQ(o->nbytes, t.nbytes) << name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << name;
  }
  for (const auto& [key, v] : ref->metadata()) {
    if (key.rfind("llama.", 0) != 0 && key.rfind("tokenizer.", 0) != 0) continue;
    if (key == "llama.tensor_data_layout" || key == "tokenizer.ggml.padding_token_id") continue;
    const GgufValue* o = ours->find(key);
    ASSERT_NE(o, nullptr) << "missing " << key;
    EXPECT_EQ(o->to_string(), v.to_string()) << key;
    EXPECT_EQ(o->i, v.i) << key;
    EXPECT_EQ(o->f, v.f) << key;
  }
  EXPECT_EQ(*ours->get_string_array("tokenizer.ggml.tokens"),
            *ref->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(*ours->get_float_array("tokenizer.ggml.scores"),
            *ref->get_float_array("tokenizer.ggml.scores"));
  EXPECT_EQ(*ours->get_int_array("tokenizer.ggml.token_type"),
            *ref->get_int_array("tokenizer.ggml.token_type"));
  EXPECT_EQ(ours->get_string("general.name"), "stories260K");
}

}  // namespace
}  // namespace nexus
