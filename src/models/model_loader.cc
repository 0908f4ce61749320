// Model::load: reads the common hyper-parameters, binds every tensor by the architecture's name
// table and checks its shape, so a wrong or incomplete file fails here with the tensor named.
#include <cmath>
#include <cstdio>
#include <set>

#include "models/arch.h"
#include "models/tensor_parallel.h"
#include "models/weight_repack.h"
#include "nexus/model.h"
#include "profile/memory.h"

namespace nexus {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

Status bind_tensor(const GgufFile& f, const std::string& name, const std::vector<int64_t>& shape,
                   bool required, Tensor* out) {
  const GgufTensorInfo* ti = f.find_tensor(name);
  if (ti == nullptr) {
    if (required) return Status::error(f.path() + ": missing tensor '" + name + "'");
    return Status::ok();
  }
  // 1-D tensors are compared by element count; matrices by shape.
  if (ti->shape != shape)
    return Status::error(f.path() + ": tensor '" + name + "' has shape " + shape_str(ti->shape) +
                         ", expected " + shape_str(shape));
  if (!traits(ti->dtype).supported)
    return Status::error(f.path() + ": tensor '" + name + "' has type " +
                         std::string(dtype_name(ti->dtype)) + ", which nexus cannot compute with");
  if (shape.size() == 1 && ti->dtype != DType::kF32)
    return Status::error(f.path() + ": tensor '" + name + "' (1-D) must be F32, is " +
                         std::string(dtype_name(ti->dtype)));
  *out = f.tensor(*ti);
  return Status::ok();
}

Status positive(const std::string& path, const char* key, int64_t v) {
  if (v <= 0 || v > (1ll << 31))
    return Status::error(path + ": hyper-parameter " + key + " = " + std::to_string(v) +
                         " is out of range");
  return Status::ok();
}

// A W8A8 file (written by `nexus quantize ... W8A8`, docs/COMPRESSION.md): nexus.w8a8.activations
// is "dynamic" or "static", and with static every Q8_0 matrix NAME may have its input's scale in
// nexus.w8a8.act_scale.NAME (absent: quantized per token). Every Q8_0 matrix goes in the plan.
Status w8a8_plan(const GgufFile& f, W8A8Plan* plan) {
  const std::optional<std::string> mode = f.get_string("nexus.w8a8.activations");
  if (!mode) return Status::ok();
  if (*mode != "dynamic" && *mode != "static")
    return Status::error(f.path() + ": nexus.w8a8.activations is '" + *mode +
                         "', expected 'dynamic' or 'static'");
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.dtype != DType::kQ8_0 || t.shape.size() != 2) continue;
    double scale = 0.0;
    if (*mode == "static") scale = f.get_float("nexus.w8a8.act_scale." + t.name).value_or(0.0);
    if (!(scale >= 0.0 && std::isfinite(scale)))
      return Status::error(f.path() + ": nexus.w8a8.act_scale." + t.name + " is " +
                           std::to_string(scale) + ", expected a finite scale >= 0");
    plan->act_scale[t.data] = static_cast<float>(scale);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  auto g = GgufFile::open(path);
  if (!g) return g.status();
  return build(std::make_shared<const GgufFile>(std::move(g).value()), /*file_mapped=*/true);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, TensorParallel* tp) {
  auto g = GgufFile::open(path);
  if (!g) return g.status();
  return build(std::make_shared<const GgufFile>(std::move(g).value()), /*file_mapped=*/true, tp);
}

Result<std::unique_ptr<Model>> Model::from_gguf(std::shared_ptr<const GgufFile> file) {
  return build(std::move(file), /*file_mapped=*/false);
}

Result<std::unique_ptr<Model>> Model::build(std::shared_ptr<const GgufFile> file, bool file_mapped,
                                            TensorParallel* tp) {
  const GgufFile& f = *file;
  const std::string p = f.path();
  auto arch_name = f.get_string("general.architecture");
  if (!arch_name) return Status::error(p + ": no general.architecture key (not a model file?)");
  const ArchSpec* spec = find_arch(*arch_name);
  if (!spec)
    return Status::error(p + ": unsupported architecture '" + *arch_name +
                         "' (supported: " + supported_archs() + ")");
  auto m = std::unique_ptr<Model>(new Model());
  m->file_ = file;
  ModelConfig& c = m->config_;
  c.arch = spec->arch;
  c.arch_name = *arch_name;
  const std::string a = *arch_name + ".";
  auto need_int = [&](const std::string& key, int64_t* out) -> Status {
    auto v = f.get_int(a + key);
    if (!v) return Status::error(p + ": missing hyper-parameter " + a + key);
    *out = *v;
    return positive(p, (a + key).c_str(), *v);
  };
  NEXUS_RETURN_IF_ERROR(need_int("embedding_length", &c.dim));
  NEXUS_RETURN_IF_ERROR(need_int("block_count", &c.n_layers));
  NEXUS_RETURN_IF_ERROR(need_int("context_length", &c.n_ctx_train));
  if (spec->recurrent) {
    // State-space models have no attention: llama.cpp's converter writes 0 for these keys.
    c.ffn_dim = c.n_heads = c.n_kv_heads = c.head_dim = c.rope_dim = 0;
    c.rope = RopeStyle::kNone;
  } else {
    NEXUS_RETURN_IF_ERROR(need_int("feed_forward_length", &c.ffn_dim));
    NEXUS_RETURN_IF_ERROR(need_int("attention.head_count", &c.n_heads));
    c.n_kv_heads = f.get_int(a + "attention.head_count_kv").value_or(c.n_heads);
    NEXUS_RETURN_IF_ERROR(positive(p, "attention.head_count_kv", c.n_kv_heads));
    if (c.n_heads % c.n_kv_heads != 0)
      return Status::error(p + ": head_count " + std::to_string(c.n_heads) +
                           " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
    c.head_dim = f.get_int(a + "attention.key_length").value_or(c.dim / c.n_heads);
    NEXUS_RETURN_IF_ERROR(positive(p, "attention.key_length", c.head_dim));
    if (auto vl = f.get_int(a + "attention.value_length"); vl && *vl != c.head_dim)
      return Status::error(p + ": value_length " + std::to_string(*vl) + " != key_length " +
                           std::to_string(c.head_dim) + " is not supported");
    c.rope_dim = f.get_int(a + "rope.dimension_count").value_or(c.head_dim);
    if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
      return Status::error(p + ": rope.dimension_count " + std::to_string(c.rope_dim) +
                           " is invalid for head dim " + std::to_string(c.head_dim));
    c.rope_theta = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
    c.sliding_window = f.get_int(a + "attention.sliding_window").value_or(0);
    if (c.sliding_window < 0) return Status::error(p + ": negative attention.sliding_window");
  }
  NEXUS_RETURN_IF_ERROR(spec->read_config(f, &c));
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0)
    return Status::error(p + ": invalid normalisation epsilon");

  // Vocabulary size: from the embedding table (the tokenizer may carry the same number).
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return Status::error(p + ": missing tensor 'token_embd.weight'");
  if (emb->shape.size() != 2 || emb->shape[1] != c.dim)
    return Status::error(p + ": token_embd.weight has the wrong shape for dim " +
                         std::to_string(c.dim));
  c.n_vocab = emb->shape[0];

  ModelWeights& w = m->weights_;
  // The untied output is optional here (absent = tied to the embedding).
  for (const ModelSlot& s : spec->model_slots(c))
    NEXUS_RETURN_IF_ERROR(bind_tensor(
        f, s.name, s.shape, s.required && s.field != &ModelWeights::output, &(w.*(s.field))));
  // Listed among the profiler's largest live buffers (mapped, so not in the counted bytes).
  profile::track_buffer(w.tok_embd.data(), m->weight_bytes(), MemCategory::kWeights,
                        "weights (mapped) " + p);
  c.tied_output = w.output.empty();
  if (c.tied_output) w.output = w.tok_embd;

  const std::vector<LayerSlot> slots = spec->layer_slots(c);
  w.layers.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l)
    for (const LayerSlot& s : slots)
      if (slot_in_layer(s, c, l))
        NEXUS_RETURN_IF_ERROR(bind_tensor(f, layer_tensor_name(s.name, l), s.shape_of(l),
                                          s.required, &(w.layers[l].*(s.field))));
  W8A8Plan w8a8;
  if (Status st = w8a8_plan(f, &w8a8); !st) return st;
  if (tp != nullptr && tp->size() > 1) {
    // This rank's slice: owned copies of the split tensors (the whole ones stay mapped).
    if (Status st = check_tensor_parallel(c, tp->size()); !st)
      return Status::error(p + ": " + st.message());
    for (int64_t l = 0; l < c.n_layers; ++l)
      for (const LayerSlot& s : slots) {
        Tensor& t = w.layers[l].*(s.field);
        const std::string name = layer_tensor_name(s.name, l);
        const TpSplit split = tp_split(c, name, tp->rank(), tp->size());
        if (t.empty() || split.kind == TpSplit::kWhole) continue;
        const std::vector<int64_t> shape = tp_slice_shape(t.shape(), split);
        std::shared_ptr<void> mem =
            aligned_shared(Tensor(t.dtype(), shape, nullptr).nbytes(), MemCategory::kWeights);
        NEXUS_RETURN_IF_ERROR(
            tp_slice(t.data(), t.dtype(), t.shape(), split, mem.get(), p + ": " + name));
        // A W8A8 input scale stays valid for a slice (its columns are some of the input's).
        if (auto it = w8a8.act_scale.find(t.data()); it != w8a8.act_scale.end())
          w8a8.act_scale[mem.get()] = it->second;
        t = Tensor(t.dtype(), shape, mem.get(), mem);
      }
    c = tensor_parallel_config(c, tp->size());
    m->tp_ = tp;
    file_mapped = false;  // the split tensors are not the file's pages
  }
  // Faster in-memory layouts for some matmul weights (which ones is decided there).
  MappedSource source;
  if (file_mapped && !f.tensors().empty()) {
    const GgufTensorInfo& t = f.tensors().front();
    source = {f.path(), t.data - f.data_offset() - t.offset};
  }
  repack_weights(w, source.base != nullptr ? &source : nullptr,
                 w8a8.act_scale.empty() ? nullptr : &w8a8);
  return m;
}

std::string Model::tensor_name(const Tensor& t) const {
  if (t.empty()) return {};
  const ArchSpec& spec = arch_spec(config_.arch);
  for (const ModelSlot& s : spec.model_slots(config_))
    if ((weights_.*(s.field)).data() == t.data()) return s.name;
  const std::vector<LayerSlot> slots = spec.layer_slots(config_);
  for (int64_t l = 0; l < config_.n_layers; ++l)
    for (const LayerSlot& s : slots)
      if (slot_in_layer(s, config_, l) && (weights_.layers[l].*(s.field)).data() == t.data())
        return layer_tensor_name(s.name, l);
  return {};
}

size_t Model::loaded_tensor_bytes(std::string_view name) const {
  const ArchSpec& spec = arch_spec(config_.arch);
  for (const ModelSlot& s : spec.model_slots(config_))
    if (s.name == name) return (weights_.*(s.field)).nbytes();
  const std::vector<LayerSlot> slots = spec.layer_slots(config_);
  for (int64_t l = 0; l < config_.n_layers; ++l)
    for (const LayerSlot& s : slots)
      if (slot_in_layer(s, config_, l) && layer_tensor_name(s.name, l) == name)
        return (weights_.layers[l].*(s.field)).nbytes();
  return 0;
}

size_t Model::loaded_weight_bytes() const {
  const ArchSpec& spec = arch_spec(config_.arch);
  std::set<const void*> seen;  // a tied output shares the token table
  size_t n = 0;
  auto add = [&](const Tensor& t) {
    if (!t.empty() && seen.insert(t.data()).second) n += t.nbytes();
  };
  for (const ModelSlot& s : spec.model_slots(config_)) add(weights_.*(s.field));
  const std::vector<LayerSlot> slots = spec.layer_slots(config_);
  for (int64_t l = 0; l < config_.n_layers; ++l)
    for (const LayerSlot& s : slots)
      if (slot_in_layer(s, config_, l)) add(weights_.layers[l].*(s.field));
  return n;
}

Model::~Model() {
  // Tracked at the mapped token table, which repacking may have replaced by a copy.
  if (file_ == nullptr) return;
  if (const GgufTensorInfo* t = file_->find_tensor("token_embd.weight"))
    profile::untrack_buffer(t->data);
}

int64_t Model::n_params() const {
  int64_t n = 0;
  for (const auto& t : file_->tensors()) {
    int64_t k = 1;
    for (int64_t d : t.shape) k *= d;
    n += k;
  }
  return n;
}

size_t Model::weight_bytes() const {
  size_t n = 0;
  for (const auto& t : file_->tensors()) n += t.nbytes;
  return n;
}

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec* s : {&llama_spec(), &qwen2_spec(), &qwen3_spec(), &gpt2_spec(),
                            &mamba_spec(), &mamba2_spec(), &granite_hybrid_spec(), &ltm_spec()})
    if (s->name == name) return s;
  return nullptr;
}

std::string supported_archs() {
  return "llama, qwen2, qwen3, gpt2, mamba, mamba2, granitehybrid, nexus-ltm";
}

bool slot_in_layer(const LayerSlot& s, const ModelConfig& c, int64_t l) {
  switch (s.kind) {
    case LayerKind::kAll:
      return true;
    case LayerKind::kAttention:
      return !c.recurrent_layer(l);
    case LayerKind::kRecurrent:
      return c.recurrent_layer(l);
  }
  return true;
}

const ArchSpec& arch_spec(Arch arch) {
  switch (arch) {
    case Arch::kLlama:
      return llama_spec();
    case Arch::kQwen2:
      return qwen2_spec();
    case Arch::kQwen3:
      return qwen3_spec();
    case Arch::kGpt2:
      return gpt2_spec();
    case Arch::kMamba:
      return mamba_spec();
    case Arch::kMamba2:
      return mamba2_spec();
    case Arch::kGraniteHybrid:
      return granite_hybrid_spec();
    case Arch::kLtm:
      return ltm_spec();
  }
  throw Error("[arch] unknown architecture id " + std::to_string(static_cast<int>(arch)));
}

std::string layer_tensor_name(const char* pattern, int64_t layer) {
  char name[256];
  std::snprintf(name, sizeof(name), pattern, static_cast<int>(layer));
  return name;
}

Metadata config_metadata(const ModelConfig& c) {
  const ArchSpec& spec = arch_spec(c.arch);
  const std::string a = std::string(spec.name) + ".";
  Metadata m;
  auto u32 = [&](const std::string& key, int64_t v) {
    m.emplace_back(a + key, gguf_u32(static_cast<uint32_t>(v)));
  };
  m.emplace_back("general.architecture", gguf_str(std::string(spec.name)));
  u32("context_length", c.n_ctx_train);
  u32("embedding_length", c.dim);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.ffn_dim);
  u32("attention.head_count", c.n_heads);
  // (a hybrid writes its per-layer array itself)
  if (!spec.recurrent && !c.hybrid()) u32("attention.head_count_kv", c.n_kv_heads);
  if (!spec.recurrent && c.head_dim * c.n_heads != c.dim) {
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
  }
  if (c.sliding_window > 0) u32("attention.sliding_window", c.sliding_window);
  spec.write_config(c, &m);
  return m;
}

}  // namespace nexus
