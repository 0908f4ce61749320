// An inference context: a model plus KV cache, scratch arena and threads. decode() runs the
// forward pass for a batch of tokens that may belong to several sequences at different positions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nexus/config.h"
#include "nexus/device.h"
#include "nexus/dtype.h"
#include "nexus/model.h"
#include "nexus/status.h"

namespace nexus {

struct ContextOptions {
  int64_t n_ctx = 0;            // positions per sequence (0 = the model's training context)
  int n_seq = 1;                // sequences held at once
  DType kv_type = DType::kF16;  // kF16, kF32 or kQ8_0
  // The KV cache is paged: blocks of kv_block positions (0 = n_ctx: one block per sequence) from a
  // pool of kv_blocks (0 = enough for n_seq full contexts), taken as sequences grow.
  int64_t kv_block = 0;
  int64_t kv_blocks = 0;
  int n_threads = 1;
  int64_t max_batch = 512;      // most tokens per decode() call
  AttentionImpl attention = AttentionImpl::kFlash;
  // Where the weights, the cache and the forward pass live. Only the CPU has kernels yet: another
  // device is checked (built, present) and then refused with the reason.
  Device device = Device::cpu();
};

// Tokens to run: token[i] at position pos[i] of sequence seq[i]; logits are returned for the rows
// with want_logits[i] (empty = only the last token).
struct Batch {
  std::vector<int32_t> token;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> want_logits;

  void add(int32_t t, int32_t p, int32_t s, bool logits) {
    token.push_back(t);
    pos.push_back(p);
    seq.push_back(s);
    want_logits.push_back(logits ? 1 : 0);
  }
  size_t size() const { return token.size(); }
  void clear() { token.clear(); pos.clear(); seq.clear(); want_logits.clear(); }
};

// State-space models: a copy of one sequence's recurrent state after position pos - 1, so that a
// sequence can go back to pos (roll back) or start there (a shared prompt prefix) without
// recomputing the tokens before it.
struct RecurrentSnapshot {
  int32_t pos = -1;          // the positions [0, pos) the state has seen
  std::vector<float> state;  // every recurrent layer's conv rows and scan state
  size_t bytes() const { return state.size() * sizeof(float); }
};

class ContextImpl;

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(const Model& model, const ContextOptions& opts);
  ~Context();

  // What decode() returns for each requested token: its logits (n_vocab floats), or the hidden
  // state the output head would project (dim floats, after the final norm: embeddings).
  enum class Output { kLogits, kHidden };
  // Runs the batch. The KV cache of each sequence must already hold positions [0, pos) for the
  // sequence's first token in the batch (positions within a sequence are consecutive).
  // On success `out` holds one row per requested token, in batch order.
  Status decode(const Batch& batch, std::vector<float>* out, Output what = Output::kLogits);
  // Forgets a sequence's cached positions (all of them, or from `from_pos` on).
  void clear_seq(int seq, int32_t from_pos = 0);
  // Positions currently cached for `seq`.
  int32_t seq_len(int seq) const;
  // `dst` (empty) starts with the first n_pos cached positions of `src`, their full KV blocks
  // shared rather than copied (a common prompt prefix stored once). An error names the reason
  // (dst not empty, src shorter, no free block for a partial last block).
  Status share_prefix(int src, int dst, int32_t n_pos);
  // The same for a model with recurrent state, at a position where a snapshot of src's state was
  // taken (its first snap.pos positions, the snapshot's state): a recurrent state cannot be
  // shared short of its latest position otherwise.
  Status share_prefix(int src, int dst, const RecurrentSnapshot& snap);
  // State-space models: `seq`'s recurrent state after its latest token (an error for a model
  // without recurrent state or a sequence rolled back past its state).
  Status save_state(int seq, RecurrentSnapshot* out) const;
  // `seq` goes back to snap.pos: its later positions are dropped and its recurrent state becomes
  // the snapshot's. It must hold at least snap.pos positions, the ones the snapshot was taken
  // after (which tokens those were is the caller's to know).
  Status restore_state(int seq, const RecurrentSnapshot& snap);
  struct KvUsage {
    int64_t block_size = 0;    // positions per block
    int64_t blocks_total = 0;
    int64_t blocks_used = 0;   // taken by at least one sequence
  };
  KvUsage kv_usage() const;
  // State-space layers: sequence `seq`'s recurrent state at model layer `layer` after its latest
  // token: the conv's last k - 1 input rows ([k - 1][channels], oldest first) and the scan's state
  // ([heads][head_dim][state]). Empty spans for an attention layer or a model without state.
  struct RecurrentState {
    std::span<const float> conv, scan;
  };
  RecurrentState recurrent_state(int seq, int64_t layer) const;
  // nexus-ltm: sequence `seq`'s long-term memory at layer `layer`, per kv head: Infini's M then its
  // normaliser z (head_dim * head_dim + head_dim), or Titans' M then its momentum S (2 head_dim^2);
  // empty for other models.
  std::span<const float> long_term_memory(int seq, int64_t layer) const;
  // nexus-ltm: the keys the memory writes (before its feature map; rotated or not as the memory
  // reads them) of the last segment `seq` completed at `layer`, [segment][kv_heads * head_dim] by
  // position in the segment, valid until the next segment's first token (calibration reads them
  // right after a segment). Empty for a bad sequence or layer.
  std::vector<float> long_term_segment_keys(int seq, int64_t layer) const;
  const ContextOptions& options() const;
  const Model& model() const;
  size_t kv_bytes() const;

 private:
  explicit Context(std::unique_ptr<ContextImpl> impl);
  std::unique_ptr<ContextImpl> impl_;
};

}  // namespace nexus
