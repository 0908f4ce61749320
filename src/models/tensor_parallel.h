// How tensor parallelism cuts a model's weights (Megatron's split): the query, key and value
// projections and the feed-forward gate and up projections by output rows (each rank its heads
// and its share of the width), the attention output and feed-forward down projections by input
// columns (their partial products are summed over the ranks), everything else whole on every
// rank. Used to load a rank's slice for inference (model_loader.cc) and to cut and reassemble
// training parameters and optimizer state (nexus/dist).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nexus/model.h"

namespace nexus {

struct TpSplit {
  enum Kind { kWhole, kRows, kCols };
  Kind kind = kWhole;
  // [first, count) of the full tensor's rows (kRows; the elements of a vector) or columns (kCols),
  // in the order the slice holds them (gpt2's fused QKV rows take three ranges).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  // Rows or columns the slice holds.
  int64_t count() const;
};

// The split of tensor `name` ("blk.3.attn_q.weight") of a model of config `full` for `rank` of
// `size`; kWhole for tensors outside the blocks and the blocks' norms and output biases.
TpSplit tp_split(const ModelConfig& full, const std::string& name, int rank, int size);

// Whether tensor `name` is whole on every rank but gets only this rank's part of its gradient
// (qwen3's per-head q and k norms, shared by every head): the ranks sum those gradients.
bool tp_partial_grad(const ModelConfig& full, const std::string& name);

// The slice's shape of a tensor of shape `full_shape` (outermost first).
std::vector<int64_t> tp_slice_shape(const std::vector<int64_t>& full_shape, const TpSplit& split);

// Copies the slice of a full tensor (`dtype`, `full_shape`) into `out` (tp_slice_shape's bytes),
// or (unslice) a slice back into its place in the full tensor. Block-quantized column splits need
// every range on block boundaries (the error names the tensor, its type and the split).
Status tp_slice(const void* full, DType dtype, const std::vector<int64_t>& full_shape,
                const TpSplit& split, void* out, const std::string& name);
void tp_unslice(const void* slice, DType dtype, const std::vector<int64_t>& full_shape,
                const TpSplit& split, void* full);

}  // namespace nexus
