// SentencePiece-style BPE (Llama 2, TinyLlama, stories260K): greedy merges by token score over
// the whole text with spaces escaped as U+2581, then byte fallback for what no token covers.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace nexus::tok {

class SpmModel : public TokenModel {
 public:
  // `unk_id` (or -1) is emitted for characters that neither a token nor byte tokens cover.
  SpmModel(const Vocab& vocab, int32_t unk_id);

  // `text` is raw text: spaces become U+2581 here, the caller adds any leading space.
  void encode(std::string_view text, std::vector<int32_t>* out) const override;

  // "<0xAB>" tokens, or -1 per byte that has none.
  const std::array<int32_t, 256>& byte_tokens() const { return byte_tokens_; }

 private:
  // What SentencePiece lets a merge produce: normal, user-defined and unused pieces (unused
  // ones are split back into their halves at the end); never control, unknown or byte tokens.
  bool mergeable(int32_t id) const;
  // Merges one run of already-escaped text.
  void encode_escaped(std::string_view text, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  int32_t unk_;
  bool has_byte_tokens_ = false;
  bool chunk_at_spaces_ = false;  // see encode()
  std::array<int32_t, 256> byte_tokens_;
};

// Parses "<0xAB>" into 0xAB; -1 if `text` is not a byte token string.
int parse_byte_token(std::string_view text);

}  // namespace nexus::tok
