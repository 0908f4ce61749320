// Random-weight benchmark models: fixed llama / qwen3 shapes written as GGUF files that both nexus
// and llama.cpp load (llama.cpp tensor names and keys, a dummy tokenizer), with normal(0, 0.02)
// matrices, unit norm weights and llama-quantize's choice of type for every tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {

// Hyper-parameters of a generated model.
struct ModelShape {
  std::string name = "custom";  // preset name (L15M, L110M, Q06B) or "custom"
  std::string arch = "llama";   // "llama" (SentencePiece-style vocab) or "qwen3" (byte-level BPE)
  int64_t dim = 64;
  int64_t n_layers = 2;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t head_dim = 16;
  int64_t ffn_dim = 128;
  int64_t n_vocab = 512;
  int64_t n_ctx = 2048;  // written as ARCH.context_length
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied = true;  // output head shares token_embd (no output.weight tensor)
};

// A preset (L15M, L110M, Q06B; case-insensitive) or "custom:key=value,..." with keys arch, dim,
// layers, heads, kv_heads, head_dim, ffn, vocab, ctx, tied (0/1), rope_theta, eps; unset keys take
// the llama/qwen3 defaults (kv_heads = heads, head_dim = dim / heads). Errors name the bad key.
Result<ModelShape> parse_model_shape(std::string_view spec);
// Parameters of a shape (all tensors, the tied head counted once).
int64_t model_shape_params(const ModelShape& s);

// The file types gen-model writes; each maps to a llama.cpp `general.file_type` (llama_ftype).
enum class ModelFileType { kF32, kF16, kQ8_0, kQ4_0, kQ4_K_M };
// "f32", "f16", "q8_0", "q4_0", "q4_k" / "q4_k_m" (case-insensitive).
std::optional<ModelFileType> parse_model_file_type(std::string_view name);
// llama_ftype id: 0, 1, 7, 2, 15.
uint32_t llama_ftype_id(ModelFileType t);
// llama.cpp's name for a llama_ftype id ("F32", "Q4_K - Medium", ...); "ftype N" if unknown.
std::string llama_ftype_name(uint32_t ftype);

// One tensor of the generated file.
struct PlannedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // outermost first
  bool unit = false;           // filled with 1.0 (norm weights) instead of random values
};

// Every tensor in file order with its type. Without `pure` the types follow llama-quantize:
// 1-D tensors F32; the output head (output.weight, or token_embd when tied) Q6_K for q4_0/q4_k
// and Q8_0 for q8_0; for q4_k (= Q4_K_M) attn_v and ffn_down of the "more bits" layers Q6_K; rows
// that do not fit a K-quant's 256 block fall back (Q4_K -> Q5_0, Q6_K -> Q8_0). With `pure` every
// matrix gets the target type (fallbacks still apply). Errors when a row fits no allowed type.
Result<std::vector<PlannedTensor>> plan_model_tensors(const ModelShape& shape, ModelFileType type,
                                                      bool pure);

struct GenModelOptions {
  ModelShape shape;
  ModelFileType type = ModelFileType::kF32;
  uint64_t seed = 1;
  float stddev = 0.02f;
  bool pure = false;
  int n_threads = 1;
  size_t chunk_bytes = size_t{32} << 20;  // rows generated per write chunk (bounds memory)
};

struct GenModelStats {
  int64_t n_params = 0;
  size_t file_bytes = 0;
  int n_tensors = 0;
};

// Writes a random model to `path` (atomically). The bytes depend only on the shape, type and seed,
// not on the thread count or chunk size. Errors name the path or the type this build cannot
// quantize to.
Status write_random_model(const GenModelOptions& opts, const std::string& path,
                          GenModelStats* stats = nullptr);

}  // namespace nexus
