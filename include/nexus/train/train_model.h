// A model held for training (llama, qwen2, qwen3, gpt2): every parameter in one f32 allocation,
// every gradient in another, activations for one (batch, seq) step in an arena laid out from the
// blocks' layer types (models/layer.h) under the memory mode in force; explicit forward and
// backward passes that walk the blocks; GGUF import (any dtype) and export.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backends/api/attention.h"
#include "nexus/core/allocator.h"
#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/tensor.h"
#include "nexus/train/precision.h"
#include "models/layer.h"

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
  // The optimizer may be handed any whole rows of it on their own (TrainModel defers the tied
  // embedding's batch rows): AdamW and SGD cut it into pieces of one row.
  bool row_pieces = false;
};

struct InitOptions {
  float std = 0.02f;  // normal init of matrices and the embedding
  uint64_t seed = 1234;
  bool scale_out_proj = true;  // attn_output and ffn_down get std / sqrt(2 n_layers) (GPT-2)
  // False: every parameter is left zero, for a model whose parameters are copied in next (a
  // checkpoint's, or gathered from tensor-parallel slices).
  bool random = true;
  // nexus-ltm titans: the forgetting rate the memory starts from (learned from there). Small
  // rates keep a key for longer than training's samples reach (the memory keeps (1 - a)^n of it
  // after n segments).
  float memory_forget = 0.02f;
};

// How the training pass trades memory for time.
struct TrainOptions {
  // Gradient checkpointing per block: forward() keeps only each block's input (the residual
  // stream) and backward() recomputes a block's forward into one shared set of buffers right
  // before that block's backward. The arena then holds one block's activations instead of
  // n_layers; gradients are bit-identical to the default, at the cost of one more forward of
  // the blocks (minus their last projection) per step.
  bool recompute_blocks = false;
  // Mixed precision (precision.h): with kBF16 or kF16 the saved activations are kept in 16 bits
  // (one f32 working set of block activations serves the block being computed), weights are used
  // as rounded copies of the f32 masters, and activation gradients are rounded as they flow back.
  // The residual stream, norm statistics, parameter gradients and all sums stay f32.
  Precision precision = Precision::kF32;
  // Selective recompute (Megatron's "selective" granularity): blocks keep their q, k, v, FFN
  // input(s) and residual midpoint, and share one working set for the attention probabilities
  // and output, the norm outputs and the FFN activation, which backward() recomputes from the
  // kept ones before each block (two norms, an activation and the attention's forward: no
  // projection). Gradients are bit-identical to the default. Ignored with recompute_blocks, which
  // already keeps a single set.
  bool selective_recompute = false;
  // The optimizer step in backward (torchtune's optimizer_in_bwd): backward() passes each block's
  // gradients to the grad-ready callback (set_grad_ready) as soon as they are complete and reuses
  // their buffer for the next block, so the model holds the gradients of one block plus those of
  // the tensors outside the blocks (embeddings, final norm, untied output) instead of all of them.
  // grads() is then unavailable. It rules out gradient clipping, accumulation and loss scaling
  // (each needs every gradient before the first update); the Trainer checks that.
  bool update_in_backward = false;
  // The optimizer can update any whole rows of a matrix on their own (AdamW and SGD, not
  // Adafactor's factored statistics). With checkpointing, the optimizer in backward and a tied
  // embedding, the embedding's rows outside the batch are then updated right after the output
  // head, and its dense gradient shares memory with the blocks' buffers (the batch's rows wait in
  // a compact copy for the embedding's scatter at the end of backward).
  bool row_updates = false;
  // Tensor parallelism: the model is `tp`'s rank's slice (its config is tensor_parallel_config of
  // the full one; nexus/dist cuts its parameters from the full model's), and its blocks sum their
  // partial products over the group: two sums a block forward, two backward. The group must
  // outlive the model; null: the whole model.
  TensorParallel* tp = nullptr;
  // Pipeline parallelism: the model is one stage, blocks [first_layer, first_layer + n_layers of
  // its config) of a model of total_layers (0: the whole model), its tensors named by their place
  // in that model. The first stage alone has the embeddings; the last alone the final norm and
  // output head (and, tied, the token table as the head's weights). A stage without the
  // embeddings reads its input from stage_input(), filled before forward(); one without the head
  // returns no loss, and takes d loss / d its output in stage_grad() before backward(), which
  // leaves d loss / d its input there.
  int64_t first_layer = 0, total_layers = 0;
};

// The memory-saving modes `o` turns on, for progress lines: "gradient checkpointing", "selective
// recompute" (unless checkpointing, which supersedes it), "optimizer in backward", joined by ", ";
// empty when none is on.
std::string memory_modes(const TrainOptions& o);

// Bytes of the activation arena by purpose (all of it counted as MemCategory::kActivations).
struct ActivationBytes {
  size_t blocks = 0;        // per-block saved activations (n_layers sets, or 1 when recomputing)
  size_t block_inputs = 0;  // the residual stream at each block boundary (n_layers + 1)
  size_t head = 0;          // final norm, one row block of logits, row losses, d(output)
  size_t scratch = 0;       // backward scratch, RoPE table, token ids
  size_t half = 0;          // 16-bit copies of the saved block activations (mixed precision)
  size_t total() const { return blocks + block_inputs + head + scratch + half; }
};

class TrainModel {
 public:
  // A randomly initialised model (norm weights 1, biases 0). `batch` and `seq` size the
  // activation arena: forward() accepts up to batch sequences of up to seq tokens. Arch::kLlama
  // (no sliding window) and Arch::kGpt2 (head_dim * heads == dim, n_ctx_train >= seq rows of
  // learned positions) are supported; other configs return an error naming the problem.
  static Result<std::unique_ptr<TrainModel>> create(const ModelConfig& cfg, int64_t batch,
                                                    int64_t seq, const InitOptions& init = {},
                                                    const TrainOptions& opts = {});
  // A model initialised from a GGUF llama, qwen2, qwen3 or gpt2 checkpoint (weights of any computable dtype
  // are dequantized to f32), for fine-tuning.
  static Result<std::unique_ptr<TrainModel>> from_gguf(const std::string& path, int64_t batch,
                                                       int64_t seq, const TrainOptions& opts = {});
  ~TrainModel();
  TrainModel(const TrainModel&) = delete;
  TrainModel& operator=(const TrainModel&) = delete;

  // Writes an F32 GGUF with llama.cpp tensor names and metadata (its architecture) that Model::load
  // reads,
  // atomically. Tokenizer keys (tokenizer.*) are copied from `tokenizer_source` when given.
  Status export_gguf(const std::string& path, const GgufFile* tokenizer_source = nullptr) const;

  // Runs the model on tokens [b, t] (row-major) and returns the mean cross-entropy against
  // targets [b, t] (targets < 0 are ignored). With `for_backward` it keeps the activations for
  // backward() and runs the output head's backward too, fused with the loss over blocks of rows,
  // so the full [b * t, n_vocab] logits are never held (llm.c style): it keeps d(loss)/d(final
  // norm output) and already adds the head's weight gradient to grads(). So call zero_grad()
  // before forward(), not between forward() and backward(). Without `for_backward` (evaluation)
  // it computes the loss only and leaves grads() alone.
  float forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t b,
                int64_t t, bool for_backward = true);
  // Adds the rest of d(mean loss)/d(parameter) of the last forward() to grads() (with
  // update_in_backward: hands them to the grad-ready callback, block by block).
  void backward();
  void zero_grad();
  // With update_in_backward, backward() calls fn(begin, end, grads) for each range of whole
  // tensors [begin, end) of the flat parameter array whose gradients are complete, where
  // grads[i - begin] is element i's: every block's range right after that block's backward (its
  // buffer is reused by the next block), then the tensors before and after the blocks.
  using GradReady = std::function<void(size_t begin, size_t end, const float* grads)>;
  void set_grad_ready(GradReady fn) { grad_ready_ = std::move(fn); }
  // Without update_in_backward: backward() calls fn(begin, end) as the gradients of each range of
  // whole tensors in grads() become final for this pass (each block's right after its backward,
  // last block first, then the tensors before and after the blocks), so data parallelism can
  // start sending them while backward goes on. Null turns it off.
  using GradsDone = std::function<void(size_t begin, size_t end)>;
  void set_grads_done(GradsDone fn) { grads_done_ = std::move(fn); }
  // Threads (our ThreadPool, the caller included) for the attention loops; default 1. The GEMMs
  // are threaded by OpenBLAS, whose thread count this does not change.
  void set_threads(int n);
  // Multiplies the loss gradient (and so every gradient backward() adds) by `scale`: the loss
  // scaling of fp16 training. The caller divides the gradients by it before the update.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  float loss_scale() const { return loss_scale_; }
  // Knowledge distillation in the next forward()s with for_backward: the teacher's logits
  // [b * t, n_vocab] of that batch (the caller keeps them until backward() returns), and the
  // loss of ops/loss.h's distill_loss_fused in place of the cross-entropy. Null turns it off.
  // Evaluation passes keep the cross-entropy. The logits are not rounded in mixed precision.
  void set_teacher(const float* logits, float temperature, float alpha) {
    teacher_ = logits, temperature_ = temperature, alpha_ = alpha;
  }
  // Bytes of the rounded weight copies mixed precision computes with (0 in f32).
  size_t weight_copy_bytes() const { return wcopy_floats_ * sizeof(float); }

  const ModelConfig& config() const { return cfg_; }
  // Pipeline stages (TrainOptions::first_layer): whether this one embeds the tokens, whether it
  // has the head and the loss, and its boundary buffers ([b * t, dim] of the last forward()).
  bool has_embedding() const { return opts_.first_layer == 0; }
  bool has_head() const {
    return opts_.total_layers == 0 || opts_.first_layer + cfg_.n_layers == opts_.total_layers;
  }
  float* stage_input() { return act_.res[0]; }
  const float* stage_output() const { return act_.res[static_cast<size_t>(cfg_.n_layers)]; }
  float* stage_grad() { return act_.dres; }
  int64_t max_batch() const { return batch_; }
  int64_t max_seq() const { return seq_; }
  const TrainOptions& options() const { return opts_; }
  // The arena's layout by purpose; total() is its capacity.
  const ActivationBytes& activation_bytes() const { return act_bytes_; }
  const std::vector<ParamInfo>& tensors() const { return infos_; }
  // The parameter (or gradient) tensor named `name` as a view; throws when there is none.
  Tensor param(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  std::span<float> params() { return {params_, n_params_}; }
  std::span<const float> params() const { return {params_, n_params_}; }
  // Every gradient, in the parameters' layout; throws with update_in_backward (not kept).
  std::span<float> grads();
  std::span<const float> grads() const;
  // Logits [b * t, n_vocab] of the last forward(), recomputed from its final-norm output with the
  // current output weights (one GEMM; for tests and inspection, not the training loop).
  std::vector<float> logits() const;

 private:
  // The tensors outside the blocks (or their gradients); null where the architecture has none.
  struct Outer {
    float *tok_embd, *pos_embd, *out_norm, *out_norm_b, *output;
  };
  // Block inputs res[0..n_layers] (res[n_layers] is the last block's output), the sets of saved
  // block activations by the layer type's SavedSlot index (n_layers sets, or one shared working
  // set, whose per-block parts the other sets point to their own copies of), the backward scratch
  // by ScratchSlot index, and the head's buffers.
  struct Activations {
    std::vector<float*> res;
    std::vector<std::vector<float*>> sets;
    std::vector<float*> scratch;
    float *lnf, *rstdf, *meanf, *rope_cs;
    // Output head: logits of head_rows_ rows at a time, each row's loss, d lnf.
    float *logits, *row_loss, *dlnf;
    float *dres, *dln;
    int32_t *tokens, *targets;
  };

  TrainModel(const ModelConfig& cfg, int64_t batch, int64_t seq, const TrainOptions& opts);
  // `slice`: a tensor-parallel slice, whose heads need not fill dim.
  static Status validate(const ModelConfig& cfg, int64_t batch, int64_t seq, bool slice = false);
  void layout_params();
  void layout_activations();
  // Points p_/g_ and pw_/gw_ at every tensor and its gradient slot (grad_at: updating in
  // backward, every block shares one block's slot).
  void bind();
  // Where the gradient of the parameter at `offset` (in params_) lives.
  float* grad_at(size_t offset) const;
  const ParamInfo* find(const std::string& name) const;
  // The output head and the fused cross-entropy with their backward; returns the mean loss.
  float head_forward(int64_t n, bool for_backward);
  bool init_ssm(const ParamInfo& info, float* p, std::mt19937_64& rng) const;
  void init_random(const InitOptions& init);
  // The pass of block l over saved-activation set `set` with weights `w` (by slot).
  LayerPass layer_pass(int64_t l, int64_t set, const float* const* w) const;
  // Block l's forward from res[l] into its set; writes res[l + 1] only when `write_output` (a
  // recompute for the backward needs every saved activation but not the block's output).
  void block_forward(int64_t l, int64_t set, bool write_output);
  // Adds block l's parameter gradients and turns dres (d loss / d res[l + 1]) into d / d res[l].
  // With `restore`, first brings block l's activations back into the shared working set.
  void block_backward(int64_t l, int64_t set, bool restore = false);
  void final_norm_forward(int64_t n);
  void final_norm_backward(int64_t n);
  // Mixed precision (train_model_half.cc). The weights of block l to compute with, by slot: the
  // masters in f32, else their rounded copy in wcopy_layer_ (made again only when another block's
  // copy is there: a backward right after its forward, or a recompute, reuses it).
  const float* const* layer_weights(int64_t l);
  // Rounds a buffer in place (no-op in f32).
  void keep(float* x, int64_t count);
  // Rounds an activation gradient in place (no-op in f32).
  void round_grad(float* x, int64_t count);
  // Brings block l's activations back into the shared working set before its backward: unpacks
  // its 16-bit copies (mixed precision) and has the layer type recompute the ones not kept.
  void restore_block(int64_t l, const LayerPass& pass);
  bool half() const { return opts_.precision != Precision::kF32; }
  // Whether every GEMM operand holds bf16 values (the bf16 mode rounds weight copies, kept
  // activations and gradients), which lets matmul_forward/backward use AMX tiles.
  bool bf16_ops() const { return opts_.precision == Precision::kBF16; }

  ModelConfig cfg_;
  int64_t batch_, seq_;
  TrainOptions opts_;
  int64_t head_rows_;  // rows of logits computed at a time
  ActivationBytes act_bytes_;
  std::vector<ParamInfo> infos_;
  size_t n_params_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  size_t grad_floats_ = 0;  // n_params_, or less with update_in_backward
  size_t blocks_begin_ = 0, blocks_end_ = 0, block_floats_ = 0;  // the blocks in params_
  // Updating in backward: the blocks' shared gradient slot, in grads_ or (checkpointing) in the
  // activation arena.
  float* slot_ = nullptr;
  bool slot_in_arena_ = false;
  // row_updates in effect (see TrainOptions): the tied embedding's dense gradient in the arena,
  // the batch's distinct tokens (sorted) and their rows of it, and each position's index among
  // them.
  bool defer_rows_ = false;
  float* tied_grad_ = nullptr;
  float* batch_rows_ = nullptr;
  int32_t* row_index_ = nullptr;
  std::vector<int32_t> batch_tokens_;
  // Floats of the tied embedding when its rows are deferred (its gradient is then not in grads_),
  // else 0.
  size_t deferred_floats() const {
    return defer_rows_ ? static_cast<size_t>(cfg_.n_vocab * cfg_.dim) : 0;
  }
  void update_rows_outside_batch(int64_t n);
  void update_batch_rows();
  GradReady grad_ready_;
  GradsDone grads_done_;
  bool shared_set_ = false;  // blocks share one working set (restore before backward)
  Outer p_, g_;
  // The layer type of each block, the architecture's block tensor table, and each block's
  // parameters and gradients by slot.
  std::vector<const LayerType*> layers_;
  std::vector<LayerSlot> slots_;
  std::vector<std::vector<float*>> pw_, gw_;
  std::vector<const float*> wview_;  // layer_weights' pointers into the rounded copy
  Arena arena_;
  Activations act_;
  // Mixed precision without checkpointing: each block's 16-bit copies by SavedSlot index (all
  // but the last block, which stays in the working set); empty otherwise.
  std::vector<std::vector<uint16_t*>> half_;
  // Rounded weight copies: one block's parameters, the output matrix and the final norm.
  float* wcopy_ = nullptr;
  size_t wcopy_floats_ = 0;
  float *wcopy_layer_ = nullptr, *wcopy_head_ = nullptr, *wcopy_norm_ = nullptr;
  // The block whose rounded copy wcopy_layer_ holds; -1 at each forward() (the optimizer may
  // have changed the masters since the last pass).
  int64_t wcopy_layer_id_ = -1;
  std::vector<std::pair<size_t, size_t>> layer_range_;  // [begin, end) of block l in params_
  float loss_scale_ = 1.0f;
  const float* teacher_ = nullptr;  // set_teacher
  float temperature_ = 1.0f, alpha_ = 1.0f;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> attn_scratch_;  // attention_backward_scratch(seq) floats per thread
  int64_t cur_b_ = 0, cur_t_ = 0;
  bool have_forward_ = false;
};

}  // namespace nexus::train
