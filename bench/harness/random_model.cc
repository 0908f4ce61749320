// Random benchmark models: shape presets, llama-quantize's per-tensor type choice, and the
// streaming generator (one row at a time from a per-row seed, so threads and chunks don't matter).
#include "harness/random_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>

#include "backends/cpu/quant.h"
#include "nexus/compress/quantize.h"
#include "nexus/core/thread_pool.h"
#include "io/gguf_stream_writer.h"
#include "harness/random_model_vocab.h"

namespace nexus {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

ModelShape llama_preset(std::string name, int64_t dim, int64_t layers, int64_t heads, int64_t ffn) {
  ModelShape s;
  s.name = std::move(name);
  s.arch = "llama";
  s.dim = dim;
  s.n_layers = layers;
  s.n_heads = s.n_kv_heads = heads;
  s.head_dim = dim / heads;
  s.ffn_dim = ffn;
  s.n_vocab = 32000;
  s.n_ctx = 2048;
  return s;
}

ModelShape qwen3_06b() {
  ModelShape s;
  s.name = "Q06B";
  s.arch = "qwen3";
  s.dim = 1024;
  s.n_layers = 28;
  s.n_heads = 16;
  s.n_kv_heads = 8;
  s.head_dim = 128;
  s.ffn_dim = 3072;
  s.n_vocab = 151936;
  s.n_ctx = 40960;
  s.rope_theta = 1000000.0f;
  s.norm_eps = 1e-6f;
  return s;
}

Status check_shape(const ModelShape& s) {
  auto bad = [](const std::string& what) { return Status::error("model shape: " + what); };
  if (s.arch != "llama" && s.arch != "qwen3") return bad("arch must be llama or qwen3");
  for (auto [name, v] : {std::pair{"dim", s.dim},
                         {"layers", s.n_layers},
                         {"heads", s.n_heads},
                         {"kv_heads", s.n_kv_heads},
                         {"head_dim", s.head_dim},
                         {"ffn", s.ffn_dim},
                         {"ctx", s.n_ctx}})
    if (v <= 0 || v > (int64_t{1} << 30))
      return bad(std::string(name) + " = " + std::to_string(v) + " is out of range");
  if (s.n_heads % s.n_kv_heads != 0) return bad("heads must be a multiple of kv_heads");
  if (s.head_dim % 2 != 0) return bad("head_dim must be even (RoPE)");
  if (s.n_vocab < kMinRandomVocab || s.n_vocab > (int64_t{1} << 24))
    return bad("vocab must be in [" + std::to_string(kMinRandomVocab) + ", 2^24]");
  if (!(s.rope_theta > 0) || !(s.norm_eps > 0)) return bad("rope_theta and eps must be positive");
  return Status::ok();
}

// llama-quantize's fallback when a row does not fit the block size (nexus/compress/quantize.h);
// nullopt for the 32-block types, which llama-quantize refuses instead.
std::optional<DType> fit_type(DType t, int64_t cols) {
  if (cols % traits(t).block_size == 0) return t;
  if (traits(t).block_size != 256) return std::nullopt;
  return fit_rows(t, cols);
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Normal(0, stddev) values from a splitmix64 stream (Box-Muller on 24-bit uniforms).
void fill_normal(float* x, int64_t n, uint64_t state, float stddev) {
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  for (int64_t i = 0; i < n; i += 2) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t r = mix64(state);
    const float u1 = static_cast<float>((r >> 40) + 1) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>(r & 0xFFFFFF) * 0x1p-24f;   // [0, 1)
    const float rad = stddev * std::sqrt(-2.0f * std::log(u1));
    x[i] = rad * std::cos(kTwoPi * u2);
    if (i + 1 < n) x[i + 1] = rad * std::sin(kTwoPi * u2);
  }
}

}  // namespace

Result<ModelShape> parse_model_shape(std::string_view spec) {
  const std::string s = lower(spec);
  if (s == "l15m") return llama_preset("L15M", 288, 6, 6, 768);
  if (s == "l110m") return llama_preset("L110M", 768, 12, 12, 2048);
  if (s == "q06b") return qwen3_06b();
  if (s != "custom" && s.rfind("custom:", 0) != 0)
    return Status::error("unknown shape '" + std::string(spec) +
                         "' (L15M, L110M, Q06B or custom:key=value,...)");
  std::map<std::string, std::string> kv;
  std::string_view rest = s.size() > 7 ? std::string_view(s).substr(7) : std::string_view();
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return Status::error("custom shape: expected key=value, got '" + std::string(item) + "'");
    kv[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
  }
  ModelShape m;
  if (kv.count("arch")) m.arch = kv["arch"];
  if (m.arch == "qwen3") {
    m.rope_theta = 1000000.0f;
    m.norm_eps = 1e-6f;
  }
  static const std::pair<const char*, int64_t ModelShape::*> kIntKeys[] = {
      {"dim", &ModelShape::dim},           {"layers", &ModelShape::n_layers},
      {"heads", &ModelShape::n_heads},     {"kv_heads", &ModelShape::n_kv_heads},
      {"head_dim", &ModelShape::head_dim}, {"ffn", &ModelShape::ffn_dim},
      {"vocab", &ModelShape::n_vocab},     {"ctx", &ModelShape::n_ctx}};
  for (const auto& [k, v] : kv) {
    if (k == "arch") continue;
    if (k == "rope_theta" || k == "eps") {
      char* end = nullptr;
      const float f = std::strtof(v.c_str(), &end);
      if (v.empty() || *end != '\0')
        return Status::error("custom shape: " + k + " = '" + v + "' is not a number");
      (k == "eps" ? m.norm_eps : m.rope_theta) = f;
      continue;
    }
    int64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size())
      return Status::error("custom shape: " + k + " = '" + v + "' is not an integer");
    auto it = std::find_if(std::begin(kIntKeys), std::end(kIntKeys),
                           [&k](const auto& e) { return k == e.first; });
    if (it != std::end(kIntKeys))
      m.*(it->second) = n;
    else if (k == "tied")
      m.tied = n != 0;
    else
      return Status::error("custom shape: unknown key '" + k + "'");
  }
  if (!kv.count("kv_heads")) m.n_kv_heads = m.n_heads;
  if (!kv.count("head_dim") && m.n_heads > 0) m.head_dim = m.dim / m.n_heads;
  NEXUS_RETURN_IF_ERROR(check_shape(m));
  return m;
}

int64_t model_shape_params(const ModelShape& s) {
  const int64_t qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  int64_t layer = 2 * s.dim + 2 * qw * s.dim + 2 * kvw * s.dim + 3 * s.ffn_dim * s.dim;
  if (s.arch == "qwen3") layer += 2 * s.head_dim;
  return s.n_vocab * s.dim * (s.tied ? 1 : 2) + s.dim + s.n_layers * layer;
}

std::optional<ModelFileType> parse_model_file_type(std::string_view name) {
  const std::string s = lower(name);
  if (s == "f32") return ModelFileType::kF32;
  if (s == "f16") return ModelFileType::kF16;
  if (s == "q8_0") return ModelFileType::kQ8_0;
  if (s == "q4_0") return ModelFileType::kQ4_0;
  if (s == "q4_k" || s == "q4_k_m") return ModelFileType::kQ4_K_M;
  return std::nullopt;
}

uint32_t llama_ftype_id(ModelFileType t) {
  switch (t) {
    case ModelFileType::kF32:
      return 0;
    case ModelFileType::kF16:
      return 1;
    case ModelFileType::kQ8_0:
      return 7;
    case ModelFileType::kQ4_0:
      return 2;
    case ModelFileType::kQ4_K_M:
      return 15;
  }
  return 0;
}

std::string llama_ftype_name(uint32_t ftype) {
  static const std::map<uint32_t, std::string> kNames = {{0, "F32"},
                                                         {1, "F16"},
                                                         {2, "Q4_0"},
                                                         {3, "Q4_1"},
                                                         {7, "Q8_0"},
                                                         {8, "Q5_0"},
                                                         {9, "Q5_1"},
                                                         {10, "Q2_K - Medium"},
                                                         {11, "Q3_K - Small"},
                                                         {12, "Q3_K - Medium"},
                                                         {13, "Q3_K - Large"},
                                                         {14, "Q4_K - Small"},
                                                         {15, "Q4_K - Medium"},
                                                         {16, "Q5_K - Small"},
                                                         {17, "Q5_K - Medium"},
                                                         {18, "Q6_K"},
                                                         {32, "BF16"}};
  auto it = kNames.find(ftype);
  return it != kNames.end() ? it->second : "ftype " + std::to_string(ftype);
}

Result<std::vector<PlannedTensor>> plan_model_tensors(const ModelShape& s, ModelFileType type,
                                                      bool pure) {
  NEXUS_RETURN_IF_ERROR(check_shape(s));
  const DType target = type == ModelFileType::kF32    ? DType::kF32
                       : type == ModelFileType::kF16  ? DType::kF16
                       : type == ModelFileType::kQ8_0 ? DType::kQ8_0
                       : type == ModelFileType::kQ4_0 ? DType::kQ4_0
                                                      : DType::kQ4_K;
  const bool quantized = traits(target).quantized;
  std::vector<PlannedTensor> out;
  Status err;
  // Adds a matrix; `head` marks the output head, `more_bits` a Q4_K_M "more bits" tensor.
  auto matrix = [&](std::string name, int64_t rows, int64_t cols, bool head, bool more_bits) {
    DType t = target;
    if (quantized && !pure) {
      if (head) {
        // The head gets Q6_K unless the target is Q8_0 or a row does not fit the target's block.
        t = (cols % traits(target).block_size != 0 || target == DType::kQ8_0) ? DType::kQ8_0
                                                                              : DType::kQ6_K;
      } else if (more_bits && type == ModelFileType::kQ4_K_M) {
        t = DType::kQ6_K;
      }
    }
    const std::optional<DType> fit = quantized ? fit_type(t, cols) : t;
    if (!fit && err.is_ok())
      err = Status::error("tensor '" + name + "' has rows of " + std::to_string(cols) +
                          " values, not a multiple of " + std::string(dtype_name(t)) +
                          "'s block of " + std::to_string(traits(t).block_size));
    out.push_back({std::move(name), fit.value_or(t), {rows, cols}, false});
  };
  auto vec = [&](std::string name, int64_t n) {
    out.push_back({std::move(name), DType::kF32, {n}, true});
  };
  const int64_t qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
  matrix("token_embd.weight", s.n_vocab, s.dim, s.tied, false);
  vec("output_norm.weight", s.dim);
  if (!s.tied) matrix("output.weight", s.n_vocab, s.dim, true, false);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool more = use_more_bits(l, s.n_layers);
    vec(p + "attn_norm.weight", s.dim);
    matrix(p + "attn_q.weight", qw, s.dim, false, false);
    matrix(p + "attn_k.weight", kvw, s.dim, false, false);
    matrix(p + "attn_v.weight", kvw, s.dim, false, more);
    matrix(p + "attn_output.weight", s.dim, qw, false, false);
    if (s.arch == "qwen3") {
      vec(p + "attn_q_norm.weight", s.head_dim);
      vec(p + "attn_k_norm.weight", s.head_dim);
    }
    vec(p + "ffn_norm.weight", s.dim);
    matrix(p + "ffn_gate.weight", s.ffn_dim, s.dim, false, false);
    matrix(p + "ffn_up.weight", s.ffn_dim, s.dim, false, false);
    matrix(p + "ffn_down.weight", s.dim, s.ffn_dim, false, more);
  }
  if (!err.is_ok()) return err;
  return out;
}

Status write_random_model(const GenModelOptions& o, const std::string& path, GenModelStats* stats) {
  auto plan = plan_model_tensors(o.shape, o.type, o.pure);
  if (!plan) return plan.status();
  // Fail early, with a clear message, on a type whose quantizer this build lacks.
  for (const PlannedTensor& t : plan.value()) {
    const int64_t bs = traits(t.dtype).block_size;
    std::vector<float> x(bs, 0.01f);
    std::vector<uint8_t> y(row_bytes(t.dtype, bs));
    try {
      cpu::quantize_row(t.dtype, x.data(), y.data(), bs);
    } catch (const std::exception& e) {
      return Status::error("this build cannot quantize to " + std::string(dtype_name(t.dtype)) +
                           " (needed for " + t.name + "): " + e.what());
    }
  }
  const ModelShape& s = o.shape;
  const std::string a = s.arch + ".";
  GgufStreamWriter w;
  w.set("general.architecture", gguf_str(s.arch));
  w.set("general.name", gguf_str("nexus-random-" + s.name));
  w.set("general.file_type", gguf_u32(llama_ftype_id(o.type)));
  if (o.type != ModelFileType::kF32 && o.type != ModelFileType::kF16)
    w.set("general.quantization_version", gguf_u32(2));
  w.set(a + "context_length", gguf_u32(static_cast<uint32_t>(s.n_ctx)));
  w.set(a + "embedding_length", gguf_u32(static_cast<uint32_t>(s.dim)));
  w.set(a + "block_count", gguf_u32(static_cast<uint32_t>(s.n_layers)));
  w.set(a + "feed_forward_length", gguf_u32(static_cast<uint32_t>(s.ffn_dim)));
  w.set(a + "attention.head_count", gguf_u32(static_cast<uint32_t>(s.n_heads)));
  w.set(a + "attention.head_count_kv", gguf_u32(static_cast<uint32_t>(s.n_kv_heads)));
  w.set(a + "attention.key_length", gguf_u32(static_cast<uint32_t>(s.head_dim)));
  w.set(a + "attention.value_length", gguf_u32(static_cast<uint32_t>(s.head_dim)));
  w.set(a + "rope.dimension_count", gguf_u32(static_cast<uint32_t>(s.head_dim)));
  w.set(a + "rope.freq_base", gguf_f32(s.rope_theta));
  w.set(a + "attention.layer_norm_rms_epsilon", gguf_f32(s.norm_eps));
  w.set(a + "vocab_size", gguf_u32(static_cast<uint32_t>(s.n_vocab)));
  w.set("nexus.random.shape", gguf_str(s.name));
  w.set("nexus.random.seed", gguf_str(std::to_string(o.seed)));
  w.set("nexus.random.stddev", gguf_f32(o.stddev));
  add_dummy_vocab(s, &w);

  ThreadPool pool(o.n_threads);
  int64_t n_params = 0;
  for (size_t ti = 0; ti < plan->size(); ++ti) {
    const PlannedTensor& t = (*plan)[ti];
    const int64_t cols = t.shape.back();
    const size_t rb = row_bytes(t.dtype, cols);
    n_params += t.shape.size() == 1 ? cols : t.shape[0] * cols;
    const uint64_t tensor_seed = mix64(mix64(o.seed) + ti + 1);
    auto produce = [&pool, &o, t, cols, rb, tensor_seed](int64_t r0, int64_t n, uint8_t* out) {
      std::mutex mu;
      std::string error;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        try {
          std::vector<float> row(cols, 1.0f);
          for (int64_t r = b; r < e; ++r) {
            if (!t.unit) fill_normal(row.data(), cols, mix64(tensor_seed ^ (r0 + r)), o.stddev);
            cpu::quantize_row(t.dtype, row.data(), out + r * rb, cols);
          }
        } catch (const std::exception& ex) {
          std::lock_guard<std::mutex> lock(mu);
          if (error.empty()) error = ex.what();
        }
      });
      if (!error.empty()) throw Error(error);
    };
    w.add_tensor(t.name, t.dtype, t.shape, produce);
  }
  w.set_chunk_bytes(o.chunk_bytes);
  NEXUS_RETURN_IF_ERROR(w.write(path));
  if (stats) {
    stats->n_params = n_params;
    stats->file_bytes = w.file_size();
    stats->n_tensors = static_cast<int>(plan->size());
  }
  return Status::ok();
}

}  // namespace nexus
