// Utilisation of a nexus-ltm model's long-term memory (`nexus run --memory-stats`): per layer,
// how much has been written and how evenly its slots (the key dimensions each head's memory is
// addressed by) are used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nexus/context.h"

namespace nexus {

struct LayerMemoryStats {
  int64_t layer = 0;
  // The slots of each head's memory (head_dim, fewer after memory-reduce; the deep memory's
  // hidden units).
  int64_t slots = 0;
  // Per head, the mass written: Infini's normaliser (sum of phi(k) over the written keys),
  // Titans' squared memory norm, or the squared norm of the deep memory's written weights.
  double written = 0;
  double slots_used = 0;  // the fraction of slots holding 90% of that mass, mean over heads
  double norm = 0;  // the memory's (deep: its written weights') Frobenius norm, mean over heads
};

// Sequence `seq`'s memory in every layer; empty for a model without one.
std::vector<LayerMemoryStats> memory_stats(const Context& ctx, int seq);
// A table of them, a line a layer, and the bytes the memory takes (for stderr).
std::string format_memory_stats(const std::vector<LayerMemoryStats>& stats,
                                const ModelConfig& config);

}  // namespace nexus
