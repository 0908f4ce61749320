// Import of Karpathy's llama2.c checkpoints (legacy "version 0" export: 7 x int32 header, then fp32
// tensors in run.c's order) and tokenizer.bin files into a GGUF with llama.cpp's names and
// metadata.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/status.h"

namespace nexus {

// The checkpoint header, validated: every count positive, heads dividing dim, kv heads dividing
// heads, an even head dimension.
struct Llama2cConfig {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t n_layers = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t vocab_size = 0;  // the absolute value of the header's field
  int32_t seq_len = 0;
  bool shared_classifier = true;  // header vocab_size > 0: the classifier is the token embedding

  int32_t head_dim() const { return dim / n_heads; }
  int32_t kv_dim() const { return n_kv_heads * head_dim(); }
  // Number of fp32 values after the header that a checkpoint with this config holds (saturates at
  // UINT64_MAX).
  uint64_t float_count() const;
  std::string to_string() const;
};

// A llama2.c vocabulary in llama.cpp's conventions: spaces as U+2581, <unk>/<s>/</s> for ids
// 0/1/2, and token types as in llama.cpp's convert-llama2c-to-ggml.
struct Llama2cVocab {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
};

// llama.cpp token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };

// Parses and validates a checkpoint header, and checks that the checkpoint's size matches it.
// `name` appears in error messages.
Result<Llama2cConfig> parse_llama2c_config(std::span<const uint8_t> checkpoint,
                                           const std::string& name);

// Parses a tokenizer.bin (int32 max_token_length, then per token: f32 score, int32 length,
// bytes) that must hold exactly `vocab_size` tokens.
Result<Llama2cVocab> parse_llama2c_tokenizer(std::span<const uint8_t> bytes, int32_t vocab_size,
                                             const std::string& name);

// Builds the GGUF (all F32): token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
// ffn_norm, ffn_gate, ffn_down, ffn_up}, output_norm, and output only when the classifier is not
// shared; llama.* hyper-parameters and the tokenizer.ggml.* vocabulary. `model_name` becomes
// general.name.
Result<GgufWriter> import_llama2c(std::span<const uint8_t> checkpoint,
                                  std::span<const uint8_t> tokenizer,
                                  const std::string& checkpoint_name,
                                  const std::string& tokenizer_name, const std::string& model_name);

// The same from files; general.name is the checkpoint's file name without its extension.
Result<GgufWriter> import_llama2c(const std::string& checkpoint_path,
                                  const std::string& tokenizer_path);

}  // namespace nexus
