// Load-time weight repacking: the one place that decides which weights get a faster in-memory
// layout than the file's, and makes the copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "nexus/model.h"

namespace nexus {

struct RepackStats {
  int tensors = 0;      // distinct tensors repacked (a tied table counts once)
  int sparse24 = 0;     // layer projections compressed to their 2:4 form
  size_t bytes = 0;     // bytes copied
  size_t released = 0;  // mapped source bytes handed back to the OS
};

// The matrices of a W8A8 file and the activation scale of each (0: per token), by the data
// pointer of the loaded (file) tensor.
struct W8A8Plan {
  std::map<const void*, float> act_scale;
};

// True unless the environment has NEXUS_REPACK=0 (for side-by-side measurements).
bool repack_enabled();

// Where weights that are views of a read-only file mapping come from: the file's path and the
// address its byte 0 is mapped at.
struct MappedSource {
  std::string path;
  const uint8_t* base = nullptr;
};

// Replaces every Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K matrix in `w` by a Q4_0x8 / Q5_0x8 / Q8_0x8 /
// Q4_Kx8 / Q6_Kx8 copy (backends/cpu/repack.h): the layer projections and the output head
// (embed_rows reads the repacked layouts, so a tied token table is repacked once and shared). With
// a `source` (the weights are views of that file's mapping) every other matrix, and every norm and
// bias vector, is copied unchanged too, and the bytes are read from the file with pread in 4 MiB
// chunks rather than through the mapping (no 4 KiB page faults on the source, which made loading
// Q06B F32 take 1.7x as long; a chunk whose ends differ from the mapping's, a file replaced since
// it was mapped, is taken from the mapping), then the mapping's pages of each chunk are dropped
// (madvise MADV_DONTNEED; they would be read again from the file if touched), so resident memory
// does not double, and once more for every copied tensor at the end: afterwards nothing but an
// untied token table (lookups read a few rows) is read through the mapping, and no page of it stays
// mapped for a copied tensor. The copies live in one allocation (2 MiB aligned and advised for
// transparent huge pages). F32/F16/BF16 layer projections that are 2:4 sparse (at most two
// nonzeros in every group of four columns) are stored in their compressed 2:4 form
// (backends/cpu/sparse24.h) unless NEXUS_SPARSE24=0. Without a source (weights in ordinary memory,
// whose contents MADV_DONTNEED would discard) only the repackable matrices are copied, from memory.
//
// With a `w8a8` plan (a W8A8 file: model_loader.cc), the Q8_0 matrices it names take the W8A8
// layout instead (backends/cpu/gemm_w8a8.h: rows >= 16, k >= 64), with their activation scales.
RepackStats repack_weights(ModelWeights& w, const MappedSource* source,
                           const W8A8Plan* w8a8 = nullptr);

}  // namespace nexus
