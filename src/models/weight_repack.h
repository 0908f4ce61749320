// Load-time weight repacking: the one place that decides which weights get a faster in-memory
// layout than the file's, and makes the copies.
#pragma once

#include <cstddef>

#include "nexus/model.h"

namespace nexus {

struct RepackStats {
  int tensors = 0;      // distinct tensors repacked (a tied table counts once)
  size_t bytes = 0;     // bytes copied
  size_t released = 0;  // mapped source bytes handed back to the OS
};

// True unless the environment has NEXUS_REPACK=0 (for side-by-side measurements).
bool repack_enabled();

// Replaces every Q4_0 / Q8_0 / Q4_K / Q6_K matrix in `w` by a Q4_0x8 / Q8_0x8 / Q4_Kx8 / Q6_Kx8 copy
// (backends/cpu/repack.h): the layer projections and the output head (embed_rows reads the
// repacked layouts, so a tied token table is repacked once and shared). With `release_source`
// every other matrix is copied unchanged too. An untied token table is never touched (lookups
// read a few rows). The copies live in one allocation (2 MiB aligned and advised for transparent
// huge pages). With `release_source` the weights are views of a read-only file mapping: after
// each copy the source's whole pages are dropped (madvise MADV_DONTNEED; they would be read again
// from the file if touched), so resident memory does not double. Never pass it for weights in
// ordinary memory, whose contents MADV_DONTNEED would discard.
RepackStats repack_weights(ModelWeights& w, bool release_source);

}  // namespace nexus
