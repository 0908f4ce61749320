// `nexus prune`: smaller or sparser models from a GGUF.
//  - Structured: every layer keeps the same number of FFN channels and of attention KV groups (a
//    KV head with its query heads), chosen per layer by an importance from calibration
//    activations (an imatrix): channel c scores sqrt(mean x_c^2) * |W_down[:, c]|, a group the sum
//    over its heads' columns of mean x^2 * |W_o[:, col]|^2 (the output each would add). The
//    result is a smaller dense model with the same architecture, so every kernel runs it.
//  - Unstructured: in every block's weight matrix the fraction S of each row's weights with the
//    smallest |w| (times sqrt(mean x^2) of their column when an imatrix is given: Wanda's score)
//    set to zero. The file keeps its size and speed; it is the baseline the structured and 2:4
//    forms are measured against.
//  - 2:4 (semi-structured): in every group of four consecutive weights of a block matrix row the
//    two with the smallest score (|w|, or Wanda's) set to zero. The file stays a dense GGUF any
//    tool reads; nexus stores such F32/F16/BF16 matrices compressed at load and multiplies them
//    with kernels that skip the zeros (backends/cpu/sparse24.h).
// Float weights (F32, F16, BF16) are sliced exactly; quantized ones are dequantized, sliced and
// quantized again in their type (prune before quantizing to avoid the second rounding).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nexus/compress/imatrix.h"
#include "nexus/io/gguf.h"
#include "nexus/status.h"

namespace nexus {

struct PruneOptions {
  double ffn_keep = 1.0;      // fraction of FFN channels kept (rounded up to a multiple of 32)
  double heads_keep = 1.0;    // fraction of KV groups kept (at least one)
  double unstructured = 0.0;  // fraction of each row zeroed, in [0, 1)
  bool two_of_four = false;   // 2:4: two of every four consecutive weights zeroed
  const Imatrix* imatrix = nullptr;  // required for the structured forms
};

// Per layer: the FFN channels and KV groups kept, in their original order.
struct PrunePlan {
  int64_t n_ff = 0, n_ff_kept = 0, n_kv = 0, n_kv_kept = 0, n_head = 0, head_dim = 0;
  std::vector<std::vector<int64_t>> ffn;     // [layer] kept channels
  std::vector<std::vector<int64_t>> groups;  // [layer] kept KV groups
};

// The importances named above, per layer: FFN channels [layer][n_ff] and KV groups
// [layer][n_kv]. Errors name what is missing (a tensor, an imatrix entry, a fused QKV).
Result<std::vector<std::vector<double>>> ffn_channel_scores(const GgufFile& in, const Imatrix& m);
Result<std::vector<std::vector<double>>> kv_group_scores(const GgufFile& in, const Imatrix& m);

Result<PrunePlan> plan_prune(const GgufFile& in, const PruneOptions& o);

// The pruned model; `progress(i, n, name)` after each tensor (may be empty).
Result<GgufWriter> prune_gguf(const GgufFile& in, const PruneOptions& o,
                              const std::function<void(size_t, size_t, const std::string&)>&
                                  progress = nullptr);

}  // namespace nexus
