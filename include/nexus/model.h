// A loaded language model: hyper-parameters plus weights memory-mapped from a GGUF file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/config.h"
#include "nexus/dtype.h"
#include "nexus/status.h"
#include "nexus/tensor.h"

namespace nexus {

class GgufFile;

// A tensor-parallel group (Megatron style): each rank holds a slice of every block, its share of
// the attention heads and of the feed-forward width, and the ranks sum the blocks' partial outputs
// twice a block. nexus/dist implements it over MPI.
class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums x[0, n) over the ranks in place; every rank gets the same values.
  virtual void all_reduce_sum(float* x, int64_t n) = 0;
};

// Whether a model splits over `size` tensor-parallel ranks: a transformer (llama, qwen2, qwen3,
// gpt2) whose heads, key/value heads and feed-forward width are multiples of `size`. The error
// names the size that does not divide.
Status check_tensor_parallel(const ModelConfig& full, int size);
// One rank's config: the heads, key/value heads and feed-forward width divided by `size` (the
// head size and everything else as in `full`).
ModelConfig tensor_parallel_config(const ModelConfig& full, int size);

// One block's weights (absent tensors are empty Tensors).
struct LayerWeights {
  Tensor attn_norm, attn_norm_b;
  Tensor wq, wk, wv, wo;           // separate projections (llama, qwen)
  Tensor wqkv, bqkv;               // fused projection (gpt2)
  Tensor bq, bk, bv, bo;
  Tensor q_norm, k_norm;           // qwen3 per-head RMSNorm
  Tensor memory_proj;              // nexus-ltm slot reduction: [kv_heads][head_dim][slots] (f32)
  Tensor memory_gate;              // nexus-ltm: per query head, sigmoid mixes memory and attention
  Tensor memory_eta, memory_theta, memory_alpha;  // nexus-ltm titans: per kv head, logits of the
                                                  // momentum, step and forgetting rates
  Tensor memory_w1, memory_w2;  // nexus-ltm titans deep memory: initial weights (f32), per kv head
                                // [head_dim][hidden] and [hidden][head_dim]
  Tensor ffn_norm, ffn_norm_b;
  Tensor w_gate, w_up, w_down;     // SwiGLU (llama, qwen) or up/down (gpt2)
  Tensor b_up, b_down;
  // Selective state-space mixer (mamba, mamba2).
  Tensor ssm_in, ssm_conv1d, ssm_conv1d_b, ssm_x, ssm_dt, ssm_dt_b, ssm_a, ssm_d, ssm_norm,
      ssm_out;
};

struct ModelWeights {
  Tensor tok_embd;
  Tensor pos_embd;                 // gpt2 learned positions
  std::vector<LayerWeights> layers;
  Tensor out_norm, out_norm_b;
  Tensor output;                   // == tok_embd when tied
};

class Model {
 public:
  // Opens a GGUF model; errors name the file and the problem (unknown arch, missing tensor, ...).
  static Result<std::unique_ptr<Model>> load(const std::string& path);
  // Loads this rank's slice of the model for tensor parallelism over `tp` (kept, for the
  // forward's sums; it must outlive the model): config() is then the slice's
  // (tensor_parallel_config), and every rank must run the same forward passes.
  static Result<std::unique_ptr<Model>> load(const std::string& path, TensorParallel* tp);
  // Builds a model from an already parsed file (the file's mapping is kept alive).
  static Result<std::unique_ptr<Model>> from_gguf(std::shared_ptr<const GgufFile> file);

  ~Model();
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const GgufFile& gguf() const { return *file_; }
  // The tensor-parallel group this model is a slice for; null when it is whole.
  TensorParallel* tensor_parallel() const { return tp_; }
  int64_t n_params() const;
  // Bytes of the file's tensors (llama-bench's model size).
  size_t weight_bytes() const;
  // Bytes the loaded weights take: after the load-time layouts, so a 2:4 model's compressed
  // projections count at their compressed size (each shared tensor once).
  size_t loaded_weight_bytes() const;
  // The loaded bytes of the weight the file names `name` ("blk.0.attn_q.weight"); 0 when the model
  // holds no such weight.
  size_t loaded_tensor_bytes(std::string_view name) const;
  // The GGUF name of one of this model's weights, found by its data ("blk.3.attn_q.weight");
  // empty for a tensor that is not one of them. For tools that report per weight (imatrix).
  std::string tensor_name(const Tensor& t) const;

 private:
  // from_gguf; `file_mapped` says the file's bytes are a read-only file mapping (Model::load), so
  // pages of repacked weights may be handed back (models/weight_repack.h).
  static Result<std::unique_ptr<Model>> build(std::shared_ptr<const GgufFile> file,
                                              bool file_mapped, TensorParallel* tp = nullptr);

  ModelConfig config_;
  ModelWeights weights_;
  std::shared_ptr<const GgufFile> file_;
  TensorParallel* tp_ = nullptr;
};

}  // namespace nexus
