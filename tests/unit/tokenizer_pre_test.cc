// Pre-tokenizer splits (hand-computed), the regex engine, and the Unicode helpers under them.
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace nexus::tok {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const char* name, std::string_view text) {
  auto p = PreTokenizer::from_name(name);
  EXPECT_TRUE(p) << p.status().message();
  return p ? p->split(text) : Pieces{};
}

TEST(PreTokenizer, Llama3ContractionsAndDigitGroups) {
  // Contractions match case-insensitively; digits come in groups of at most three.
  EXPECT_EQ(split("llama-bpe", "I'm 12345 dogs' DON'T"),
            (Pieces{"I", "'m", " ", "123", "45", " dogs", "'", " DON", "'T"}));
  // A run of newlines is one piece; of two spaces before a word, the last joins the word.
  EXPECT_EQ(split("llama-bpe", "Hello\n\n  world!!\n"),
            (Pieces{"Hello", "\n\n", " ", " world", "!!\n"}));
  // One non-letter, non-digit character may lead a word.
  EXPECT_EQ(split("llama-bpe", "\xC3\x84PFEL,\xC3\xA4pfel"),
            (Pieces{"\xC3\x84PFEL", ",\xC3\xA4pfel"}));
  EXPECT_EQ(split("llama-bpe", "1234567"), (Pieces{"123", "456", "7"}));
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello  world 123 it's"),
            (Pieces{"Hello", " ", " world", " 123", " it", "'s"}));
  // GPT-2's contractions are lowercase only; a lone tab is left as a gap piece.
  EXPECT_EQ(split("gpt-2", "I'M\tok"), (Pieces{"I", "'", "M", "\t", "ok"}));
  EXPECT_EQ(split("mpt", "Hello  world"), split("gpt-2", "Hello  world"));
  EXPECT_TRUE(split("gpt-2", "").empty());
}

TEST(PreTokenizer, Qwen2SingleDigits) {
  EXPECT_EQ(split("qwen2", "abc 2024"), (Pieces{"abc", " ", "2", "0", "2", "4"}));
}

TEST(PreTokenizer, StarcoderAndRefactIsolateDigitsFirst) {
  const Pieces expected{"x", "=", "1", "2", " y"};
  EXPECT_EQ(split("starcoder", "x=12 y"), expected);
  EXPECT_EQ(split("refact", "x=12 y"), expected);
}

TEST(PreTokenizer, DeepseekCoder) {
  EXPECT_EQ(
      split("deepseek-coder", "int a = 42;\n// \xE6\xB3\xA8\xE9\x87\x8A"),
      (Pieces{"int", " a", " = ", "4", "2", ";", "\n", "//", " ", "\xE6\xB3\xA8\xE9\x87\x8A"}));
}

TEST(PreTokenizer, DeepseekLlm) {
  EXPECT_EQ(split("deepseek-llm", "Hello, \xE4\xB8\x96\xE7\x95\x8C 123\n"),
            (Pieces{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "123", "\n"}));
}

TEST(PreTokenizer, FalconAndDefault) {
  EXPECT_EQ(split("falcon", "a+b=c 12345"), (Pieces{"a", "+", "b", "=", "c", " ", "123", "45"}));
  EXPECT_EQ(split("default", "x 12345"), (Pieces{"x", " ", "123", "45"}));
}

TEST(PreTokenizer, InvalidUtf8StaysInPieces) {
  const std::string text = "ab\xFF\xFE cd";
  std::string joined;
  for (const std::string& p : split("llama-bpe", text)) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, NamesAndIdentification) {
  EXPECT_FALSE(PreTokenizer::from_name("no-such-pre"));
  const std::vector<std::string> qwen{
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
  EXPECT_EQ(PreTokenizer::identify(qwen), "qwen2");
  EXPECT_EQ(PreTokenizer::identify(std::vector<std::string>{"x"}), "");
  auto llama = PreTokenizer::from_name("llama-bpe");
  ASSERT_TRUE(llama);
  EXPECT_TRUE(llama->ignore_merges());
  EXPECT_TRUE(llama->add_bos());
}

std::vector<char32_t> cps(std::string_view s) { return decode_all(s).cps; }

int64_t match(const char* pattern, std::string_view text, size_t pos = 0) {
  auto re = Regex::compile(pattern);
  EXPECT_TRUE(re) << re.status().message();
  return re ? re->match_at(cps(text), pos) : -2;
}

TEST(Regex, Basics) {
  EXPECT_EQ(match("ab|a", "ab"), 2);  // first alternative wins
  EXPECT_EQ(match("a|ab", "ab"), 1);  // ... even when shorter
  EXPECT_EQ(match("a{2,3}", "aaaa"), 3);
  EXPECT_EQ(match("a{2,3}?", "aaaa"), 2);  // lazy
  EXPECT_EQ(match("a+?b", "aaab"), 4);
  EXPECT_EQ(match("(?:ab)+", "ababa"), 4);
  EXPECT_EQ(match("(?:ab){2}c", "ababc"), 5);
  EXPECT_EQ(match("\\s+(?!\\S)", "   x"), 2);  // backtracks off the last space
  EXPECT_EQ(match("a(?=b)", "ab"), 1);
  EXPECT_EQ(match("a(?=b)", "ac"), -1);
  EXPECT_EQ(match("\\d+\\b", "123 "), 3);
  EXPECT_EQ(match("x$", "x"), 1);
  EXPECT_EQ(match("x$", "xy"), -1);
  EXPECT_EQ(match("[^a-c]+", "xyzab"), 3);
  EXPECT_EQ(match("[\\p{L}\\d]+",
                  "\xC3\xA9t\xC3\xA9"
                  "2"),
            4);
  EXPECT_EQ(match("\\P{L}+", "12ab"), 2);
  EXPECT_EQ(match("(?i:'ll)", "'LL"), 3);
  EXPECT_EQ(match("(?i:'s)", "'\xC5\xBF"), 2);  // U+017F long s folds to s
  EXPECT_EQ(match("\\x{4E00}-\\u4E01", "\xE4\xB8\x80-\xE4\xB8\x81"), 3);
  EXPECT_EQ(match(".+", "ab\ncd"), 2);
}

TEST(Regex, UnsupportedSyntaxIsAnError) {
  for (const char* bad : {"(?<=a)b", "a++", "\\p{Han}", "(a", "a)", "[a", "*a", "(?:a?)*", "\\q"}) {
    auto re = Regex::compile(bad);
    ASSERT_FALSE(re) << bad;
    EXPECT_NE(re.status().message().find("[regex]"), std::string::npos);
  }
}

TEST(Regex, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  EXPECT_FALSE(Regex::compile(deep));
  EXPECT_TRUE(Regex::compile(std::string(50, '(') + "a" + std::string(50, ')')));
}

TEST(Regex, FindSkipsToFirstMatch) {
  auto re = Regex::compile("\\p{N}+");
  ASSERT_TRUE(re);
  const auto text = cps("ab 12 c");
  size_t b = 0, e = 0;
  ASSERT_TRUE(re->find(text, 0, &b, &e));
  EXPECT_EQ(b, 3u);
  EXPECT_EQ(e, 5u);
  EXPECT_FALSE(re->find(text, 5, &b, &e));
}

TEST(Unicode, CategoriesAndCase) {
  EXPECT_EQ(category('A'), Gc::kLu);
  EXPECT_EQ(category(0x4E2D), Gc::kLo);   // 中
  EXPECT_EQ(category(0x0663), Gc::kNd);   // Arabic-Indic three
  EXPECT_EQ(category(0x1F600), Gc::kSo);  // emoji
  EXPECT_EQ(category(0x10FFFF), Gc::kCn);
  EXPECT_EQ(category(kInvalidBase + 0xFF), Gc::kCn);
  EXPECT_TRUE(is_whitespace(0x3000));
  EXPECT_FALSE(is_whitespace(0x200B));   // zero width space is not White_Space
  EXPECT_EQ(to_lower(0xC4), 0xE4u);      // Ä -> ä
  EXPECT_EQ(to_lower(0x0416), 0x0436u);  // Ж -> ж
  EXPECT_EQ(to_lower(0x0100), 0x0101u);  // stride-2 range
  EXPECT_EQ(to_lower(0x0101), 0x0101u);
  EXPECT_EQ(to_lower(0x130), static_cast<char32_t>('i'));
}

TEST(Unicode, Utf8AndNormalization) {
  const std::string bad = "a\xC3(\xF0\x9F\x98\x80\xED\xA0\x80";
  std::string round;
  for (char32_t cp : cps(bad)) append_utf8(cp, &round);
  EXPECT_EQ(round, bad);  // invalid bytes survive decode + encode
  EXPECT_EQ(cps("\xF0\x9F\x98\x80").size(), 1u);
  EXPECT_EQ(nfd("\xC3\xA9"), "e\xCC\x81");  // é -> e + combining acute
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(nfc("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"), "\xED\x95\x9C");  // jamo -> 한
  EXPECT_EQ(nfd("\xED\x95\x9C"), "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB");
  // Canonical ordering: dot below (220) sorts before dot above (230), then both compose.
  EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");
  EXPECT_EQ(nfc("s\xCC\x87\xCC\xA3"), "\xE1\xB9\xA9");  // ṩ
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");           // Angstrom sign is a singleton
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
}

}  // namespace
}  // namespace nexus::tok
