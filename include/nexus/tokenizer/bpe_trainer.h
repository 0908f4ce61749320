// Byte-level BPE training: pre-tokenize a corpus with the encoder's own pre-tokenizer, count
// words, then merge the most frequent adjacent pair until the vocabulary is full.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"
#include "nexus/tokenizer.h"

namespace nexus::tok {

struct BpeTrainerOptions {
  int64_t vocab_size = 4096;  // 256 byte tokens + specials + merges
  std::string pre = "gpt-2";  // pre-tokenizer name (see PreTokenizer::from_name)
  int64_t min_frequency = 2;  // stop merging when the best pair occurs fewer times
  // Control tokens appended after the merges; "<|endoftext|>" is always among them and becomes
  // the BOS/EOS token. Their text in the corpus is cut out before counting.
  std::vector<std::string> specials;
  int threads = 1;  // pre-tokenization threads (the result does not depend on it)
};

// A trained vocabulary: token strings in GPT-2's byte-to-unicode alphabet, ids 0-255 the bytes
// 0-255, then one token per new merge result, then the specials.
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // "left right", best rank first (GGUF's format)
  std::string pre;
  int32_t eos_id = -1;  // the <|endoftext|> token, also used as BOS

  // Word statistics, for logs.
  int64_t n_words = 0;          // pre-tokenized pieces counted
  int64_t n_unique_words = 0;   // distinct pieces
  int64_t n_corpus_tokens = 0;  // tokens of the corpus (specials cut out) after the last merge
};

// Trains on `text`. Deterministic: the same text and options give the same vocabulary. Ties
// between equally frequent pairs go to the lexicographically smallest (left bytes, right bytes).
// Each document is pre-tokenized on its own (no word spans two documents).
Result<BpeVocab> train_bpe(std::span<const std::string_view> documents,
                           const BpeTrainerOptions& options);
Result<BpeVocab> train_bpe(std::string_view text, const BpeTrainerOptions& options);

// The vocab-only GGUF image (tokenizer.ggml.model "gpt2", tokens, token_type, merges, pre,
// bos/eos ids) that Tokenizer::load reads back.
std::vector<uint8_t> bpe_vocab_to_gguf(const BpeVocab& vocab);

// Byte offsets that cut `text` into pieces of about `target` bytes such that pre-tokenizing the
// pieces separately gives the same pieces as the whole text: a cut is placed after a '\n' that
// follows a non-space byte and precedes a printable ASCII byte (none of the known pre-tokenizer
// patterns matches across that), or, when no such point is within 4 * target bytes, at the next
// UTF-8 character boundary. Returns the end offsets, the last being text.size().
std::vector<size_t> safe_chunk_ends(std::string_view text, size_t target);

}  // namespace nexus::tok
