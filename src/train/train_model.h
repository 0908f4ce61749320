// A llama-architecture model held for training: every parameter in one f32 allocation, every
// gradient in another, activations for one (batch, seq) step in an arena; explicit forward and
// backward passes built from train_ops.h, GGUF import (any dtype) and export.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/tensor.h"

namespace nexus {
class GgufFile;
class ThreadPool;
}  // namespace nexus

namespace nexus::train {

// One parameter tensor: its GGUF name, shape (outermost first) and place in the flat arrays.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats, into params() and grads()
  int64_t numel = 0;
};

struct InitOptions {
  float std = 0.02f;  // normal init of matrices and the embedding
  uint64_t seed = 1234;
  bool scale_out_proj = true;  // attn_output and ffn_down get std / sqrt(2 n_layers) (GPT-2)
};

class TrainModel {
 public:
  // A randomly initialised model (norm weights 1). `batch` and `seq` size the activation arena:
  // forward() accepts up to batch sequences of up to seq tokens. Only Arch::kLlama without a
  // sliding window is supported; other configs return an error naming the problem.
  static Result<std::unique_ptr<TrainModel>> create(const ModelConfig& cfg, int64_t batch,
                                                    int64_t seq, const InitOptions& init = {});
  // A model initialised from a GGUF llama checkpoint (weights of any computable dtype are
  // dequantized to f32), for fine-tuning.
  static Result<std::unique_ptr<TrainModel>> from_gguf(const std::string& path, int64_t batch,
                                                       int64_t seq);
  ~TrainModel();
  TrainModel(const TrainModel&) = delete;
  TrainModel& operator=(const TrainModel&) = delete;

  // Writes an F32 GGUF with llama.cpp tensor names and metadata that Model::load reads,
  // atomically. Tokenizer keys (tokenizer.*) are copied from `tokenizer_source` when given.
  Status export_gguf(const std::string& path, const GgufFile* tokenizer_source = nullptr) const;

  // Runs the model on tokens [b, t] (row-major) and returns the mean cross-entropy against
  // targets [b, t] (targets < 0 are ignored). Keeps the activations for backward().
  float forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t b,
                int64_t t);
  // The output head's backward runs inside forward(), fused with the loss over blocks of rows, so
  // the full [b * t, n_vocab] logits are never held (llm.c style); forward() keeps d(loss)/d(final
  // norm output) and the head's weight gradient for backward().
  // Adds d(mean loss)/d(parameter) of the last forward() to grads().
  void backward();
  void zero_grad();
  // Threads (our ThreadPool, the caller included) for the attention loops; default 1. The GEMMs
  // are threaded by OpenBLAS, whose thread count this does not change.
  void set_threads(int n);

  const ModelConfig& config() const { return cfg_; }
  int64_t max_batch() const { return batch_; }
  int64_t max_seq() const { return seq_; }
  const std::vector<ParamInfo>& tensors() const { return infos_; }
  // The parameter (or gradient) tensor named `name` as a view; throws when there is none.
  Tensor param(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  std::span<float> params() { return {params_, n_params_}; }
  std::span<const float> params() const { return {params_, n_params_}; }
  std::span<float> grads() { return {grads_, n_params_}; }
  std::span<const float> grads() const { return {grads_, n_params_}; }
  // Logits [b * t, n_vocab] of the last forward(), recomputed from its final-norm output with the
  // current output weights (one GEMM; for tests and inspection, not the training loop).
  std::vector<float> logits() const;

 private:
  struct LayerParams {
    float *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
  };
  struct Params {
    float* tok_embd;
    std::vector<LayerParams> layers;
    float *out_norm, *output;
  };
  // Saved activations (per layer arrays hold n_layers entries) and backward scratch.
  struct Activations {
    std::vector<float*> res, mid, ln1, rstd1, q, k, v, att, atty, ln2, rstd2, g, u, hact;
    float *lnf, *rstdf, *tmp, *rope_cs;
    // Output head: logits of head_rows_ rows at a time, each row's loss, d lnf, d output weight.
    float *logits, *row_loss, *dlnf, *head_grad;
    float *dres, *dln, *dhact, *dg, *du, *datty, *dq, *dk, *dv;
    int32_t *tokens, *targets;
  };

  TrainModel(const ModelConfig& cfg, int64_t batch, int64_t seq);
  static Status validate(const ModelConfig& cfg, int64_t batch, int64_t seq);
  Params bind(float* base) const;
  const ParamInfo* find(const std::string& name) const;
  // The output head and the fused cross-entropy with their backward; returns the mean loss.
  float head_forward(int64_t n);
  void init_random(const InitOptions& init);

  ModelConfig cfg_;
  int64_t batch_, seq_;
  int64_t head_rows_;  // rows of logits computed at a time
  std::vector<ParamInfo> infos_;
  size_t n_params_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  Params p_, g_;
  Arena arena_;
  Activations act_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> attn_scratch_;  // attention_backward_scratch(seq) floats per thread
  int64_t cur_b_ = 0, cur_t_ = 0;
  bool have_forward_ = false;
};

}  // namespace nexus::train
