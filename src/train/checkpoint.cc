// Checkpoint files (see checkpoint.h and docs/TRAINING.md for the layout): GGUF metadata under
// nexus.ckpt.*, parameter tensors under the model's names, optimizer buffers under optim.*, and a
// 64-bit checksum over every other metadata entry and all tensor bytes.
#include "nexus/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include "io/gguf_encode.h"
#include "io/gguf_stream_writer.h"
#include "models/arch.h"

namespace nexus::train {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kVersion = 1;
const std::string K = "nexus.ckpt.";
const std::string kChecksumKey = K + "checksum";
const std::string kOptimPrefix = "optim.";

// FNV-1a over 64-bit little-endian words (a tail shorter than 8 bytes is zero-padded): fast
// enough for hundreds of MB (one multiply per 8 bytes) and sensitive to every bit.
struct Hasher {
  uint64_t h = 0xCBF29CE484222325ull;
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0x100000001B3ull;
    }
    if (i < n) {
      uint64_t w = 0;
      std::memcpy(&w, p + i, n - i);
      h = (h ^ w) * 0x100000001B3ull;
    }
    h = (h ^ n) * 0x100000001B3ull;  // the length, so that zero-padding cannot collide
  }
};

const char* decay_name(LrDecay d) {
  return d == LrDecay::kCosine ? "cosine" : d == LrDecay::kLinear ? "linear" : "constant";
}

// The metadata of a checkpoint (every key but the checksum), in write order.
std::vector<std::pair<std::string, GgufValue>> settings_kv(const TrainSettings& s,
                                                           const TrainProgress& p,
                                                           const Optimizer& opt) {
  std::vector<std::pair<std::string, GgufValue>> kv;
  auto u = [&](const std::string& k, uint64_t v) { kv.emplace_back(K + k, gguf_u64(v)); };
  auto f = [&](const std::string& k, float v) { kv.emplace_back(K + k, gguf_f32(v)); };
  auto str = [&](const std::string& k, std::string v) { kv.emplace_back(K + k, gguf_str(v)); };
  u("version", kVersion);
  const ModelConfig& m = s.model;
  str("model.arch", m.arch_name);
  u("model.n_vocab", m.n_vocab);
  u("model.n_ctx_train", m.n_ctx_train);
  u("model.dim", m.dim);
  u("model.n_layers", m.n_layers);
  u("model.n_heads", m.n_heads);
  u("model.n_kv_heads", m.n_kv_heads);
  u("model.head_dim", m.head_dim);
  u("model.ffn_dim", m.ffn_dim);
  f("model.norm_eps", m.norm_eps);
  f("model.rope_theta", m.rope_theta);
  u("model.rope_dim", m.rope_dim);
  u("model.tied_output", m.tied_output ? 1 : 0);
  u("model.rope_style", static_cast<uint64_t>(m.rope));
  u("model.sliding_window", m.sliding_window);
  // The state-space sizes and a hybrid's recurrent layers ('1') among its attention ones ('0').
  u("model.ssm_conv", m.ssm_conv);
  u("model.ssm_inner", m.ssm_inner);
  u("model.ssm_state", m.ssm_state);
  u("model.ssm_dt_rank", m.ssm_dt_rank);
  u("model.ssm_groups", m.ssm_groups);
  std::string recurrent;
  for (const uint8_t r : m.recurrent) recurrent += r ? '1' : '0';
  str("model.recurrent", recurrent);
  // nexus-ltm's memory (zeros for the other architectures).
  u("model.memory_segment", m.memory_segment);
  u("model.memory_kind", m.memory_kind == MemoryKind::kTitans ? 1 : 0);
  u("model.memory_before_rope", m.memory_before_rope ? 1 : 0);
  u("model.memory_hidden", m.memory_hidden);
  u("batch", s.batch);
  u("seq", s.seq);
  u("accum", s.accum);
  u("steps", s.steps);
  f("lr", s.schedule.lr);
  f("min_lr", s.schedule.min_lr);
  u("warmup", s.schedule.warmup);
  str("schedule", decay_name(s.schedule.decay));
  f("clip", s.clip);
  const OptimizerOptions& o = s.optimizer;
  str("optimizer", o.name);
  f("adamw.beta1", o.adamw.beta1);
  f("adamw.beta2", o.adamw.beta2);
  f("adamw.eps", o.adamw.eps);
  f("adamw.weight_decay", o.adamw.weight_decay);
  u("adamw.bf16_state", o.adamw.bf16_state ? 1 : 0);
  f("sgd.momentum", o.momentum);
  f("sgd.weight_decay", o.sgd_weight_decay);
  u("sgd.nesterov", o.nesterov ? 1 : 0);
  f("adafactor.decay", o.adafactor_decay);
  f("adafactor.eps1", o.adafactor_eps1);
  f("adafactor.clip", o.adafactor_clip);
  f("adafactor.weight_decay", o.adafactor_weight_decay);
  u("seed", s.seed);
  str("data", s.data_path);
  str("val", s.val_path);
  u("documents", s.documents ? 1 : 0);
  str("loss_after", s.loss_after);
  u("tokenizer_fingerprint", s.tokenizer_fingerprint);
  u("step", p.step);
  u("tokens", p.tokens);
  u("optimizer_steps", opt.steps());
  for (int i = 0; i < 4; ++i) u("loader.rng" + std::to_string(i), p.loader.rng[i]);
  u("loader.batches", p.loader.batches);
  u("loader.batch", p.loader.batch);
  u("loader.seq_len", p.loader.seq_len);
  // Mixed precision (absent keys read as f32 without loss scaling: older checkpoints).
  str("precision", precision_name(s.precision));
  if (const auto& ls = s.loss_scale) {
    u("loss_scale.dynamic", ls->dynamic ? 1 : 0);
    f("loss_scale.init", ls->init);
    f("loss_scale.growth", ls->growth);
    f("loss_scale.backoff", ls->backoff);
    u("loss_scale.growth_interval", ls->growth_interval);
    f("loss_scale.scale", p.loss_scale);
    u("loss_scale.good_steps", p.loss_scale_good);
    u("loss_scale.skipped_steps", p.skipped_steps);
  }
  return kv;
}

uint64_t metadata_hash(const std::vector<std::pair<std::string, GgufValue>>& kv, Hasher* h) {
  for (const auto& [key, value] : kv) {
    if (key == kChecksumKey) continue;
    std::vector<uint8_t> bytes;
    gguf_encode::put_kv(bytes, key, value);
    h->add(bytes.data(), bytes.size());
  }
  return h->h;
}

Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::error("cannot open directory '" + dir + "': " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return Status::error("cannot fsync directory '" + dir + "': " + std::strerror(e));
  return Status::ok();
}

const std::regex& name_re() {
  static const std::regex re(R"(ckpt-(\d{8,})\.gguf)");
  return re;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "ckpt-%08lld.gguf", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && std::regex_match(name, m, name_re()))
      found.emplace_back(std::stoll(m[1]), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

Result<std::string> latest_checkpoint(const std::string& dir) {
  if (!fs::is_directory(dir)) return Status::error("'" + dir + "' is not a directory");
  std::vector<std::string> all = list_checkpoints(dir);
  if (all.empty()) return Status::error("no checkpoint (ckpt-NNNNNNNN.gguf) in '" + dir + "'");
  return all.back();
}

Status prune_checkpoints(const std::string& dir, int keep) {
  std::vector<std::string> all = list_checkpoints(dir);
  std::error_code ec;
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i)
    if (!fs::remove(all[i], ec) && ec)
      return Status::error("cannot remove '" + all[i] + "': " + ec.message());
  // Temporary files of writers that were killed (name.gguf.tmp.PID) from another process.
  static const std::regex tmp_re(R"(ckpt-\d{8,}\.gguf\.tmp\.(\d+))");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, tmp_re) && std::stoll(m[1]) != ::getpid())
      fs::remove(e.path(), ec);
  }
  return Status::ok();
}

Status save_checkpoint(const std::string& path, const TrainSettings& settings,
                       const TrainProgress& progress, const TrainModel& model, Optimizer& optimizer,
                       const GgufFile* tokenizer_source) {
  std::vector<std::pair<std::string, GgufValue>> kv = settings_kv(settings, progress, optimizer);
  if (tokenizer_source)
    for (const auto& [key, value] : tokenizer_source->metadata())
      if (key.starts_with("tokenizer.")) kv.emplace_back(key, value);
  struct Blob {
    std::string name;
    std::vector<int64_t> shape;
    const void* data;
    size_t bytes;
    DType dtype;
  };
  std::vector<Blob> blobs;
  for (const ParamInfo& info : model.tensors())
    blobs.push_back({info.name, info.shape, model.params().data() + info.offset,
                     static_cast<size_t>(info.numel) * sizeof(float), DType::kF32});
  for (const StateBuffer& b : optimizer.state()) {
    const size_t n = b.count();
    if (n == 0) continue;
    // Rows of up to 64 Ki elements (a divisor of n), so the writer streams the buffer in chunks
    // instead of copying it whole (GPT-2 124M's AdamW moments are 472 MiB each).
    int64_t cols = int64_t{1} << 16;
    while (n % static_cast<size_t>(cols) != 0) cols /= 2;
    blobs.push_back({kOptimPrefix + b.name,
                     {static_cast<int64_t>(n) / cols, cols},
                     b.raw(),
                     b.bytes(),
                     b.dtype()});
  }

  Hasher h;
  metadata_hash(kv, &h);
  for (const Blob& b : blobs) h.add(b.data, b.bytes);

  GgufStreamWriter w;
  for (auto& [key, value] : kv) w.set(key, value);
  w.set(kChecksumKey, gguf_u64(h.h));
  for (const Blob& b : blobs) {
    const size_t row = row_bytes(b.dtype, b.shape.back());
    w.add_tensor(b.name, b.dtype, b.shape, [b, row](int64_t r0, int64_t n, uint8_t* out) {
      std::memcpy(out, static_cast<const uint8_t*>(b.data) + r0 * row,
                  static_cast<size_t>(n) * row);
    });
  }
  NEXUS_RETURN_IF_ERROR(w.write(path));
  const std::string dir = fs::path(path).parent_path().string();
  return sync_dir(dir.empty() ? "." : dir);
}

bool Checkpoint::has_tokenizer() const { return file_->find("tokenizer.ggml.tokens") != nullptr; }

Result<Checkpoint> Checkpoint::open(const std::string& path) {
  auto opened = GgufFile::open(path);
  if (!opened) return Status::error("checkpoint " + opened.status().message());
  Checkpoint c;
  c.file_ = std::make_shared<const GgufFile>(std::move(opened).value());
  const GgufFile& f = *c.file_;
  auto bad = [&](const std::string& why) {
    return Status::error("checkpoint '" + path + "': " + why);
  };
  std::string missing;
  auto u = [&](const std::string& k) -> uint64_t {
    const GgufValue* v = f.find(K + k);
    if (!v || v->type != GgufType::kU64) {
      if (missing.empty()) missing = K + k;
      return 0;
    }
    return v->u;
  };
  auto fl = [&](const std::string& k) -> float {
    const GgufValue* v = f.find(K + k);
    if (!v || v->type != GgufType::kF32) {
      if (missing.empty()) missing = K + k;
      return 0;
    }
    return static_cast<float>(v->f);
  };
  auto str = [&](const std::string& k) -> std::string {
    auto v = f.get_string(K + k);
    if (!v && missing.empty()) missing = K + k;
    return v.value_or("");
  };
  if (!f.find(K + "version")) return bad("not a nexus training checkpoint (no " + K + "version)");
  if (u("version") != kVersion)
    return bad("format version " + std::to_string(u("version")) + ", this build reads " +
               std::to_string(kVersion));

  // The checksum first: nothing below is trusted before it matches.
  const GgufValue* sum = f.find(kChecksumKey);
  if (!sum || sum->type != GgufType::kU64) return bad("no checksum");
  Hasher h;
  metadata_hash(f.metadata(), &h);
  for (const GgufTensorInfo& t : f.tensors()) h.add(t.data, t.nbytes);
  if (h.h != sum->u) return bad("checksum mismatch (the file is corrupt)");

  TrainSettings& s = c.settings_;
  ModelConfig& m = s.model;
  m.arch_name = str("model.arch");
  const ArchSpec* spec = find_arch(m.arch_name);
  if (!spec) return bad("unknown architecture '" + m.arch_name + "'");
  m.arch = spec->arch;
  m.n_vocab = static_cast<int64_t>(u("model.n_vocab"));
  m.n_ctx_train = static_cast<int64_t>(u("model.n_ctx_train"));
  m.dim = static_cast<int64_t>(u("model.dim"));
  m.n_layers = static_cast<int64_t>(u("model.n_layers"));
  m.n_heads = static_cast<int64_t>(u("model.n_heads"));
  m.n_kv_heads = static_cast<int64_t>(u("model.n_kv_heads"));
  m.head_dim = static_cast<int64_t>(u("model.head_dim"));
  m.ffn_dim = static_cast<int64_t>(u("model.ffn_dim"));
  m.norm_eps = fl("model.norm_eps");
  m.rope_theta = fl("model.rope_theta");
  m.rope_dim = static_cast<int64_t>(u("model.rope_dim"));
  m.tied_output = u("model.tied_output") != 0;
  const uint64_t rope = u("model.rope_style");
  if (rope > static_cast<uint64_t>(RopeStyle::kNeox)) return bad("unknown RoPE style");
  m.rope = static_cast<RopeStyle>(rope);
  m.sliding_window = static_cast<int64_t>(u("model.sliding_window"));
  // Absent from checkpoints written before the state-space and memory settings were kept: none.
  auto opt_u = [&](const std::string& k) -> uint64_t {
    const GgufValue* v = f.find(K + k);
    return v && v->type == GgufType::kU64 ? v->u : 0;
  };
  m.ssm_conv = static_cast<int64_t>(opt_u("model.ssm_conv"));
  m.ssm_inner = static_cast<int64_t>(opt_u("model.ssm_inner"));
  m.ssm_state = static_cast<int64_t>(opt_u("model.ssm_state"));
  m.ssm_dt_rank = static_cast<int64_t>(opt_u("model.ssm_dt_rank"));
  m.ssm_groups = static_cast<int64_t>(opt_u("model.ssm_groups"));
  m.recurrent.clear();
  if (const GgufValue* v = f.find(K + "model.recurrent"); v && v->type == GgufType::kString)
    for (const char r : v->s) m.recurrent.push_back(r == '1' ? 1 : 0);
  m.memory_segment = static_cast<int64_t>(opt_u("model.memory_segment"));
  m.memory_kind = opt_u("model.memory_kind") != 0 ? MemoryKind::kTitans : MemoryKind::kInfini;
  m.memory_before_rope = opt_u("model.memory_before_rope") != 0;
  m.memory_hidden = static_cast<int64_t>(opt_u("model.memory_hidden"));
  s.batch = static_cast<int64_t>(u("batch"));
  s.seq = static_cast<int64_t>(u("seq"));
  s.accum = static_cast<int64_t>(u("accum"));
  s.steps = static_cast<int64_t>(u("steps"));
  s.schedule.lr = fl("lr");
  s.schedule.min_lr = fl("min_lr");
  s.schedule.warmup = static_cast<int64_t>(u("warmup"));
  s.schedule.total_steps = s.steps;
  const std::string decay = str("schedule");
  s.schedule.decay = decay == "linear"   ? LrDecay::kLinear
                     : decay == "cosine" ? LrDecay::kCosine
                                         : LrDecay::kConstant;
  s.clip = fl("clip");
  OptimizerOptions& o = s.optimizer;
  o.name = str("optimizer");
  o.adamw.beta1 = fl("adamw.beta1");
  o.adamw.beta2 = fl("adamw.beta2");
  o.adamw.eps = fl("adamw.eps");
  o.adamw.weight_decay = fl("adamw.weight_decay");
  // Absent from checkpoints written before bf16 state existed: f32.
  o.adamw.bf16_state = opt_u("adamw.bf16_state") != 0;
  o.momentum = fl("sgd.momentum");
  o.sgd_weight_decay = fl("sgd.weight_decay");
  o.nesterov = u("sgd.nesterov") != 0;
  o.adafactor_decay = fl("adafactor.decay");
  o.adafactor_eps1 = fl("adafactor.eps1");
  o.adafactor_clip = fl("adafactor.clip");
  o.adafactor_weight_decay = fl("adafactor.weight_decay");
  s.seed = u("seed");
  s.data_path = str("data");
  s.val_path = str("val");
  // Absent from checkpoints written before document windows existed: a stream.
  if (f.find(K + "documents")) {
    s.documents = u("documents") != 0;
    s.loss_after = str("loss_after");
  }
  s.tokenizer_fingerprint = u("tokenizer_fingerprint");
  TrainProgress& p = c.progress_;
  p.step = static_cast<int64_t>(u("step"));
  p.tokens = static_cast<int64_t>(u("tokens"));
  c.optimizer_steps_ = static_cast<int64_t>(u("optimizer_steps"));
  for (int i = 0; i < 4; ++i) p.loader.rng[i] = u("loader.rng" + std::to_string(i));
  p.loader.batches = u("loader.batches");
  p.loader.batch = static_cast<int>(u("loader.batch"));
  p.loader.seq_len = static_cast<int>(u("loader.seq_len"));
  if (f.find(K + "precision")) {
    auto prec = parse_precision(str("precision"));
    if (!prec) return bad(prec.status().message());
    s.precision = prec.value();
  }
  if (f.find(K + "loss_scale.dynamic")) {
    LossScaleOptions ls;
    ls.dynamic = u("loss_scale.dynamic") != 0;
    ls.init = fl("loss_scale.init");
    ls.growth = fl("loss_scale.growth");
    ls.backoff = fl("loss_scale.backoff");
    ls.growth_interval = static_cast<int64_t>(u("loss_scale.growth_interval"));
    s.loss_scale = ls;
    p.loss_scale = fl("loss_scale.scale");
    p.loss_scale_good = static_cast<int64_t>(u("loss_scale.good_steps"));
    p.skipped_steps = static_cast<int64_t>(u("loss_scale.skipped_steps"));
  }
  if (!missing.empty()) return bad("missing or mistyped key " + missing);
  if (s.batch <= 0 || s.seq <= 0 || s.accum <= 0 || s.steps <= 0 || p.step > s.steps ||
      p.loader.batch != s.batch || p.loader.seq_len != s.seq)
    return bad("inconsistent settings (batch, seq, accum, steps or loader shape)");
  return c;
}

Status Checkpoint::restore_model(TrainModel& model) const {
  const GgufFile& f = *file_;
  size_t params_found = 0;
  for (const GgufTensorInfo& t : f.tensors())
    if (!t.name.starts_with(kOptimPrefix)) ++params_found;
  if (params_found != model.tensors().size())
    return Status::error("checkpoint '" + f.path() + "' holds " + std::to_string(params_found) +
                         " parameter tensors, the model has " +
                         std::to_string(model.tensors().size()));
  for (const ParamInfo& info : model.tensors()) {
    const GgufTensorInfo* t = f.find_tensor(info.name);
    if (!t || t->dtype != DType::kF32 || t->shape != info.shape)
      return Status::error("checkpoint '" + f.path() + "': tensor " + info.name +
                           (t ? " has another shape or type" : " is missing"));
    std::memcpy(model.params().data() + info.offset, t->data, t->nbytes);
  }
  return Status::ok();
}

Status Checkpoint::restore_optimizer(Optimizer& optimizer) const {
  const GgufFile& f = *file_;
  if (optimizer.name() != settings_.optimizer.name)
    return Status::error("checkpoint '" + f.path() + "' holds " + settings_.optimizer.name +
                         " state, not " + optimizer.name());
  size_t n_state = 0;
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name.starts_with(kOptimPrefix)) ++n_state;
  size_t n_buffers = 0;
  for (const StateBuffer& b : optimizer.state()) {
    if (b.bytes() == 0) continue;
    ++n_buffers;
    const GgufTensorInfo* t = f.find_tensor(kOptimPrefix + b.name);
    const DType want = b.dtype();
    if (!t || t->dtype != want || t->nbytes != b.bytes())
      return Status::error("checkpoint '" + f.path() + "': optimizer buffer " + b.name +
                           (!t                   ? " is missing"
                            : t->dtype != want ? " is " + std::string(dtype_name(t->dtype)) +
                                                     ", not " + std::string(dtype_name(want))
                                               : " has another size"));
    std::memcpy(b.raw(), t->data, t->nbytes);
  }
  if (n_buffers != n_state)
    return Status::error("checkpoint '" + f.path() + "' holds " + std::to_string(n_state) +
                         " optimizer buffers, " + optimizer.name() + " has " +
                         std::to_string(n_buffers));
  optimizer.set_steps(optimizer_steps_);
  return Status::ok();
}

}  // namespace nexus::train
