// `nexus quantize`: a GGUF's tensors to a llama-quantize style type or mix. Each tensor's type is
// planned from its name and shape (plan_tensor), then converted row by row (gguf_convert.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/compress/imatrix.h"
#include "nexus/dtype.h"
#include "nexus/io/gguf.h"
#include "nexus/status.h"

namespace nexus {

// A named type: one weight type for every matrix (Q8_0, Q4_0, F16, ...) or a k-quant mix:
// "_M" raises attn_v and ffn_down a class on the first and last eighth of the layers and every
// third between; "_S" and plain Q2_K/Q6_K keep the base type. Every quantized mix stores the
// output head in Q6_K (Q8_0 for Q8_0).
struct QuantMix {
  std::string name;  // as given, upper case: "Q4_K_M"
  DType base;
  bool medium;       // _M (and Q2_K, which raises the same tensors)
  uint32_t file_type;  // llama.cpp's general.file_type
  // W8A8: every matrix Q8_0 with one scale per row (all of a row's blocks carry it), marked for
  // int8 activations at load (docs/COMPRESSION.md).
  bool w8a8 = false;
};

// The mix for a name (case-insensitive); nullopt for an unknown one.
std::optional<QuantMix> parse_quant_mix(std::string_view name);
// The names parse_quant_mix knows, for help and error messages.
std::string quant_mix_names();

// llama-quantize's "use more bits" layers: the first and last eighth, and every third between.
bool use_more_bits(int64_t layer, int64_t n_layers);

struct TensorTypeOverride {
  std::string pattern;  // ECMAScript regex, searched in the tensor name
  std::regex re;
  DType type;
};
// "PATTERN=TYPE" (e.g. "ffn_down=q6_k", "blk\.0\..*=f16"); errors name the bad part.
Result<TensorTypeOverride> parse_tensor_type(const std::string& spec);

struct QuantizeOptions {
  QuantMix mix;
  bool pure = false;  // every matrix in the base type: no raised tensors, no Q6_K head
  std::vector<TensorTypeOverride> overrides;  // first match wins, before the mix's rules
  // Importances per input column (nexus imatrix or llama-imatrix): the quantizers of the types
  // that take them (Q4_0..Q5_1, Q2_K..Q6_K) weight each column's rounding error by them.
  const Imatrix* imatrix = nullptr;
  // W8A8: per matrix name, the static activation scale (calibrate_w8a8); empty: quantized per
  // token at run time. `calibration` describes how they were taken (stored in the file).
  std::map<std::string, float> act_scales;
  std::string calibration;
};

// The type tensor `t` of a model with n_layers blocks gets: unchanged for non-float data; F32 for
// vectors and the state-space mixer's small matrices; else the override, the mix's rule or its
// base type, then a type whose block fits a row, as llama-quantize falls back (Q2_K and Q3_K to
// Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; rows that fill no 32-value block: F16).
DType plan_tensor(const GgufTensorInfo& t, int64_t n_layers, bool has_output,
                  const QuantizeOptions& o);

// A type whose block fits rows of `cols` values: `t` when it does, else as llama-quantize falls
// back (Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), else F16.
DType fit_rows(DType t, int64_t cols);

// One line of progress per tensor: index, count, the tensor, its types and sizes.
struct QuantizeProgress {
  size_t index, count;
  const GgufTensorInfo* tensor;
  DType to;
  size_t bytes_out;
  bool imatrix;  // quantized with the imatrix's importances
};

// A writer with `in`'s metadata (for W8A8 also nexus.w8a8.activations "dynamic" or "static", and
// nexus.w8a8.act_scale.NAME for each Q8_0 matrix that has a scale) (general.file_type set to the
// mix's) and every tensor converted to its planned type; `progress` (may be empty) is called after
// each tensor. With an imatrix: an entry whose width differs from its tensor's rows, or an imatrix
// that matches none of the tensors, is an error; a matrix without an entry is quantized without one
// (as llama-quantize).
Result<GgufWriter> quantize_gguf(const GgufFile& in, const QuantizeOptions& o,
                                 const std::function<void(const QuantizeProgress&)>& progress);

}  // namespace nexus
