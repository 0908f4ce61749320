// GGUF tensor type conversion, row by row through an fp32 scratch row.
#include "io/gguf_convert.h"

#include <cstring>
#include <string>

namespace nexus {
namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

void to_f32(DType from, const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  switch (from) {
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      break;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

void from_f32(const float* src, DType to, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  switch (to) {
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      break;
    default:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace

Status convert_row(DType from, const void* src, DType to, void* dst, int64_t n,
                   std::vector<float>& scratch) {
  if (from == to) {
    std::memcpy(dst, src, row_bytes(from, n));
    return Status::ok();
  }
  if (!is_float(from) || !is_float(to))
    return Status::error("converting " + std::string(dtype_name(from)) + " to " +
                         std::string(dtype_name(to)) +
                         " is not supported yet (only F32, F16 and BF16; block-quantized types " +
                         "need the CPU quantizer)");
  if (from == DType::kF32) {
    from_f32(static_cast<const float*>(src), to, dst, n);
  } else if (to == DType::kF32) {
    to_f32(from, src, static_cast<float*>(dst), n);
  } else {
    scratch.resize(static_cast<size_t>(n));
    to_f32(from, src, scratch.data(), n);
    from_f32(scratch.data(), to, dst, n);
  }
  return Status::ok();
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
    const DType to = !floating ? t.dtype : t.shape.size() >= 2 ? target : DType::kF32;
    if (to == t.dtype) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
      continue;
    }
    const int64_t cols = t.shape.back();
    if (cols % traits(to).block_size != 0)
      return Status::error("tensor '" + t.name + "': row of " + std::to_string(cols) +
                           " is not a multiple of the " + std::string(dtype_name(to)) +
                           " block size " + std::to_string(traits(to).block_size));
    const size_t in_row = row_bytes(t.dtype, cols), out_row = row_bytes(to, cols);
    const size_t rows = t.nbytes / in_row;
    out.resize(out_row * rows);
    for (size_t r = 0; r < rows; ++r) {
      Status s =
          convert_row(t.dtype, t.data + r * in_row, to, out.data() + r * out_row, cols, scratch);
      if (!s) return Status::error("tensor '" + t.name + "': " + s.message());
    }
    w.add_tensor(t.name, to, t.shape, out.data());
  }
  return w;
}

}  // namespace nexus
