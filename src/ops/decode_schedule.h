// The order of a decode step's matmuls, learned from the steps themselves: after each matmul the
// pool's workers are told where their share of the next one starts, and prefetch it while they
// wait through the serial work in between (norms, RoPE, the KV store, the residual adds), when the
// memory would otherwise stand idle. Works for every architecture without a list of its layers:
// the first step records the groups in the order they run, and the cycle closes when the first
// group comes round again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nexus/core/thread_pool.h"
#include "nexus/tensor.h"

namespace nexus {

class DecodeSchedule {
 public:
  // Bytes of its next share a worker prefetches: half of a 512 KiB L2 (sizes from 64 KiB to 4 MiB
  // measured alike).
  static constexpr size_t kPrefetchBytes = 256 * 1024;
  // Batches of at most this many tokens are decode steps (larger ones are prefill, compute-bound).
  static constexpr int64_t kMaxTokens = 8;
  // A longer learned order is dropped (no model has that many matmuls in a step).
  static constexpr size_t kMaxGroups = 8192;
  static constexpr int kMaxWeights = 4;

  struct Group {
    const Tensor* w[kMaxWeights];
    int count;
  };

  // Off when `enabled` is false: ran() returns nullptr, after() does nothing.
  explicit DecodeSchedule(bool enabled = true) : enabled_(enabled) {}

  // Records that the group w[0 .. count) ran (count in [1, kMaxWeights]); returns the group
  // expected next, or nullptr while the order is still being learned. A group out of the learned
  // order (another path through the model) starts the learning again from it.
  const Group* ran(const Tensor* const* w, int count);

  // ran(), then the workers' prefetch of the expected group (matmul_group_prefetch); only for
  // batches of at most kMaxTokens tokens.
  void after(const Tensor* const* w, int count, int64_t n_tokens, ThreadPool& pool);

  // Groups in the learned cycle (0 until it closes).
  size_t cycle_length() const { return cycle_ ? order_.size() : 0; }

 private:
  bool enabled_;
  bool cycle_ = false;
  size_t last_ = 0;  // index in order_ of the group that ran last (once the cycle is closed)
  std::vector<Group> order_;
};

// True unless NEXUS_NO_IDLE_PREFETCH is set to something other than 0 (for A/B measurements).
bool idle_prefetch_enabled();

}  // namespace nexus
