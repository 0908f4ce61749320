// Byte-level BPE (GPT-2, Llama 3, Qwen2, ...): normalize, pre-tokenize with regexes, then merge
// each piece's bytes by merge rank. Tokens spell bytes with GPT-2's byte-to-unicode alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nexus/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace nexus::tok {

// GPT-2's reversible byte <-> code point alphabet: printable Latin-1 bytes map to themselves, the
// rest to U+0100 onwards. cp_to_byte returns -1 for code points outside the alphabet.
char32_t byte_to_cp(uint8_t b);
int cp_to_byte(char32_t cp);
// The bytes a byte-level token string stands for (characters outside the alphabet are kept as
// their UTF-8).
std::string byte_level_decode(std::string_view token_text);

enum class Normalization : uint8_t { kNone, kNfc, kNfd };

struct BpeOptions {
  bool ignore_merges = false;     // a piece that is itself a token is used whole (Llama 3)
  bool add_prefix_space = false;  // HF ByteLevel(add_prefix_space): prepend ' ' to the text
  Normalization normalization = Normalization::kNone;
};

class BpeModel : public TokenModel {
 public:
  // `merges` are (left, right) token strings, best rank first. Merges naming strings that are
  // not tokens are skipped, as the reference implementations do.
  static Result<std::unique_ptr<BpeModel>> create(
      const Vocab& vocab, std::span<const std::pair<std::string_view, std::string_view>> merges,
      PreTokenizer pre, BpeOptions options);

  void encode(std::string_view text, std::vector<int32_t>* out) const override;
  const PreTokenizer& pre_tokenizer() const { return pre_; }
  size_t n_merges() const { return merges_.size(); }

 private:
  BpeModel(const Vocab& vocab, PreTokenizer pre, BpeOptions options)
      : vocab_(vocab), pre_(std::move(pre)), options_(options) {}
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Merges the bytes of one pre-tokenized piece.
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  PreTokenizer pre_;
  BpeOptions options_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_tokens_;  // token of each byte's alphabet character, or -1
};

}  // namespace nexus::tok
