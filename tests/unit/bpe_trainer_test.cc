// BPE trainer: hand-computed first merges, tie-breaks, special-token text, round trips of the
// trained vocabulary through GGUF and Tokenizer::load, compression, determinism, safe chunking.
#include "nexus/tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "nexus/io/mapped_file.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace nexus {
namespace {

constexpr const char* kShakespeare = "data/tinyshakespeare.txt";

std::string repeat_words(std::initializer_list<std::pair<const char*, int>> words) {
  std::string s;
  for (const auto& [w, n] : words)
    for (int i = 0; i < n; ++i) s += std::string(w) + "\n";
  return s;
}

std::unique_ptr<Tokenizer> load_trained(const tok::BpeVocab& v, const std::string& name) {
  const std::string path = ::testing::TempDir() + name;
  const std::vector<uint8_t> image = tok::bpe_vocab_to_gguf(v);
  EXPECT_TRUE(write_file_atomic(path, image.data(), image.size()));
  auto t = Tokenizer::load(path);
  EXPECT_TRUE(t) << t.status().message();
  return std::move(t.value());
}

// A few kilobytes of varied English-like text, for tests that must run without ../shared.
std::string small_corpus() {
  std::string s;
  const char* lines[] = {"The quick brown fox jumps over the lazy dog.",
                         "First Citizen: Before we proceed any further, hear me speak.",
                         "All: Speak, speak. You are all resolved rather to die than to famish?",
                         "It's 2024; they'll say we've won 1,234 games (and lost 56)."};
  for (int i = 0; i < 60; ++i) s += std::string(lines[i % 4]) + "\n";
  return s;
}

tok::BpeTrainerOptions options(int64_t vocab, const char* pre = "gpt2", int64_t min_frequency = 2,
                               std::vector<std::string> specials = {}) {
  tok::BpeTrainerOptions o;
  o.vocab_size = vocab;
  o.pre = pre;
  o.min_frequency = min_frequency;
  o.specials = std::move(specials);
  return o;
}

std::string shakespeare() {
  auto text = read_file(test::shared_path(kShakespeare));
  return text ? text.value() : std::string();
}

TEST(BpeTrainer, FirstMergesAreTheHandComputedMostFrequentPairs) {
  // The Hugging Face course example: hug 10, pug 5, pun 12, bun 4, hugs 5 (newlines split words).
  // Pairs: u g 20, p u 17, u n 16, h u 15 -> "u g"; then u n 16, h ug 15 -> "u n"; then "h ug".
  const std::string corpus =
      repeat_words({{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}});
  tok::BpeTrainerOptions opt;
  opt.vocab_size = 256 + 1 + 3;
  opt.min_frequency = 1;
  auto v = tok::train_bpe(corpus, opt);
  ASSERT_TRUE(v) << v.status().message();
  ASSERT_EQ(v->merges, (std::vector<std::string>{"u g", "u n", "h ug"}));
  ASSERT_EQ(v->tokens.size(), 260u);
  EXPECT_EQ(v->tokens[256], "ug");
  EXPECT_EQ(v->tokens[258], "hug");
  EXPECT_EQ(v->tokens[259], "<|endoftext|>");
  EXPECT_EQ(v->eos_id, 259);
  EXPECT_EQ(v->types[259], TokenType::kControl);
  EXPECT_EQ(v->tokens['a'], "a");
  EXPECT_EQ(v->tokens[' '], "\xC4\xA0");  // GPT-2's alphabet: space is U+0120
}

std::string byte_level(const std::string& raw) {
  std::string out;
  for (unsigned char ch : raw) tok::append_utf8(tok::byte_to_cp(ch), &out);
  return out;
}

// The textbook algorithm: recount every pair of every word before each merge.
std::vector<std::string> naive_merges(std::string_view text, const char* pre, int n_merges) {
  auto p = tok::PreTokenizer::from_name(pre);
  std::map<std::string, int64_t> counts;
  for (const std::string& w : p->split(text)) ++counts[w];
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [w, c] : counts) {
    std::vector<std::string> syms;
    for (char ch : w) syms.emplace_back(1, ch);
    words.emplace_back(std::move(syms), c);
  }
  std::vector<std::string> merges;
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const auto& [syms, c] : words)
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += c;
    std::pair<std::string, std::string> best;
    int64_t best_count = 0;
    for (const auto& [pr, c] : pairs)  // in ascending order: the first maximum wins ties
      if (c > best_count) best = pr, best_count = c;
    if (best_count < 2) break;
    merges.push_back(byte_level(best.first) + " " + byte_level(best.second));
    for (auto& [syms, c] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == best.first && syms[i + 1] == best.second) {
          out.push_back(syms[i] + syms[i + 1]);
          ++i;
        } else {
          out.push_back(syms[i]);
        }
      }
      syms = std::move(out);
    }
  }
  return merges;
}

TEST(BpeTrainer, MatchesTheNaiveRecountingTrainer) {
  const std::string text = shakespeare().empty() ? small_corpus() : shakespeare().substr(0, 30000);
  for (const char* pre : {"gpt2", "qwen2"}) {
    auto v = tok::train_bpe(text, options(256 + 1 + 120, pre));
    ASSERT_TRUE(v);
    EXPECT_EQ(v->merges, naive_merges(text, pre, 120)) << pre;
  }
}

TEST(BpeTrainer, TiesGoToTheLexicographicallySmallestPair) {
  auto v = tok::train_bpe(repeat_words({{"zy", 3}, {"cd", 3}, {"ab", 3}}), options(259, "gpt2", 1));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b", "c d"}));
}

TEST(BpeTrainer, SpecialTokenTextIsNotCounted) {
  const std::string corpus = "<|endoftext|><|endoftext|><|endoftext|><sep><sep>xy xy";
  auto v = tok::train_bpe(corpus, options(259, "gpt2", 1, {"<sep>"}));
  ASSERT_TRUE(v);
  ASSERT_EQ(v->merges.size(), 1u);
  EXPECT_EQ(v->merges[0], "x y");
  EXPECT_EQ(v->tokens[257], "<|endoftext|>");
  EXPECT_EQ(v->tokens[258], "<sep>");
}

TEST(BpeTrainer, WordsNeverSpanDocuments) {
  // As one text "ab" + "ab" is the word "abab"; as two documents it is two words "ab".
  const std::vector<std::string_view> docs{"ab", "ab"};
  auto v = tok::train_bpe(docs, options(300, "gpt2", 1));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(v->n_words, 2);
  auto joined = tok::train_bpe("abab", options(300, "gpt2", 1));
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->merges.size(), 2u);  // "a b", then "ab ab"
}

TEST(BpeTrainer, StopsAtMinFrequencyAndRejectsTinyVocab) {
  auto v = tok::train_bpe("ab ab cd", options(1000));
  ASSERT_TRUE(v);
  EXPECT_EQ(v->merges, (std::vector<std::string>{"a b"}));  // then every pair occurs once
  auto bad = tok::train_bpe("abc", options(200));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("below the 257 tokens"), std::string::npos);
  auto bad_pre = tok::train_bpe("abc", options(300, "nope"));
  ASSERT_FALSE(bad_pre);
  EXPECT_NE(bad_pre.status().message().find("unknown pre-tokenizer"), std::string::npos);
}

TEST(BpeTrainer, TrainedVocabRoundTripsArbitraryBytes) {
  for (const char* pre : {"gpt2", "llama-bpe", "qwen2"}) {
    auto v = tok::train_bpe(small_corpus(), options(400, pre));
    ASSERT_TRUE(v) << v.status().message();
    auto t = load_trained(v.value(), std::string("bpe_rt_") + pre + ".gguf");
    ASSERT_TRUE(t);
    EXPECT_EQ(t->n_vocab(), static_cast<int64_t>(v->tokens.size()));
    EXPECT_EQ(t->eos_id(), v->eos_id);
    EXPECT_EQ(t->bos_id(), v->eos_id);
    std::string all_bytes;
    for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
    for (const std::string& s :
         {small_corpus(), all_bytes, std::string("\xFF\xFE invalid \xC3 utf-8 \xE2\x82"),
          std::string(
              "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD and CJK \xE4\xB8\xAD"),
          std::string("text<|endoftext|>more")}) {
      const std::vector<int32_t> ids = t->encode(s, false);
      EXPECT_EQ(t->decode(ids), s) << pre;
    }
    // The special is one token, and the text the merges saw most compresses.
    const std::vector<int32_t> ids = t->encode("a<|endoftext|>b", false);
    EXPECT_EQ(ids.size(), 3u);
    EXPECT_EQ(ids[1], v->eos_id);
    EXPECT_LT(t->encode(small_corpus(), false).size(), small_corpus().size() / 3);
  }
}

TEST(BpeTrainer, DeterministicFileBytes) {
  const std::string text = shakespeare().empty() ? small_corpus() : shakespeare().substr(0, 200000);
  auto a = tok::train_bpe(text, options(600));
  tok::BpeTrainerOptions threaded = options(600);
  threaded.threads = 3;
  // Three threads over many documents cut at safe points: the same counts, so the same file.
  std::vector<std::string_view> docs;
  size_t begin = 0;
  for (size_t end : tok::safe_chunk_ends(text, 1000)) {
    docs.push_back(std::string_view(text).substr(begin, end - begin));
    begin = end;
  }
  EXPECT_GT(docs.size(), 3u);
  auto b = tok::train_bpe(docs, threaded);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(tok::bpe_vocab_to_gguf(a.value()), tok::bpe_vocab_to_gguf(b.value()));
}

TEST(BpeTrainer, TinyShakespeareRoundTripAndCompression) {
  NEXUS_REQUIRE_SHARED(kShakespeare);
  const std::string text = shakespeare();
  // Bytes per token at vocab 1024. GPT-2's split keeps every newline a piece of its own, which
  // costs it about 7% of tokens on this line-heavy text (2.43 against 2.60).
  for (const auto& [pre, min_ratio] :
       {std::pair{"gpt2", 2.4}, std::pair{"qwen2", 2.5}, std::pair{"llama-bpe", 2.5}}) {
    auto v = tok::train_bpe(text, options(1024, pre));
    ASSERT_TRUE(v) << v.status().message();
    EXPECT_EQ(v->tokens.size(), 1024u);
    auto t = load_trained(v.value(), std::string("bpe_shakespeare_") + pre + ".gguf");
    ASSERT_TRUE(t);
    const std::vector<int32_t> ids = t->encode(text, false);
    EXPECT_EQ(t->decode(ids), text) << pre;
    // The encoder reproduces the trainer's final segmentation of the corpus (llama-bpe may use
    // fewer tokens: it takes a piece whole when it is a token).
    if (std::string(pre) != "llama-bpe") {
      EXPECT_EQ(static_cast<int64_t>(ids.size()), v->n_corpus_tokens) << pre;
    }
    const double ratio = static_cast<double>(text.size()) / static_cast<double>(ids.size());
    EXPECT_GT(ratio, min_ratio) << pre;
    // Encoding in safe chunks gives exactly the ids of the whole text.
    std::vector<int32_t> chunked;
    size_t begin = 0;
    for (size_t end : tok::safe_chunk_ends(text, 4096)) {
      const auto part = t->encode(std::string_view(text).substr(begin, end - begin), false);
      chunked.insert(chunked.end(), part.begin(), part.end());
      begin = end;
    }
    EXPECT_EQ(chunked, ids) << pre;
  }
}

TEST(BpeTrainer, SafeChunkEndsCutAfterNewlinesBeforeText) {
  const std::string text = "aaaa\n\nbbbb\ncccc dddd\n eeee\nffff";
  // Not after "\n\n" (offset 5) nor before " eeee" (21): after "bbbb\n" and "eeee\n".
  EXPECT_EQ(tok::safe_chunk_ends(text, 6), (std::vector<size_t>{11, 27, text.size()}));
  EXPECT_EQ(tok::safe_chunk_ends("", 10), std::vector<size_t>{0});
  // No newline at all: cuts at character boundaries, never inside a UTF-8 sequence.
  const std::string euro = "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC";
  for (size_t e : tok::safe_chunk_ends(euro, 1))
    EXPECT_TRUE(e == euro.size() || (static_cast<unsigned char>(euro[e]) & 0xC0) != 0x80);
}

}  // namespace
}  // namespace nexus
