// Per-call state of a forward pass: the batch, preallocated activation buffers (sized for the
// context's max batch, so no allocation per token), the KV cache and the threads.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backends/cpu/kv_cache.h"
#include "backends/cpu/ssm_state.h"
#include "models/ltm_state.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "nexus/model.h"
#include "ops/decode_schedule.h"

namespace nexus {

struct ForwardState {
  int64_t n = 0;  // tokens in the batch
  const int32_t* token = nullptr;
  const int32_t* pos = nullptr;
  const int32_t* seq = nullptr;
  const int32_t* out_rows = nullptr;  // batch rows whose logits are wanted
  int64_t n_out = 0;
  float* logits = nullptr;            // [n_out][n_vocab], or [n_out][dim] with hidden_only
  bool hidden_only = false;           // the output head stops after its norm (embeddings)

  // Activations, each with room for max_batch rows.
  float* x = nullptr;     // residual stream [n][dim]
  float* h = nullptr;     // normed input / projection output [n][max(dim, q width)]
  float* q = nullptr;     // [n][n_heads * head_dim]
  float* k = nullptr;     // [n][n_kv_heads * head_dim]
  float* v = nullptr;
  float* att = nullptr;   // attention output [n][n_heads * head_dim]
  float* a = nullptr;     // ffn [n][ffn_dim]
  float* b = nullptr;     // ffn [n][ffn_dim]
  float* qkv = nullptr;   // fused projection output [n][q + 2 kv width] (gpt2)
  float* rope_cs = nullptr;       // [n][rope_dim/2][2]
  float* attn_scratch = nullptr;  // per-thread attention tiles

  KvCache* kv = nullptr;
  // State-space layers: each sequence's recurrent state, and their working buffers
  // (ssm_scratch_floats for the max batch).
  SsmState* ssm = nullptr;
  float* ssm_buf = nullptr;
  // Hybrids: the KV cache layer of each attention layer and the state layer of each state-space
  // layer (null: the model's layer index).
  const int32_t* kv_slot = nullptr;
  const int32_t* state_slot = nullptr;
  int64_t kv_index(int64_t l) const { return kv_slot ? kv_slot[l] : l; }
  int64_t state_index(int64_t l) const { return state_slot ? state_slot[l] : l; }
  // nexus-ltm: each sequence's memory and segment (st.pos are then positions within the segment,
  // and a batch holds one segment's tokens of each sequence); `mem` [n][n_heads * head_dim] takes
  // the memory's reads.
  LtmState* ltm = nullptr;
  float* mem = nullptr;
  ThreadPool* pool = nullptr;
  Arena* scratch = nullptr;  // reset before each matmul
  // The decode step's matmul order, for the workers' prefetch of the next matmul (may be null).
  DecodeSchedule* schedule = nullptr;
};

// y = x W^T (+ bias when `b` is not empty), for st.n rows. `name` (static) labels the profile span.
void linear(const Tensor& w, const Tensor& b, const float* x, int64_t n, float* y,
            ForwardState& st, const char* name = "matmul");
// Several linears of the same input x as one matmul_group (decode pays one thread hand-off for
// all of them); profiled as one op `name`. Biases may be empty tensors.
struct LinearOut {
  const Tensor* w;
  const Tensor* b;
  float* y;
};
void linear_group(std::initializer_list<LinearOut> outs, const float* x, int64_t n,
                  ForwardState& st, const char* name);
// Writes the step's keys and values into the cache.
void store_kv(int64_t layer, ForwardState& st);
// Final norm (RMS or, with a bias, Layer norm) of the wanted rows and the output projection.
void output_head(const Model& model, ForwardState& st, bool layer_norm);
// Floats of ForwardState::ssm_buf for a batch of n tokens (0 without state-space layers).
int64_t ssm_scratch_floats(const ModelConfig& c, int64_t n);
// Runs every layer (through its layer type, models/layer.h) and the output head for the tokens
// in `st`, whose residual stream st.x holds their embeddings.
void forward_model(const Model& model, ForwardState& st);

}  // namespace nexus
