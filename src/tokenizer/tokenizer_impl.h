// The state behind nexus::Tokenizer, filled in by the GGUF and tokenizer.json loaders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nexus/tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/vocab.h"

namespace nexus {

struct Tokenizer::Impl {
  TokenizerKind kind = TokenizerKind::kSpm;
  std::string model_name;  // "llama", "gpt2", "bert"
  std::string pre_name;    // BPE pre-tokenizer name
  tok::Vocab vocab;
  std::unique_ptr<tok::TokenModel> model;  // refers to `vocab`, so Impl never moves
  tok::SpecialMatcher specials;

  bool add_space_prefix = false;  // SPM: a space before the text and after special tokens
  bool add_bos = false;
  bool add_eos = false;
  int32_t bos = -1, eos = -1, unk = -1, pad = -1, sep = -1, eot = -1, eom = -1;
  // WordPiece vocabulary conventions (see WordPieceOptions).
  std::string wp_word_prefix, wp_continuation_prefix;

  std::vector<std::string> pieces;  // token_to_piece of every id
  std::vector<uint8_t> eog;         // end-of-generation flag per id

  // Sets an id member from an optional metadata value, keeping -1 when absent or out of range.
  int32_t checked_id(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(vocab.size()) ? static_cast<int32_t>(id) : -1;
  }
  // Common final step of every loader: registers control/user-defined/unknown tokens with the
  // special matcher, computes pieces and end-of-generation flags.
  void finish();
};

}  // namespace nexus
