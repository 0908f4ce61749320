// Tensor type conversion of whole GGUF files (`nexus convert --type`): weight matrices to the
// target type, 1-D tensors (norms, biases) to F32, metadata kept with general.file_type updated.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "nexus/io/gguf.h"
#include "nexus/dtype.h"
#include "nexus/status.h"

namespace nexus {

// Converts one row of `n` elements from `from` to `to` (same type: a copy). Handles F32, F16 and
// BF16 in every direction today. Block-quantized types plug in here, and only here, once
// nexus::cpu::dequantize_row / quantize_row exist: dequantize `from` into `scratch`, quantize that
// into `to`. Other pairs return an error naming both types.
DType fallback_type(DType target, int64_t cols);
// `importance` (n values, or null): per-column weights for the quantizer (cpu::quantize_row_imp).
Status convert_row(DType from, const void* src, DType to, void* dst, int64_t n,
                   std::vector<float>& scratch, const float* importance = nullptr);

// Tensors that stay F32 whatever the target, as llama.cpp keeps them: vectors, and the
// state-space mixer's small matrices the scan reads directly (the conv taps, A, D, the gated
// norm's weights), and nexus-ltm's memory tensors its kernels read as f32 (the slot projection,
// the deep memory's initial weights).
bool keeps_f32(const GgufTensorInfo& t);

// True when `t` is a weight type convert_gguf can write (it has CPU kernels and is not an
// activation-only type such as Q8_K or Q8_1).
bool is_weight_target(DType t);

// llama.cpp's general.file_type (LLAMA_FTYPE_*) for a file whose weights are mostly `t`.
std::optional<uint32_t> file_type_for(DType t);

// A writer with `in`'s metadata and tensors, every floating-point tensor of rank >= 2 converted
// to `target` and every 1-D one to F32; integer tensors are copied unchanged.
Result<GgufWriter> convert_gguf(const GgufFile& in, DType target);

}  // namespace nexus
