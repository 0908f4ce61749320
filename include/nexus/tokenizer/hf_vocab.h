// The tokenizer.ggml.* vocabulary of a GGUF made from a Hugging Face tokenizer.json (and its
// tokenizer_config.json), in the form llama.cpp's converter writes, for `nexus convert --hf`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nexus/io/gguf.h"
#include "nexus/status.h"

namespace nexus {

// What the import found, for the CLI's summary line.
struct HfVocabSummary {
  std::string model;  // "gpt2" (byte-level BPE) or "llama" (SentencePiece-style BPE)
  std::string pre;    // tokenizer.ggml.pre
  int64_t n_tokens = 0;
  int64_t n_merges = 0;
};

// Writes the vocabulary keys into `w`:
// - byte-level BPE (a ByteLevel pre-tokenizer): tokenizer.ggml.model "gpt2", tokenizer.ggml.pre
//   the name of the known pre-tokenizer whose regexes equal the file's (the converter hashes the
//   tokenizer's output on a probe text instead; nexus compares the configuration, and refuses a
//   pre-tokenizer it does not know rather than guessing), tokens, token_type, merges;
// - BPE with byte_fallback (Llama 1/2, Mistral): "llama", pre "default", tokens, token_type,
//   scores (minus the rank of the merge that makes each token, so SentencePiece's best-score-first
//   merging follows the BPE merge order), add_space_prefix from the normalizer/pre-tokenizer.
// Then bos/eos/unk/pad ids (tokenizer_config.json's tokens, else config.json's *_token_id),
// add_bos_token/add_eos_token (tokenizer_config.json, else the post-processor's template) and
// tokenizer.chat_template (tokenizer_config.json's, else `chat_template`, e.g. from
// chat_template.jinja). `n_vocab` (config.json's vocab_size, or 0) pads the list with [PADn]
// unused tokens up to the embedding's rows. `name` names the file in errors.
Result<HfVocabSummary> add_hf_vocab(std::string_view tokenizer_json, std::string_view config_json,
                                    std::string_view model_config_json,
                                    std::string_view chat_template, int64_t n_vocab,
                                    const std::string& name, GgufWriter& w);

// The tokenizer.json equivalent of a checkpoint that ships the slow GPT-2 tokenizer's files
// (vocab.json, merges.txt) instead: byte-level BPE with GPT-2's pre-tokenizer, the merges in file
// order (a "#version" first line skipped), and tokenizer_config.json's added_tokens_decoder as the
// added tokens. Only for tokenizer_class GPT2Tokenizer(Fast): other slow tokenizers that use the
// same files (Qwen2Tokenizer) split text differently, so they are refused by name.
Result<std::string> gpt2_tokenizer_json(std::string_view vocab_json, std::string_view merges_txt,
                                        std::string_view config_json, const std::string& name);

}  // namespace nexus
