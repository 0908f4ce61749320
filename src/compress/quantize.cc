// Quantization plans and the quantizing writer. The rules follow what llama-quantize does for
// its named types (see quantize.h); nexus's fallback quantizes rows llama-quantize refuses.
#include "nexus/compress/quantize.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "backends/cpu/gemm_w8a8.h"
#include "backends/cpu/quant.h"
#include "nexus/compress/gguf_convert.h"

namespace nexus {
namespace {

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct MixRow {
  const char* name;
  DType base;
  bool medium;
  uint32_t file_type;
  bool w8a8 = false;
};

constexpr MixRow kMixes[] = {
    {"F32", DType::kF32, false, 0},       {"F16", DType::kF16, false, 1},
    {"BF16", DType::kBF16, false, 32},    {"Q8_0", DType::kQ8_0, false, 7},
    {"Q4_0", DType::kQ4_0, false, 2},     {"Q4_1", DType::kQ4_1, false, 3},
    {"Q5_0", DType::kQ5_0, false, 8},     {"Q5_1", DType::kQ5_1, false, 9},
    {"Q2_K", DType::kQ2_K, true, 10},     {"Q3_K_S", DType::kQ3_K, false, 11},
    {"Q3_K_M", DType::kQ3_K, true, 12},   {"Q4_K_S", DType::kQ4_K, false, 14},
    {"Q4_K_M", DType::kQ4_K, true, 15},   {"Q5_K_S", DType::kQ5_K, false, 16},
    {"Q5_K_M", DType::kQ5_K, true, 17},   {"Q6_K", DType::kQ6_K, false, 18},
    {"W8A8", DType::kQ8_0, false, 7, true},
};

// The next k-quant class up (a _M mix's raised tensors).
DType raised(DType t) {
  switch (t) {
    case DType::kQ2_K:
      return DType::kQ3_K;
    case DType::kQ3_K:
      return DType::kQ4_K;
    case DType::kQ4_K:
    case DType::kQ5_K:
      return DType::kQ6_K;
    default:
      return t;
  }
}

// The block index of "blk.N.", or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::strtoll(name.c_str() + 4, nullptr, 10);
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  const std::string u = upper(name);
  for (const MixRow& m : kMixes)
    if (u == m.name) return QuantMix{m.name, m.base, m.medium, m.file_type, m.w8a8};
  return std::nullopt;
}

std::string quant_mix_names() {
  std::string s;
  for (const MixRow& m : kMixes) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

// As llama-quantize falls back, so files match its sizes (`nexus convert` keeps more bits): a K
// type's rows that do not fill 256-value blocks take the 32-block type of about the same bits.
DType fit_rows(DType t, int64_t cols) {
  if (cols % traits(t).block_size == 0) return t;
  DType f = t;
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K:
      f = DType::kQ4_0;
      break;
    case DType::kQ4_K:
      f = DType::kQ5_0;
      break;
    case DType::kQ5_K:
      f = DType::kQ5_1;
      break;
    case DType::kQ6_K:
      f = DType::kQ8_0;
      break;
    default:
      break;
  }
  return fallback_type(f, cols);
}

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

Result<TensorTypeOverride> parse_tensor_type(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return Status::error("--tensor-type wants PATTERN=TYPE, got '" + spec + "'");
  const std::string pattern = spec.substr(0, eq), type = spec.substr(eq + 1);
  const std::optional<DType> t = dtype_from_name(type);
  if (!t || !is_weight_target(*t))
    return Status::error("--tensor-type '" + spec + "': '" + type + "' is not a weight type");
  try {
    return TensorTypeOverride{pattern, std::regex(pattern), *t};
  } catch (const std::regex_error& e) {
    return Status::error("--tensor-type '" + spec + "': bad pattern (" + e.what() + ")");
  }
}

DType plan_tensor(const GgufTensorInfo& t, int64_t n_layers, bool has_output,
                  const QuantizeOptions& o) {
  const bool floating = t.dtype == DType::kF32 || t.dtype == DType::kF16 ||
                        t.dtype == DType::kBF16 || traits(t.dtype).quantized;
  if (!floating) return t.dtype;
  if (keeps_f32(t)) return DType::kF32;
  const DType base = o.mix.base;
  DType to = base;
  bool overridden = false;
  for (const TensorTypeOverride& ov : o.overrides)
    if (std::regex_search(t.name, ov.re)) {
      to = ov.type;
      overridden = true;
      break;
    }
  if (!overridden && !o.pure && traits(base).quantized) {
    const bool head = t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
    const int64_t l = layer_of(t.name);
    if (head) {
      to = base == DType::kQ8_0 ? DType::kQ8_0 : DType::kQ6_K;
    } else if (o.mix.medium && l >= 0 &&
               (ends_with(t.name, ".attn_v.weight") || ends_with(t.name, ".ffn_down.weight")) &&
               use_more_bits(l, n_layers)) {
      to = raised(base);
    }
  }
  return fit_rows(to, t.shape.back());
}

Result<GgufWriter> quantize_gguf(const GgufFile& in, const QuantizeOptions& o,
                                 const std::function<void(const QuantizeProgress&)>& progress) {
  int64_t n_layers = 0;
  bool has_output = false;
  for (const GgufTensorInfo& t : in.tensors()) {
    n_layers = std::max(n_layers, layer_of(t.name) + 1);
    has_output = has_output || t.name == "output.weight";
  }
  GgufWriter w;
  w.copy_metadata(in);
  w.set_u32("general.file_type", o.mix.file_type);
  w.set_u32("general.quantization_version", 2);
  if (o.mix.w8a8) {
    w.set_string("nexus.w8a8.activations", o.act_scales.empty() ? "dynamic" : "static");
    if (!o.calibration.empty()) w.set_string("nexus.w8a8.calibration", o.calibration);
  } else if (!o.act_scales.empty()) {
    return Status::error("activation scales are for W8A8 only, not " + o.mix.name);
  }
  std::vector<uint8_t> out;
  std::vector<float> scratch;
  size_t index = 0, matched = 0;
  for (const GgufTensorInfo& t : in.tensors()) {
    const DType to = plan_tensor(t, n_layers, has_output, o);
    bool weighted = false;
    // W8A8 quantizes Q8_0 inputs again: their blocks have scales of their own.
    const bool per_row = o.mix.w8a8 && to == DType::kQ8_0;
    if (per_row)
      if (auto it = o.act_scales.find(t.name); it != o.act_scales.end())
        w.set_f32("nexus.w8a8.act_scale." + t.name, it->second);
    if (to == t.dtype && !per_row) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
    } else if (per_row) {
      const int64_t cols = t.shape.back();
      const size_t in_row = row_bytes(t.dtype, cols), out_row = row_bytes(to, cols);
      const size_t rows = t.nbytes / in_row;
      out.resize(out_row * rows);
      std::vector<float> values(static_cast<size_t>(cols));
      for (size_t r = 0; r < rows; ++r) {
        Status s = convert_row(t.dtype, t.data + r * in_row, DType::kF32, values.data(), cols,
                               scratch, nullptr);
        if (!s) return Status::error("tensor '" + t.name + "': " + s.message());
        cpu::quantize_row_w8a8(values.data(), out.data() + r * out_row, cols);
      }
      w.add_tensor(t.name, to, t.shape, out.data());
    } else {
      const int64_t cols = t.shape.back();
      std::vector<float> importance;
      if (o.imatrix != nullptr && cpu::takes_importance(to)) importance = o.imatrix->importance(t.name);
      if (!importance.empty() && static_cast<int64_t>(importance.size()) != cols)
        return Status::error("the imatrix's entry for '" + t.name + "' has " +
                             std::to_string(importance.size()) + " columns, the tensor " +
                             std::to_string(cols) + " (made for another model?)");
      weighted = !importance.empty();
      const size_t in_row = row_bytes(t.dtype, cols), out_row = row_bytes(to, cols);
      const size_t rows = t.nbytes / in_row;
      out.resize(out_row * rows);
      for (size_t r = 0; r < rows; ++r) {
        Status s = convert_row(t.dtype, t.data + r * in_row, to, out.data() + r * out_row, cols,
                               scratch, weighted ? importance.data() : nullptr);
        if (!s) return Status::error("tensor '" + t.name + "': " + s.message());
      }
      w.add_tensor(t.name, to, t.shape, out.data());
    }
    if (o.imatrix != nullptr && o.imatrix->entries.count(t.name) != 0) ++matched;
    if (progress) {
      const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
      progress({++index, in.tensors().size(), &t, to,
                row_bytes(to, cols) * (t.nbytes / std::max<size_t>(1, row_bytes(t.dtype, cols))),
                weighted});
    }
  }
  if (o.imatrix != nullptr && matched == 0)
    return Status::error("the imatrix (" + std::to_string(o.imatrix->entries.size()) +
                         " entries) names none of the model's tensors (made for another model?)");
  return w;
}

}  // namespace nexus
