// WordPiece (BERT): the BERT normalizer (clean text, CJK spacing, accent stripping, lowercase),
// the BERT pre-tokenizer (split on whitespace, isolate punctuation), then greedy longest-match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace nexus::tok {

struct WordPieceOptions {
  bool clean_text = true;            // drop NUL, U+FFFD and control characters
  bool handle_chinese_chars = true;  // every CJK ideograph is a word of its own
  bool strip_accents = true;         // NFD, then drop nonspacing marks
  bool lowercase = true;
  // How the vocabulary marks word starts and continuations: Hugging Face vocabularies write
  // continuations as "##ing"; llama.cpp's GGUF conversion writes word starts as "\u2581word"
  // and continuations bare.
  std::string word_prefix;
  std::string continuation_prefix = "##";
  size_t max_chars_per_word = 100;  // longer words become [UNK]
};

class WordPieceModel : public TokenModel {
 public:
  WordPieceModel(const Vocab& vocab, int32_t unk_id, WordPieceOptions options)
      : vocab_(vocab), unk_(unk_id), options_(std::move(options)) {}

  void encode(std::string_view text, std::vector<int32_t>* out) const override;
  // The normalized, pre-tokenized words of `text`.
  std::vector<std::string> words(std::string_view text) const;
  const WordPieceOptions& options() const { return options_; }

 private:
  void encode_word(const std::string& word, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  int32_t unk_;
  WordPieceOptions options_;
};

}  // namespace nexus::tok
