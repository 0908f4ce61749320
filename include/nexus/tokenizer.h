// Text <-> token ids, bit-exact with the reference tokenizers: SentencePiece-style BPE (Llama 2),
// byte-level BPE (GPT-2, Llama 3, Qwen2, ...), WordPiece (BERT); from GGUF or tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/status.h"

namespace nexus {

class GgufFile;

// Token kinds, numbered as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // BOS, EOS, <|im_start|>, ...: matched in text only when parse_special
  kUserDefined = 4,  // added tokens always matched as a whole, even without parse_special
  kUnused = 5,
  kByte = 6,  // <0xAB> byte-fallback tokens
};

// The tokenization algorithm.
enum class TokenizerKind : uint8_t {
  kSpm,        // tokenizer.ggml.model "llama": SentencePiece BPE with scores and byte fallback
  kBpe,        // "gpt2": byte-level BPE with ranked merges and a regex pre-tokenizer
  kWordPiece,  // "bert": BERT basic tokenizer + greedy longest-match WordPiece
};

// Immutable once loaded: encode, decode and the lookups may be called from several threads.
class Tokenizer {
 public:
  // Loads from a .gguf file (vocabulary from its metadata), a Hugging Face tokenizer.json, or a
  // directory holding tokenizer.json. For tokenizer.json, a tokenizer_config.json beside it
  // supplies bos/eos tokens and add_bos_token when present.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);
  // Builds the tokenizer described by a GGUF file's tokenizer.* metadata.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  // Builds from the text of a tokenizer.json (and optionally of its tokenizer_config.json);
  // `name` is used in error messages.
  static Result<std::unique_ptr<Tokenizer>> from_hf_json(std::string_view tokenizer_json,
                                                         std::string_view config_json,
                                                         const std::string& name);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text`. With add_bos, the model's own specials are added as it asks for them:
  // BOS when its add-BOS flag is set (tokenizer.ggml.add_bos_token; default true for SPM and
  // WordPiece ([CLS]), false for BPE except Llama 3 style), EOS when add_eos is set, and [SEP]
  // for WordPiece. With parse_special, control and unknown-type token texts in `text` (e.g.
  // "<|endoftext|>", "<s>") become those tokens, longest match first; user-defined tokens are
  // always matched. Invalid UTF-8 is tokenized as bytes where the model can represent them.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = true) const;
  // The exact bytes the ids stand for: the concatenated pieces (see token_to_piece), except that
  // for SPM the space the encoder inserted (add_space_prefix) at the start and after a control
  // token is removed again, so decode(encode(s, false)) == s. Control tokens render as their
  // text unless skip_special. Throws nexus::Error for an id outside [0, n_vocab()).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The bytes one token contributes to decoded text: <0xAB> byte tokens give the byte, SPM's
  // U+2581 gives a space, byte-level BPE characters are mapped back to bytes, WordPiece word
  // starts get a leading space and "##" continuations none; control tokens give their text.
  std::string token_to_piece(int32_t id) const;
  // The raw vocabulary string of a token.
  const std::string& token_text(int32_t id) const;
  TokenType token_type(int32_t id) const;
  float token_score(int32_t id) const;
  // The id whose vocabulary string is exactly `text`, or -1.
  int32_t token_id(std::string_view text) const;

  int64_t n_vocab() const;
  int32_t bos_id() const;  // -1 when the model has none
  int32_t eos_id() const;  // -1 when the model has none
  int32_t unk_id() const;  // -1 when the model has none
  int32_t pad_id() const;  // -1 when the model has none
  // End of generation: EOS, EOT/EOM and the usual end-of-turn control tokens (<|endoftext|>,
  // <|im_end|>, <|eot_id|>, <end_of_turn>, ...).
  bool is_eog(int32_t id) const;
  bool add_bos() const;  // whether encode(.., add_bos=true) prepends BOS
  bool add_eos() const;  // whether encode(.., add_bos=true) appends EOS
  TokenizerKind kind() const;
  // "llama (SPM)", "gpt2 (byte-level BPE, pre-tokenizer qwen2)", "bert (WordPiece)": for logs.
  std::string type_name() const;
  // The pre-tokenizer's name for BPE ("gpt-2", "llama-bpe", "qwen2", ..., "custom"), else "".
  const std::string& pre_name() const;

 private:
  struct Impl;  // src/tokenizer/tokenizer_impl.h
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  void check_id(int32_t id) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus
