// Dummy tokenizer vocabularies for random benchmark models: enough for llama.cpp's vocab loader
// (SentencePiece-style "llama" for llama shapes, byte-level BPE "gpt2" + pre "qwen2" for qwen3).
#pragma once

#include <cstdint>

#include "harness/random_model.h"

namespace nexus {

class GgufStreamWriter;

// Smallest vocabulary the dummy tokenizers fit in (3 special tokens + 256 byte tokens + 1).
constexpr int64_t kMinRandomVocab = 260;

// Adds tokenizer.ggml.* keys describing shape.n_vocab tokens to `w`.
void add_dummy_vocab(const ModelShape& shape, GgufStreamWriter* w);

}  // namespace nexus
