// `nexus memory-reduce`: slot reduction of a nexus-ltm model's long-term memory, without
// retraining. Each head's memory is addressed by key features (Infini's phi(k), Titans' unit
// keys); a calibration text shows which directions of that feature space the keys use. Each
// layer keeps the top `slots` principal directions of its heads' uncentred key-feature
// covariance (the memory is linear through the origin) as a projection P [head_dim x slots]:
// reads and writes then go through P^T f, and the memory holds slots x head_dim values instead
// of head_dim x head_dim. The slots per layer come from a compression ratio, the same for every
// layer or (adaptive) spread over the layers by where the key energy is, or from an energy
// fraction to keep.
//
// Titans' deep memory (an MLP) has hidden units for slots (what `nexus run --memory-stats`
// counts): each layer keeps, per head, the units that carry most of the memory's read energy over
// the calibration keys (sum over keys of silu(k W1)_j^2 |W2_j|^2, with the weights as written by
// then), and drops the others' columns of blk.N.memory_w1 and rows of memory_w2. A unit that is
// never active is dropped exactly; the others approximately, as pruning does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/status.h"

namespace nexus {

struct MemoryReduceOptions {
  // Exactly one of the two: the memory shrinks by `ratio` (slots = head_dim / ratio a layer; with
  // `adaptive` the same total spread by energy), or each layer keeps the fewest slots that hold
  // `energy` (0..1] of every head's key energy.
  double ratio = 0;
  bool adaptive = false;
  double energy = 0;
  int64_t max_segments = 256;  // calibration segments (of memory.segment_length tokens)
  int n_threads = 1;
};

struct MemoryReducePlan {
  int64_t width = 0;                       // slots a layer before: head_dim, or hidden units
  std::vector<int64_t> slots;              // per layer
  std::vector<std::vector<float>> proj;  // linear memories, per layer: [kv_heads][head_dim][slots]
  std::vector<std::vector<int64_t>> units;  // deep memory, per layer: [kv_heads][slots], ascending
  std::vector<double> kept;                 // per layer: energy kept (mean over heads)
  std::vector<std::vector<double>> curve;   // per layer: energy of the first k slots, k=0..width
  int64_t segments = 0;                     // calibration segments run
};

// Runs `model` over `tokens` (a calibration text's, from BOS) a segment at a time and plans the
// reduction. Errors name a model without a memory, an already reduced one, bad options or fewer
// tokens than a segment. `progress(done, total)` after each segment (may be empty).
Result<MemoryReducePlan> plan_memory_reduce(
    const Model& model, std::span<const int32_t> tokens, const MemoryReduceOptions& o,
    const std::function<void(int64_t, int64_t)>& progress = nullptr);

// The model's file with the plan: nexus-ltm.memory.slots and blk.N.memory_proj added (the deep
// memory: blk.N.memory_w1 and memory_w2 cut to the kept units), everything else copied.
Result<GgufWriter> memory_reduce_gguf(const Model& model, const MemoryReducePlan& plan);

// The eigenvalues (descending) and unit eigenvectors (columns of `vectors`, row-major n x n) of
// the symmetric n x n `a` (cyclic Jacobi).
void symmetric_eigen(std::vector<double> a, int64_t n, std::vector<double>& values,
                     std::vector<double>& vectors);

}  // namespace nexus
