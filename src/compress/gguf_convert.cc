// GGUF tensor type conversion, row by row through an fp32 scratch row.
#include "nexus/compress/gguf_convert.h"

#include <cstring>
#include <string>
#include <string_view>

#include "backends/cpu/quant.h"

namespace nexus {
namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool keeps_f32(const GgufTensorInfo& t) {
  return t.shape.size() < 2 || ends_with(t.name, ".ssm_conv1d.weight") ||
         ends_with(t.name, ".ssm_a") || ends_with(t.name, ".ssm_d") ||
         ends_with(t.name, ".ssm_norm.weight") || ends_with(t.name, ".memory_proj") ||
         ends_with(t.name, ".memory_w1") || ends_with(t.name, ".memory_w2");
}

Status convert_row(DType from, const void* src, DType to, void* dst, int64_t n,
                   std::vector<float>& scratch, const float* importance) {
  if (from == to) {
    std::memcpy(dst, src, row_bytes(from, n));
    return Status::ok();
  }
  for (DType t : {from, to})
    if (!cpu::has_kernels(t))
      return Status::error("converting " + std::string(dtype_name(from)) + " to " +
                           std::string(dtype_name(to)) + " is not supported (no " +
                           std::string(dtype_name(t)) + " kernels)");
  if (from == DType::kF32) {
    cpu::quantize_row_imp(to, static_cast<const float*>(src), dst, n, importance);
  } else if (to == DType::kF32) {
    cpu::dequantize_row(from, src, static_cast<float*>(dst), n);
  } else {  // through f32 (re-quantizing an already quantized tensor loses more precision)
    scratch.resize(static_cast<size_t>(n));
    cpu::dequantize_row(from, src, scratch.data(), n);
    cpu::quantize_row_imp(to, scratch.data(), dst, n, importance);
  }
  return Status::ok();
}

DType fallback_type(DType target, int64_t cols) {
  if (cols % traits(target).block_size == 0) return target;
  // Like llama-quantize: rows that do not fill a 256-value K block use an 8-bit 32-block type,
  // rows that do not fill a 32-value block stay in F16 (or F32 when that was asked for).
  if (traits(target).block_size == 256 && cols % 32 == 0) return DType::kQ8_0;
  return target == DType::kF32 || target == DType::kBF16 ? target : DType::kF16;
}

std::optional<uint32_t> file_type_for(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_1:
      return 3;
    case DType::kQ8_0:
      return 7;
    case DType::kQ5_0:
      return 8;
    case DType::kQ5_1:
      return 9;
    case DType::kQ2_K:
      return 10;
    case DType::kQ3_K:
      return 12;  // Q3_K_M
    case DType::kQ4_K:
      return 15;  // Q4_K_M
    case DType::kQ5_K:
      return 17;  // Q5_K_M
    case DType::kQ6_K:
      return 18;
    case DType::kBF16:
      return 32;
    default:
      return std::nullopt;
  }
}

Result<GgufWriter> convert_gguf(const GgufFile& in, DType target) {
  GgufWriter w;
  w.copy_metadata(in);
  if (auto ft = file_type_for(target)) w.set_u32("general.file_type", *ft);
  std::vector<uint8_t> out;
  std::vector<float> scratch;
  for (const GgufTensorInfo& t : in.tensors()) {
    const bool floating = is_float(t.dtype) || traits(t.dtype).quantized;
    const DType to = !floating ? t.dtype : keeps_f32(t) ? DType::kF32 : target;
    if (to == t.dtype) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
      continue;
    }
    const int64_t cols = t.shape.back();
    const DType chosen = fallback_type(to, cols);
    if (chosen == t.dtype) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
      continue;
    }
    const size_t in_row = row_bytes(t.dtype, cols), out_row = row_bytes(chosen, cols);
    const size_t rows = t.nbytes / in_row;
    out.resize(out_row * rows);
    for (size_t r = 0; r < rows; ++r) {
      Status s =
          convert_row(t.dtype, t.data + r * in_row, chosen, out.data() + r * out_row, cols, scratch);
      if (!s) return Status::error("tensor '" + t.name + "': " + s.message());
    }
    w.add_tensor(t.name, chosen, t.shape, out.data());
  }
  return w;
}

bool is_weight_target(DType t) {
  return cpu::has_kernels(t) && t != DType::kQ8_K && t != DType::kQ8_1;
}

}  // namespace nexus
