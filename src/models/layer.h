// A layer type: one kind of block (attention + MLP, and later state-space or memory layers), its
// inference forward and its training passes. The inference forward (models/forward.h) and the
// owner of the training state (train/TrainModel) are generic: they walk the layers, and
// TrainModel lays out the parameters from the architecture's LayerSlot table and the saved
// activations and backward scratch from the lists a layer type declares here. A new layer type is
// one file implementing this interface.
#pragma once

#include <cstdint>
#include <vector>

#include "models/arch.h"
#include "nexus/core/thread_pool.h"
#include "nexus/dtype.h"
#include "nexus/model.h"

namespace nexus {

struct ForwardState;

// How the training pass keeps one saved activation between a layer's forward and its backward,
// which decides where it lives under each memory-saving mode (train/train_model.h):
// - kStat: always the layer's own f32 (norm statistics, the residual midpoint);
// - kInput: the layer's own (in f32 under selective recompute, as a 16-bit copy under mixed
//   precision), from which recompute() rebuilds the rest;
// - kOutput: like kInput, but rebuilt by recompute() under selective recompute (attention
//   probabilities and output);
// - kWork: rebuilt by recompute() whenever layers share one working set (norm outputs, the FFN
//   activation).
enum class Saved : uint8_t { kStat, kInput, kOutput, kWork };

// One saved activation: its name (for inspection), its floats for the pass's shape (0: the layer
// does not have it in this configuration) and how it is kept.
struct SavedSlot {
  const char* name;
  int64_t count;
  Saved keep;
};

// A backward scratch buffer every layer of the type shares (its floats; 0: not needed).
struct ScratchSlot {
  const char* name;
  int64_t count;
};

// One layer's forward, backward or recompute: the shapes, the layer's parameters and gradients
// (by the architecture's LayerSlot index; null where the architecture has no such tensor), its
// saved activations and their 16-bit copies (by SavedSlot index), the shared scratch and the
// residual stream.
struct LayerPass {
  const ModelConfig* cfg;
  const std::vector<LayerSlot>* slots;
  int64_t layer;  // the model's layer index (hybrids pick the layer's kind by it)
  int64_t b, t;  // sequences of t tokens
  ThreadPool* pool;
  Precision precision;  // kept activations and activation gradients are rounded to it
  bool bf16_ops;        // every GEMM operand holds bf16 values (ops/dense.h)
  const float* const* w;
  float* const* g;
  float* const* a;
  uint16_t* const* h;  // null: no 16-bit copies in this pass
  float* const* scratch;
  const float* rope_cs;     // the RoPE angles of positions 0 .. t - 1
  float* attn_scratch;      // attention_backward_scratch(t) floats per pool thread
  const float* x;           // the layer's input [b * t, dim]
  float* y;                 // forward: its output (null: a recompute, which needs no output)
  float* dres;              // backward: d loss / d output in, d loss / d input out
  float* dln;               // backward: [b * t, dim] of scratch
  // Tensor parallelism: the layer holds this rank's slice (its config's heads and widths are the
  // slice's) and sums the partial products over the group (null: the whole layer).
  TensorParallel* tp;

  int64_t n() const { return b * t; }
  // The parameter (or its gradient) in the slot that fills `field`; null when absent.
  const float* weight(Tensor LayerWeights::*field) const;
  float* grad(Tensor LayerWeights::*field) const;
  // Rounds saved activation `slot` (count floats) to the pass's precision, into its 16-bit copy
  // too when it has one; keep_only rounds any buffer in place. No-ops in f32.
  void keep(int slot, int64_t count) const;
  void keep_only(float* x, int64_t count) const;
  // Rounds an activation gradient in place (no-op in f32).
  void round_grad(float* x, int64_t count) const;
  // Clears count floats, split over the pool when large.
  void zero(float* p, int64_t count) const;
};

class LayerType {
 public:
  virtual ~LayerType() = default;
  // Inference: layer l of `model` over the batch in `st`, reading and writing the residual stream
  // st.x and the KV cache (models/forward.h).
  virtual void infer(const Model& model, int64_t l, ForwardState& st) const = 0;
  // The saved activations of one layer for b sequences of t tokens; their order is the index the
  // passes use.
  virtual std::vector<SavedSlot> saved(const ModelConfig& c, int64_t b, int64_t t) const = 0;
  // The backward scratch for b sequences of t tokens.
  virtual std::vector<ScratchSlot> scratch(const ModelConfig& c, int64_t b, int64_t t) const = 0;
  // Saves what backward() needs in p.a (rounding each with keep()), and writes p.y when set.
  virtual void forward(const LayerPass& p) const = 0;
  // Adds the parameter gradients to p.g and turns p.dres into d loss / d input.
  virtual void backward(const LayerPass& p) const = 0;
  // Rebuilds the kWork activations (and with `selective` the kOutput ones) from the kept ones and
  // p.x, with the same ops as forward(), so that they come out bit-identical.
  virtual void recompute(const LayerPass& p, bool selective) const = 0;
};

// The layer type of layer `l` of a config: the Mamba block for mamba/mamba2, the hybrid block
// (attention or Mamba by layer) for granitehybrid, else the transformer block.
const LayerType& layer_type(const ModelConfig& c, int64_t l);

}  // namespace nexus
