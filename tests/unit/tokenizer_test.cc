// Tokenizer API on small hand-built vocabularies (SPM, byte-level BPE, special tokens, errors) and
// on the real vocabularies in ../shared (BOS/EOS, pieces, special-token parsing, speed).
#include "nexus/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "nexus/io/gguf.h"
#include "test_paths.h"

namespace nexus {
namespace {

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581

struct VocabSpec {
  std::string model;
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
  std::vector<std::string> merges;
  std::string pre;
};

std::unique_ptr<Tokenizer> build(const VocabSpec& v) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  if (!v.types.empty()) w.set_i32_array("tokenizer.ggml.token_type", v.types);
  if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
  if (!v.pre.empty()) w.set_string("tokenizer.ggml.pre", v.pre);
  const std::vector<uint8_t> img = w.serialize();
  auto g = GgufFile::parse(img, nullptr, "toy.gguf");
  EXPECT_TRUE(g) << g.status().message();
  auto t = Tokenizer::from_gguf(g.value());
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(t.value()) : nullptr;
}

// <unk> <s> </s>, 256 byte tokens (ids 3..258), then a few pieces with scores.
VocabSpec toy_spm() {
  VocabSpec v{"llama", {"<unk>", "<s>", "</s>"}, {0, 0, 0}, {2, 3, 3}, {}, {}};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.scores.push_back(0);
    v.types.push_back(6);
  }
  const std::pair<std::string, double> pieces[] = {
      {kSp, -1}, {"a", -2}, {"b", -2},  {"c", -2},
      {"x", -3}, {"y", -3}, {"ab", -1}, {std::string(kSp) + "ab", -0.5},
      {"xy", 0}};
  for (const auto& [text, score] : pieces) {
    v.tokens.push_back(text);
    v.scores.push_back(score);
    v.types.push_back(text == "xy" ? 5 : 1);  // "xy" is an unused piece
  }
  return v;
}
constexpr int32_t kSpace = 259, kA = 260, kB = 261, kC = 262, kX = 263, kY = 264, kAB = 265,
                  kSpAB = 266;

TEST(Tokenizer, SpmMergesByScore) {
  auto tok = build(toy_spm());
  ASSERT_NE(tok, nullptr);
  // "▁ab▁c": a+b (-1) first, then ▁+ab (-0.5); "▁c" is not a token.
  EXPECT_EQ(tok->encode("ab c", false), (std::vector<int32_t>{kSpAB, kSpace, kC}));
  EXPECT_EQ(tok->encode("ab c", true), (std::vector<int32_t>{1, kSpAB, kSpace, kC}));
  EXPECT_EQ(tok->decode(tok->encode("ab c", true)), "<s>ab c");
  EXPECT_EQ(tok->decode(tok->encode("ab c", true), true), "ab c");
  // An unused piece may be formed but is split back into its halves.
  EXPECT_EQ(tok->encode("xy", false), (std::vector<int32_t>{kSpace, kX, kY}));
  // Byte fallback for characters that are not pieces.
  EXPECT_EQ(tok->encode("\xC3\xA9", false), (std::vector<int32_t>{kSpace, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->decode(tok->encode("\xC3\xA9", false)), "\xC3\xA9");
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{1}));
}

TEST(Tokenizer, SpmSpecialTokensAndSpacePrefix) {
  auto tok = build(toy_spm());
  ASSERT_NE(tok, nullptr);
  // After a special token the text gets its own leading space, and decode removes it again.
  const std::vector<int32_t> ids = tok->encode("a<s>b", false, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{kSpace, kA, 1, kSpace, kB}));
  EXPECT_EQ(tok->decode(ids), "a<s>b");
  const std::vector<int32_t> plain = tok->encode("a<s>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(tok->decode(plain), "a<s>b");
  EXPECT_EQ(tok->token_to_piece(kSpAB), " ab");
  EXPECT_EQ(tok->token_to_piece(3 + '\n'), "\n");
  EXPECT_EQ(tok->token_text(kSpAB), std::string(kSp) + "ab");
  EXPECT_EQ(tok->token_type(3), TokenType::kByte);
  EXPECT_EQ(tok->token_id("ab"), kAB);
  EXPECT_EQ(tok->token_id("zz"), -1);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(kA));
  EXPECT_EQ(tok->type_name(), "llama (SPM)");
}

TEST(Tokenizer, SpmWithoutTokenTypesInfersBytesAndControls) {
  VocabSpec v = toy_spm();
  v.types.clear();
  auto tok = build(v);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("a<s>\xC3\xA9", false),
            (std::vector<int32_t>{kSpace, kA, 1, kSpace, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->token_type(0), TokenType::kUnknown);
}

TEST(Tokenizer, InvalidIdsThrowNamingTheIdAndVocabSize) {
  auto tok = build(toy_spm());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> bad{kA, 999};
  try {
    tok->decode(bad);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("999"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("268"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok->token_to_piece(-1), Error);
  EXPECT_THROW(tok->token_text(268), Error);
}

// Byte-level BPE: characters of GPT-2's byte alphabet ("Ġ" is the space byte).
VocabSpec toy_bpe(const std::string& pre) {
  return {"gpt2",
          {"a", "b", "c", "!", "\xC4\xA0", "ab", "bc", "abc",
           "\xC4\xA0"
           "a",
           "\xC4\xA0"
           "ab",
           "<|endoftext|>"},
          {},
          {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3},
          {"b c", "a b", "a bc", "\xC4\xA0 a"},
          pre};
}

TEST(Tokenizer, BpeMergesByRank) {
  auto tok = build(toy_bpe("gpt-2"));
  ASSERT_NE(tok, nullptr);
  // "b c" outranks "a b", so abc = a + bc.
  EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{7}));
  // " ab": "a b" (rank 1) beats "Ġ a" (rank 3) and no merge joins Ġ + ab, so "Ġab" is not used.
  EXPECT_EQ(tok->encode(" ab!", false), (std::vector<int32_t>{4, 5, 3}));
  EXPECT_EQ(tok->decode(tok->encode(" ab!", false)), " ab!");
  EXPECT_EQ(tok->token_to_piece(9), " ab");
  // Bytes with no token are dropped, as in the reference implementations.
  EXPECT_EQ(tok->encode("z", false), std::vector<int32_t>{});
  EXPECT_EQ(tok->pre_name(), "gpt-2");
  EXPECT_FALSE(tok->add_bos());
}

TEST(Tokenizer, BpeIgnoreMergesUsesWholeWords) {
  auto tok = build(toy_bpe("llama-bpe"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode(" ab!", false), (std::vector<int32_t>{9, 3}));
}

TEST(Tokenizer, BpeSpecialTokens) {
  auto tok = build(toy_bpe("gpt-2"));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("ab<|endoftext|>c", false, true), (std::vector<int32_t>{5, 10, 2}));
  const auto plain = tok->encode("ab<|endoftext|>c", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 10), 0);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{5, 10, 2}), "ab<|endoftext|>c");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{5, 10, 2}, true), "abc");
  EXPECT_TRUE(tok->is_eog(10));
}

TEST(Tokenizer, SpecialTokensLongestMatchAndStripFromTokenizerJson) {
  const std::string json = R"({
    "added_tokens": [
      {"id": 3, "content": "<x>", "special": true},
      {"id": 4, "content": "<x><y>", "special": true},
      {"id": 5, "content": "<r>", "special": false, "rstrip": true, "lstrip": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0120": 2}, "merges": []}})";
  auto r = Tokenizer::from_hf_json(json, "", "toy.json");
  ASSERT_TRUE(r) << r.status().message();
  const Tokenizer& tok = *r.value();
  EXPECT_EQ(tok.encode("a<x><y>b<x>", false), (std::vector<int32_t>{0, 4, 1, 3}));
  // Non-special added tokens match even without parse_special, and swallow nearby spaces.
  EXPECT_EQ(tok.encode("a  <r>  b", false, false), (std::vector<int32_t>{0, 5, 1}));
  EXPECT_EQ(tok.token_type(3), TokenType::kControl);
  EXPECT_EQ(tok.token_type(5), TokenType::kUserDefined);
}

TEST(Tokenizer, LoadErrorsAreStatuses) {
  auto missing = Tokenizer::load("/nonexistent/tokenizer.gguf");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("/nonexistent"), std::string::npos);
  EXPECT_FALSE(Tokenizer::from_hf_json("{not json", "", "bad.json"));
  EXPECT_FALSE(Tokenizer::from_hf_json(R"({"model": {"type": "Unigram", "vocab": {}}})", "", "u"));

  VocabSpec unknown_pre = toy_bpe("no-such-pre");
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", unknown_pre.tokens);
  w.set_string_array("tokenizer.ggml.merges", unknown_pre.merges);
  w.set_string("tokenizer.ggml.pre", "no-such-pre");
  const auto img = w.serialize();
  auto g = GgufFile::parse(img, nullptr, "bad.gguf");
  ASSERT_TRUE(g);
  auto t = Tokenizer::from_gguf(g.value());
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("no-such-pre"), std::string::npos);

  GgufWriter empty;
  empty.set_string("general.architecture", "llama");
  const auto img2 = empty.serialize();
  auto g2 = GgufFile::parse(img2, nullptr, "novocab.gguf");
  ASSERT_TRUE(g2);
  EXPECT_FALSE(Tokenizer::from_gguf(g2.value()));
}

std::unique_ptr<Tokenizer> load_shared(const std::string& rel) {
  auto r = Tokenizer::load(test::shared_path(rel));
  EXPECT_TRUE(r) << r.status().message();
  return r ? std::move(r.value()) : nullptr;
}

TEST(Tokenizer, RealVocabsBosAndSpecials) {
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  NEXUS_REQUIRE_SHARED("vocab/qwen3-hf/tokenizer.json");
  auto llama = load_shared("vocab/ggml-vocab-llama-spm.gguf");
  auto gpt2 = load_shared("vocab/ggml-vocab-gpt-2.gguf");
  auto qwen = load_shared("vocab/qwen3-hf/tokenizer.json");
  ASSERT_TRUE(llama && gpt2 && qwen);
  // Llama 2 adds BOS (tokenizer.ggml.add_bos_token); GPT-2 asks for none.
  EXPECT_EQ(llama->encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(gpt2->encode("Hello world", true), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(llama->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(gpt2->token_to_piece(995), " world");
  EXPECT_EQ(gpt2->encode("Hello<|endoftext|>", false, true), (std::vector<int32_t>{15496, 50256}));
  EXPECT_EQ(gpt2->encode("Hello<|endoftext|>", false, false),
            (std::vector<int32_t>{15496, 27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_TRUE(gpt2->is_eog(50256));
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  const auto ids = qwen->encode(chat, true);
  EXPECT_EQ(ids, (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
  EXPECT_EQ(qwen->decode(ids), chat);
  EXPECT_EQ(qwen->eos_id(), 151645);
  EXPECT_EQ(qwen->bos_id(), -1);
  EXPECT_TRUE(qwen->is_eog(151645));
  EXPECT_TRUE(qwen->is_eog(151643));
  EXPECT_FALSE(qwen->is_eog(151644));
}

// A megabyte must tokenize in well under a few seconds (merges use heaps and rank maps).
TEST(Tokenizer, OneMegabyteIsFast) {
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-llama-spm.gguf");
  NEXUS_REQUIRE_SHARED("vocab/ggml-vocab-gpt-2.gguf");
  NEXUS_REQUIRE_SHARED("data/tinyshakespeare.txt");
  std::ifstream f(test::shared_path("data/tinyshakespeare.txt"), std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"}) {
    auto tok = load_shared(rel);
    ASSERT_NE(tok, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok->encode(text, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0) << rel;
    EXPECT_EQ(tok->decode(ids), text) << rel;
  }
}

}  // namespace
}  // namespace nexus
