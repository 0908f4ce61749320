// Model shapes given on the command line: "dim,layers,heads,kv_heads,ffn[,vocab]" as a llama
// config (tied output, head_dim = dim / heads, full-width RoPE), and byte sizes like "4GiB".
#pragma once

#include <cstdint>
#include <string>

#include "nexus/core/format_bytes.h"
#include "nexus/model.h"
#include "nexus/status.h"

namespace nexus::train {

// A llama config from "dim,layers,heads,kv_heads,ffn[,vocab]" (vocab 0 when left out); errors
// name the flag `flag` and the bad part.
Result<ModelConfig> parse_model_shape(const std::string& spec, const std::string& flag = "--shape");

// Turns a parsed shape into the named architecture: "llama" (as parsed), "qwen2"/"qwen3", "gpt2"
// (learned positions, LayerNorm, GELU, biases; no RoPE), "nexus-ltm" (llama with a long-term
// memory over segments of 64 tokens), "mamba"/"mamba2" (heads, kv_heads and
// ffn are the scan's heads, B/C groups and inner width) or "granitehybrid" (the attention layers'
// sizes as given, Mamba-2 layers between them). Errors name the unknown architecture.
Status set_shape_arch(ModelConfig& cfg, const std::string& arch);
// A granitehybrid's attention layers: "3,7" (the others are state-space).
Status set_attention_layers(ModelConfig& cfg, const std::string& list);

// "4GiB", "512MiB", "1.5GB", "64KiB", "123" (bytes): units B, KB/MB/GB/TB (powers of 1000) and
// KiB/MiB/GiB/TiB (powers of 1024), case-insensitive; errors quote the text.
Result<uint64_t> parse_byte_size(const std::string& text);

// "1.50 GiB", "12.00 MiB", "640 B" (core/format_bytes.h).
using nexus::format_bytes;

}  // namespace nexus::train
