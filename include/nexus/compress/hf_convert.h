// Hugging Face checkpoint folders (config.json, safetensors, tokenizer.json) to GGUF, with the
// metadata keys, tensor names and layouts that llama.cpp's convert_hf_to_gguf.py writes, for
// LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and GPT2LMHeadModel (`nexus convert --hf`).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "nexus/dtype.h"
#include "nexus/io/gguf.h"
#include "nexus/status.h"

namespace nexus {

struct HfConvertOptions {
  // Weight type of the matrices; unset: the converter's "auto" (BF16 when the checkpoint's first
  // matrix is BF16, else F16). Vectors and norms are F32 whatever the type.
  std::optional<DType> type;
  // Called once per tensor with a line saying what was read and how it was stored.
  std::function<void(const std::string&)> progress;
};

// What the conversion made, for the CLI's summary.
struct HfConvertResult {
  GgufWriter writer;
  std::string architecture;  // the GGUF one: llama, qwen2, qwen3, gpt2
  DType type = DType::kF16;  // the matrices' type
  std::string vocab;         // e.g. "gpt2 (pre qwen2), 151643 tokens, 151387 merges"
};

// Reads the checkpoint folder `dir` and builds the GGUF in memory. Errors (a missing folder,
// config.json, tokenizer.json or tensor; an unsupported architecture, named; a tensor whose shape
// differs from the one config.json implies; a corrupt safetensors file; an unused tensor, which
// would mean a variant of the architecture nexus does not know) name the file and tensor.
Result<HfConvertResult> convert_hf(const std::string& dir, const HfConvertOptions& options);

}  // namespace nexus
