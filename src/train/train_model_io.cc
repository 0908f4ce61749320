// TrainModel construction: random init, import from a GGUF checkpoint (any dtype, dequantized)
// and export to an F32 GGUF that Model::load and `nexus run` read.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/quant.h"
#include "nexus/io/gguf.h"
#include "io/gguf_stream_writer.h"
#include "models/arch.h"
#include "nexus/train/train_model.h"

namespace nexus::train {

Result<std::unique_ptr<TrainModel>> TrainModel::create(const ModelConfig& cfg, int64_t batch,
                                                       int64_t seq, const InitOptions& init,
                                                       const TrainOptions& opts) {
  NEXUS_RETURN_IF_ERROR(validate(cfg, batch, seq, opts.tp != nullptr));
  std::unique_ptr<TrainModel> m(new TrainModel(cfg, batch, seq, opts));
  if (init.random) m->init_random(init);
  return m;
}

// The state-space mixer's own tensors, initialised as Mamba does: A = -(1 .. state) per channel
// (mamba) or -uniform(1, 16) per head (mamba2), D = 1, step sizes log-uniform in [1e-3, 1e-1]
// through the dt bias (softplus's inverse), conv taps uniform in +-1/sqrt(taps), the gated norm 1.
// False for any other tensor.
bool TrainModel::init_ssm(const ParamInfo& info, float* p, std::mt19937_64& rng) const {
  const std::string& name = info.name;
  const int64_t n = info.numel;
  if (name.ends_with(".ssm_a")) {
    std::uniform_real_distribution<float> u(1.0f, 16.0f);
    for (int64_t i = 0; i < n; ++i)
      p[i] = cfg_.arch == Arch::kMamba ? -static_cast<float>(i % cfg_.ssm_state + 1) : -u(rng);
  } else if (name.ends_with(".ssm_d") || name.ends_with(".ssm_norm.weight")) {
    std::fill(p, p + n, 1.0f);
  } else if (name.ends_with(".ssm_dt.bias")) {
    std::uniform_real_distribution<float> u(std::log(1e-3f), std::log(1e-1f));
    for (int64_t i = 0; i < n; ++i) {
      const float dt = std::exp(u(rng));
      p[i] = dt + std::log(-std::expm1(-dt));  // softplus(p) = dt
    }
  } else if (name.ends_with(".ssm_conv1d.weight")) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(cfg_.ssm_conv));
    std::uniform_real_distribution<float> u(-bound, bound);
    for (int64_t i = 0; i < n; ++i) p[i] = u(rng);
  } else {
    return false;
  }
  return true;
}

void TrainModel::init_random(const InitOptions& init) {
  std::mt19937_64 rng(init.seed);
  const float out_std = init.scale_out_proj
                            ? init.std / std::sqrt(2.0f * static_cast<float>(cfg_.n_layers))
                            : init.std;
  for (const ParamInfo& info : infos_) {
    float* p = params_ + info.offset;
    if (init_ssm(info, p, rng)) continue;
    if (info.shape.size() == 1) {  // norm weights 1, biases and memory gates 0 (an even mix)
      const bool zero = info.name.ends_with(".bias") || info.name.ends_with(".memory_gate");
      // Titans' rates as logits: momentum 0.9, step 0.1, forgetting init.memory_forget.
      float value = zero ? 0.0f : 1.0f;
      const float a = init.memory_forget;
      if (info.name.ends_with(".memory_eta")) value = std::log(0.9f / 0.1f);
      if (info.name.ends_with(".memory_theta")) value = std::log(0.1f / 0.9f);
      if (info.name.ends_with(".memory_alpha")) value = std::log(a / (1.0f - a));
      std::fill(p, p + info.numel, value);
      continue;
    }
    if (info.name.ends_with(".memory_w1") || info.name.ends_with(".memory_w2")) {
      // The deep memory's initial weights: its unit keys and queries give pre-activations of unit
      // variance, and its reads start at the values' scale.
      const bool first = info.name.ends_with(".memory_w1");
      const float std = first ? 1.0f : 1.0f / std::sqrt(static_cast<float>(cfg_.memory_hidden));
      std::normal_distribution<float> dist(0.0f, std);
      for (int64_t i = 0; i < info.numel; ++i) p[i] = dist(rng);
      continue;
    }
    const bool out_proj = info.name.ends_with("attn_output.weight") ||
                          info.name.ends_with("ffn_down.weight") ||
                          info.name.ends_with("ssm_out.weight");
    std::normal_distribution<float> dist(0.0f, out_proj ? out_std : init.std);
    for (int64_t i = 0; i < info.numel; ++i) p[i] = dist(rng);
  }
}

Result<std::unique_ptr<TrainModel>> TrainModel::from_gguf(const std::string& path, int64_t batch,
                                                          int64_t seq, const TrainOptions& opts) {
  auto loaded = Model::load(path);
  if (!loaded) return loaded.status();
  const Model& model = **loaded;
  ModelConfig cfg = model.config();
  NEXUS_RETURN_IF_ERROR(validate(cfg, batch, seq));
  std::unique_ptr<TrainModel> m(new TrainModel(cfg, batch, seq, opts));
  for (const ParamInfo& info : m->infos_) {
    const GgufTensorInfo* t = model.gguf().find_tensor(info.name);
    if (!t) return Status::error(path + ": missing tensor " + info.name);
    if (t->shape != info.shape)
      return Status::error(path + ": tensor " + info.name + " has an unexpected shape");
    if (!cpu::has_kernels(t->dtype))
      return Status::error(path + ": tensor " + info.name + " has a dtype without CPU kernels");
    const int64_t cols = info.shape.back(), rows = info.numel / cols;
    const size_t rb = row_bytes(t->dtype, cols);
    for (int64_t r = 0; r < rows; ++r)
      cpu::dequantize_row(t->dtype, t->data + r * rb, m->params_ + info.offset + r * cols, cols);
  }
  return m;
}

Status TrainModel::export_gguf(const std::string& path, const GgufFile* tokenizer_source) const {
  const ModelConfig& c = cfg_;
  const bool gpt2 = c.arch == Arch::kGpt2;
  // Streamed tensor by tensor from the parameters: no copy of the model is held in memory.
  GgufStreamWriter w;
  // The architecture's own metadata keys (models/arch.h), as Model::load reads them back; a llama
  // family context covers the training sequence (gpt2's is its position table's length).
  ModelConfig meta = c;
  if (!gpt2) meta.n_ctx_train = std::max(c.n_ctx_train, seq_);
  for (auto& [key, value] : config_metadata(meta)) w.set(key, std::move(value));
  w.set("general.name", gguf_str("nexus-trained"));
  w.set("general.file_type", gguf_u32(0));  // all F32
  if (tokenizer_source)
    for (const auto& [key, value] : tokenizer_source->metadata())
      if (key.starts_with("tokenizer.")) w.set(key, value);
  for (const ParamInfo& info : infos_) {
    const float* data = params_ + info.offset;
    const int64_t cols = info.shape.back();
    w.add_tensor(info.name, DType::kF32, info.shape, [data, cols](int64_t r0, int64_t n, uint8_t* out) {
      std::memcpy(out, data + r0 * cols, static_cast<size_t>(n * cols) * sizeof(float));
    });
  }
  return w.write(path);
}

}  // namespace nexus::train
