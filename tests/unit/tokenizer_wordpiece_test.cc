// WordPiece (BERT) on small hand-built vocabularies, in both vocabulary conventions: llama.cpp's
// GGUF ("\u2581word" starts, bare continuations) and Hugging Face's ("word", "##cont").
#include <gtest/gtest.h>

#include "nexus/io/gguf.h"
#include "nexus/tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace nexus {
namespace {

constexpr int32_t kCls = 2, kSep = 3, kUnk = 1;

std::unique_ptr<Tokenizer> gguf_bert() {
  const std::string sp = "\xE2\x96\x81";
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string_array("tokenizer.ggml.tokens",
                     {"[PAD]", "[UNK]", "[CLS]", "[SEP]", sp + "hello", sp + "world", sp + "un",
                      "aff", "able", sp + ",", sp + "!", sp + "\xE4\xB8\xAD", sp + "cafe"});
  w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  w.set_u32("tokenizer.ggml.bos_token_id", kCls);
  w.set_u32("tokenizer.ggml.seperator_token_id", kSep);
  w.set_u32("tokenizer.ggml.unknown_token_id", kUnk);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  const std::vector<uint8_t> img = w.serialize();
  auto g = GgufFile::parse(img, nullptr, "bert.gguf");
  EXPECT_TRUE(g) << g.status().message();
  auto t = Tokenizer::from_gguf(g.value());
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(t.value()) : nullptr;
}

std::unique_ptr<Tokenizer> hf_bert() {
  const char* json = R"({
    "added_tokens": [
      {"id": 0, "content": "[PAD]", "special": true}, {"id": 1, "content": "[UNK]", "special": true},
      {"id": 2, "content": "[CLS]", "special": true}, {"id": 3, "content": "[SEP]", "special": true}],
    "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                   "strip_accents": null, "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "[SEP]", "type_id": 0}}]},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
      "max_input_chars_per_word": 100,
      "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5, "un": 6,
                "##aff": 7, "##able": 8, ",": 9, "!": 10, "\u4e2d": 11, "cafe": 12}}})";
  auto t = Tokenizer::from_hf_json(json, "", "bert.json");
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(t.value()) : nullptr;
}

void check_bert(const Tokenizer& tok) {
  using V = std::vector<int32_t>;
  // Lowercased, punctuation split off, "unaffable" = un ##aff ##able.
  const V ids = tok.encode("Hello, UNAFFABLE world!", true);
  EXPECT_EQ(ids, (V{kCls, 4, 9, 6, 7, 8, 5, 10, kSep}));
  EXPECT_EQ(tok.decode(ids), "[CLS] hello , unaffable world ! [SEP]");
  EXPECT_EQ(tok.encode("Hello, UNAFFABLE world!", false), (V{4, 9, 6, 7, 8, 5, 10}));
  // Accents are stripped (NFD, drop nonspacing marks); each CJK ideograph is its own word.
  EXPECT_EQ(tok.encode("Caf\xC3\xA9", false), (V{12}));
  EXPECT_EQ(tok.encode("\xE4\xB8\xAD\xE6\x96\x87", false), (V{11, kUnk}));
  // A word with no full segmentation, or longer than 100 characters, is one [UNK].
  EXPECT_EQ(tok.encode("unknown hello", false), (V{kUnk, 4}));
  EXPECT_EQ(tok.encode(std::string(101, 'a'), false), (V{kUnk}));
  // Control characters vanish; tabs and no-break spaces separate words.
  EXPECT_EQ(tok.encode("hel\x01lo\tworld\xC2\xA0!", false), (V{4, 5, 10}));
  EXPECT_EQ(tok.encode("[CLS] hello", false), (V{kCls, 4}));
  EXPECT_EQ(tok.bos_id(), kCls);
  EXPECT_EQ(tok.eos_id(), kSep);
  EXPECT_EQ(tok.kind(), TokenizerKind::kWordPiece);
  EXPECT_FALSE(tok.is_eog(kSep));
}

TEST(WordPiece, GgufVocabulary) {
  auto tok = gguf_bert();
  ASSERT_NE(tok, nullptr);
  check_bert(*tok);
  EXPECT_EQ(tok->token_to_piece(4), " hello");
  EXPECT_EQ(tok->token_to_piece(7), "aff");
}

TEST(WordPiece, TokenizerJsonVocabulary) {
  auto tok = hf_bert();
  ASSERT_NE(tok, nullptr);
  check_bert(*tok);
  EXPECT_EQ(tok->token_to_piece(7), "aff");
}

TEST(WordPiece, BasicTokenizerWords) {
  tok::Vocab vocab;
  tok::WordPieceModel m(vocab, -1, tok::WordPieceOptions{});
  EXPECT_EQ(
      m.words(" Hello,world!! \xC3\x85ngstr\xC3\xB6m\xE4\xB8\xAD"),
      (std::vector<std::string>{"hello", ",", "world", "!", "!", "angstrom", "\xE4\xB8\xAD"}));
  tok::WordPieceOptions cased;
  cased.lowercase = cased.strip_accents = false;
  tok::WordPieceModel mc(vocab, -1, cased);
  EXPECT_EQ(mc.words("\xC3\x85ngstr\xC3\xB6m $5"),
            (std::vector<std::string>{"\xC3\x85ngstr\xC3\xB6m", "$", "5"}));
}

}  // namespace
}  // namespace nexus
