// TrainModel: parameter layout, activation arena, and the explicit forward / backward passes.
#include "train/train_model.h"

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "train/train_ops.h"

namespace nexus::train {
namespace {

void zero(float* p, int64_t n) { std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); }

// Logits held at a time by the output head (8 Mi floats, 32 MiB: 262 rows of a 32k vocabulary).
// BM_TrainOutputHead (bench/micro/train_bench.cc) at L15M, CPU time of the head over 2048 rows:
// blocks of 64 / 131 / 256 / 512 / 2048 rows cost 1.20 / 1.12 / 1.02 / 1.00 / 1.00 of the full
// GEMMs: below ~256 rows the weight-gradient GEMM (k = rows) re-reads its 37 MB output too often.
constexpr int64_t kHeadBlockFloats = int64_t{1} << 23;

}  // namespace

Status TrainModel::validate(const ModelConfig& c, int64_t batch, int64_t seq) {
  const std::string w = "[train] ";
  if (c.arch != Arch::kLlama) return Status::error(w + "only the llama architecture is trainable");
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.ffn_dim <= 0 ||
      c.n_vocab <= 0 || c.head_dim <= 0)
    return Status::error(w + "dim, layers, heads, kv_heads, head_dim, ffn and vocab must be > 0");
  if (c.n_heads % c.n_kv_heads != 0)
    return Status::error(w + "heads " + std::to_string(c.n_heads) +
                         " is not a multiple of kv_heads " + std::to_string(c.n_kv_heads));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return Status::error(w + "rope_dim " + std::to_string(c.rope_dim) + " is invalid");
  if (c.rope != RopeStyle::kNormal)
    return Status::error(w + "llama uses adjacent-pair (normal) RoPE; got another style");
  if (c.sliding_window != 0) return Status::error(w + "sliding-window attention is not trainable");
  if (batch <= 0 || seq <= 0) return Status::error(w + "batch and seq must be > 0");
  return Status::ok();
}

TrainModel::TrainModel(const ModelConfig& cfg, int64_t batch, int64_t seq)
    : cfg_(cfg),
      batch_(batch),
      seq_(seq),
      head_rows_(std::clamp<int64_t>(kHeadBlockFloats / cfg.n_vocab, 1, batch * seq)) {
  const ModelConfig& c = cfg_;
  const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    infos_.push_back({std::move(name), std::move(shape), n_params_, n});
    n_params_ += static_cast<size_t>(n);
  };
  add("token_embd.weight", {c.n_vocab, c.dim});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {c.dim});
    add(b + "attn_q.weight", {qw, c.dim});
    add(b + "attn_k.weight", {kvw, c.dim});
    add(b + "attn_v.weight", {kvw, c.dim});
    add(b + "attn_output.weight", {c.dim, qw});
    add(b + "ffn_norm.weight", {c.dim});
    add(b + "ffn_gate.weight", {c.ffn_dim, c.dim});
    add(b + "ffn_up.weight", {c.ffn_dim, c.dim});
    add(b + "ffn_down.weight", {c.dim, c.ffn_dim});
  }
  add("output_norm.weight", {c.dim});
  if (!c.tied_output) add("output.weight", {c.n_vocab, c.dim});
  params_ =
      static_cast<float*>(aligned_alloc_counted(n_params_ * sizeof(float), MemCategory::kWeights));
  grads_ = static_cast<float*>(
      aligned_alloc_counted(n_params_ * sizeof(float), MemCategory::kOptimizer));
  zero(params_, static_cast<int64_t>(n_params_));
  zero(grads_, static_cast<int64_t>(n_params_));
  p_ = bind(params_);
  g_ = bind(grads_);

  // Activation arena: every buffer sized for (batch_, seq_); each slice is 64-byte aligned.
  const int64_t n = batch_ * seq_, d = c.dim, f = c.ffn_dim;
  const int64_t att = batch_ * c.n_heads * seq_ * seq_;
  const int64_t L = c.n_layers;
  auto pad = [](int64_t x) {
    return (static_cast<size_t>(x) * 4 + kAlignment - 1) / kAlignment * kAlignment;
  };
  const size_t per_layer =
      pad(n * d) * 4 + pad(n) * 2 + pad(n * qw) * 2 + pad(n * kvw) * 2 + pad(att) + pad(n * f) * 3;
  const size_t rest = pad(n * d) * 3 + pad(n) * 2 + pad(head_rows_ * c.n_vocab) +
                      pad(c.n_vocab * d) + pad(n * d) + pad(seq_ * c.rope_dim) + pad(n * d) * 2 +
                      pad(n * f) * 3 + pad(n * qw) * 2 + pad(n * kvw) * 2 + pad(n) * 2;
  arena_ = Arena(per_layer * L + rest, MemCategory::kActivations);
  auto A = [&](int64_t count) { return arena_.alloc_n<float>(static_cast<size_t>(count)); };
  for (int64_t l = 0; l < L; ++l) {
    act_.res.push_back(A(n * d));
    act_.mid.push_back(A(n * d));
    act_.ln1.push_back(A(n * d));
    act_.ln2.push_back(A(n * d));
    act_.rstd1.push_back(A(n));
    act_.rstd2.push_back(A(n));
    act_.q.push_back(A(n * qw));
    act_.atty.push_back(A(n * qw));
    act_.k.push_back(A(n * kvw));
    act_.v.push_back(A(n * kvw));
    act_.att.push_back(A(att));
    act_.g.push_back(A(n * f));
    act_.u.push_back(A(n * f));
    act_.hact.push_back(A(n * f));
  }
  act_.res.push_back(A(n * d));  // the last block's output
  act_.lnf = A(n * d);
  act_.tmp = A(n * d);
  act_.rstdf = A(n);
  act_.row_loss = A(n);
  act_.logits = A(head_rows_ * c.n_vocab);
  act_.dlnf = A(n * d);
  act_.head_grad = A(c.n_vocab * d);
  act_.rope_cs = A(seq_ * c.rope_dim);
  act_.dres = A(n * d);
  act_.dln = A(n * d);
  act_.dhact = A(n * f);
  act_.dg = A(n * f);
  act_.du = A(n * f);
  act_.datty = A(n * qw);
  act_.dq = A(n * qw);
  act_.dk = A(n * kvw);
  act_.dv = A(n * kvw);
  act_.tokens = arena_.alloc_n<int32_t>(static_cast<size_t>(n));
  act_.targets = arena_.alloc_n<int32_t>(static_cast<size_t>(n));
  rope_table(act_.rope_cs, seq_, c.rope_dim, c.rope_theta);
  set_threads(1);
}

void TrainModel::set_threads(int n) {
  NEXUS_CHECK(n >= 1, "[train] threads must be >= 1, got " + std::to_string(n));
  pool_ = n > 1 ? std::make_unique<ThreadPool>(n) : nullptr;
  attn_scratch_.assign(static_cast<size_t>(n * attention_backward_scratch(seq_)), 0.0f);
}

TrainModel::~TrainModel() {
  aligned_free_counted(params_, n_params_ * sizeof(float), MemCategory::kWeights);
  aligned_free_counted(grads_, n_params_ * sizeof(float), MemCategory::kOptimizer);
}

TrainModel::Params TrainModel::bind(float* base) const {
  Params p;
  size_t i = 0;
  auto next = [&] { return base + infos_[i++].offset; };
  p.tok_embd = next();
  for (int64_t l = 0; l < cfg_.n_layers; ++l) {
    LayerParams lp;
    lp.attn_norm = next();
    lp.wq = next();
    lp.wk = next();
    lp.wv = next();
    lp.wo = next();
    lp.ffn_norm = next();
    lp.w_gate = next();
    lp.w_up = next();
    lp.w_down = next();
    p.layers.push_back(lp);
  }
  p.out_norm = next();
  p.output = cfg_.tied_output ? p.tok_embd : next();
  return p;
}

const ParamInfo* TrainModel::find(const std::string& name) const {
  for (const ParamInfo& info : infos_)
    if (info.name == name) return &info;
  return nullptr;
}

Tensor TrainModel::param(const std::string& name) const {
  const ParamInfo* info = find(name);
  NEXUS_CHECK(info, "[train] no parameter named " + name);
  return Tensor(DType::kF32, info->shape, params_ + info->offset);
}

Tensor TrainModel::grad(const std::string& name) const {
  const ParamInfo* info = find(name);
  NEXUS_CHECK(info, "[train] no parameter named " + name);
  return Tensor(DType::kF32, info->shape, grads_ + info->offset);
}

void TrainModel::zero_grad() { zero(grads_, static_cast<int64_t>(n_params_)); }

float TrainModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t b, int64_t t) {
  const ModelConfig& c = cfg_;
  NEXUS_CHECK(b > 0 && t > 0 && b <= batch_ && t <= seq_,
              "[train forward] batch " + std::to_string(b) + " x seq " + std::to_string(t) +
                  " exceeds the arena's " + std::to_string(batch_) + " x " + std::to_string(seq_));
  const int64_t n = b * t;
  NEXUS_CHECK(static_cast<int64_t>(tokens.size()) == n && static_cast<int64_t>(targets.size()) == n,
              "[train forward] need " + std::to_string(n) + " tokens and targets, got " +
                  std::to_string(tokens.size()) + " and " + std::to_string(targets.size()));
  for (int64_t i = 0; i < n; ++i) {
    NEXUS_CHECK(tokens[i] >= 0 && tokens[i] < c.n_vocab && targets[i] < c.n_vocab,
                "[train forward] token or target out of range at " + std::to_string(i));
    act_.tokens[i] = tokens[i];
    act_.targets[i] = targets[i];
  }
  const int64_t d = c.dim, f = c.ffn_dim, qw = c.n_heads * c.head_dim;
  const int64_t kvw = c.n_kv_heads * c.head_dim;
  const AttnShape as{b, t, c.n_heads, c.n_kv_heads, c.head_dim};
  Activations& a = act_;
  embedding_forward(a.res[0], a.tokens, p_.tok_embd, n, d);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerParams& w = p_.layers[l];
    rmsnorm_forward(a.ln1[l], a.rstd1[l], a.res[l], w.attn_norm, n, d, c.norm_eps, pool_.get());
    matmul_forward(a.q[l], a.ln1[l], w.wq, n, d, qw);
    matmul_forward(a.k[l], a.ln1[l], w.wk, n, d, kvw);
    matmul_forward(a.v[l], a.ln1[l], w.wv, n, d, kvw);
    rope_rotate(a.q[l], n, t, c.n_heads, c.head_dim, c.rope_dim, c.rope, a.rope_cs, false,
                pool_.get());
    rope_rotate(a.k[l], n, t, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, a.rope_cs, false,
                pool_.get());
    attention_forward(a.atty[l], a.att[l], a.q[l], a.k[l], a.v[l], as, pool_.get());
    matmul_forward(a.tmp, a.atty[l], w.wo, n, qw, d);
    for (int64_t i = 0; i < n * d; ++i) a.mid[l][i] = a.res[l][i] + a.tmp[i];
    rmsnorm_forward(a.ln2[l], a.rstd2[l], a.mid[l], w.ffn_norm, n, d, c.norm_eps, pool_.get());
    matmul_forward(a.g[l], a.ln2[l], w.w_gate, n, d, f);
    matmul_forward(a.u[l], a.ln2[l], w.w_up, n, d, f);
    swiglu_forward(a.hact[l], a.g[l], a.u[l], n * f, pool_.get());
    matmul_forward(a.tmp, a.hact[l], w.w_down, n, f, d);
    for (int64_t i = 0; i < n * d; ++i) a.res[l + 1][i] = a.mid[l][i] + a.tmp[i];
  }
  rmsnorm_forward(a.lnf, a.rstdf, a.res[c.n_layers], p_.out_norm, n, d, c.norm_eps, pool_.get());
  cur_b_ = b;
  cur_t_ = t;
  have_forward_ = true;
  return head_forward(n);
}

float TrainModel::head_forward(int64_t n) {
  const int64_t d = cfg_.dim, nv = cfg_.n_vocab;
  Activations& a = act_;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += a.targets[i] >= 0 ? 1 : 0;
  const float scale = count ? 1.0f / static_cast<float>(count) : 0.0f;
  zero(a.dlnf, n * d);
  zero(a.head_grad, nv * d);
  // Per block of rows: logits, loss and d logits in place, then d lnf and d output.
  for (int64_t r0 = 0; r0 < n; r0 += head_rows_) {
    const int64_t rows = std::min(head_rows_, n - r0);
    matmul_forward(a.logits, a.lnf + r0 * d, p_.output, rows, d, nv);
    cross_entropy_fused(a.logits, a.row_loss + r0, a.targets + r0, rows, nv, scale, pool_.get());
    matmul_backward(a.dlnf + r0 * d, a.head_grad, a.logits, a.lnf + r0 * d, p_.output, rows, d, nv);
  }
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += a.row_loss[i];
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

std::vector<float> TrainModel::logits() const {
  NEXUS_CHECK(cur_b_ > 0, "[train logits] no forward() has run");
  const int64_t n = cur_b_ * cur_t_;
  std::vector<float> out(static_cast<size_t>(n * cfg_.n_vocab));
  matmul_forward(out.data(), act_.lnf, p_.output, n, cfg_.dim, cfg_.n_vocab);
  return out;
}

void TrainModel::backward() {
  NEXUS_CHECK(have_forward_, "[train backward] no forward() to differentiate (or already used)");
  have_forward_ = false;
  const ModelConfig& c = cfg_;
  const int64_t b = cur_b_, t = cur_t_, n = b * t;
  const int64_t d = c.dim, f = c.ffn_dim, qw = c.n_heads * c.head_dim;
  const int64_t kvw = c.n_kv_heads * c.head_dim;
  const AttnShape as{b, t, c.n_heads, c.n_kv_heads, c.head_dim};
  Activations& a = act_;
  // The head's backward ran in forward(): add its weight gradient, continue from d lnf.
  accumulate(g_.output, a.head_grad, c.n_vocab * d, pool_.get());
  zero(a.dres, n * d);
  rmsnorm_backward(a.dres, g_.out_norm, a.dlnf, a.res[c.n_layers], p_.out_norm, a.rstdf, n, d,
                   pool_.get());
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    const LayerParams& w = p_.layers[l];
    const LayerParams& gw = g_.layers[l];
    // Feed-forward half: res[l+1] = mid + swiglu(ln2 Wg, ln2 Wu) Wd, ln2 = norm(mid).
    zero(a.dhact, n * f);
    matmul_backward(a.dhact, gw.w_down, a.dres, a.hact[l], w.w_down, n, f, d);
    zero(a.dg, n * f);
    zero(a.du, n * f);
    swiglu_backward(a.dg, a.du, a.dhact, a.g[l], a.u[l], n * f, pool_.get());
    zero(a.dln, n * d);
    matmul_backward(a.dln, gw.w_gate, a.dg, a.ln2[l], w.w_gate, n, d, f);
    matmul_backward(a.dln, gw.w_up, a.du, a.ln2[l], w.w_up, n, d, f);
    rmsnorm_backward(a.dres, gw.ffn_norm, a.dln, a.mid[l], w.ffn_norm, a.rstd2[l], n, d,
                     pool_.get());
    // Attention half: mid = res[l] + attn(rope(ln1 Wq), rope(ln1 Wk), ln1 Wv) Wo.
    zero(a.datty, n * qw);
    matmul_backward(a.datty, gw.wo, a.dres, a.atty[l], w.wo, n, qw, d);
    zero(a.dq, n * qw);
    zero(a.dk, n * kvw);
    zero(a.dv, n * kvw);
    attention_backward(a.dq, a.dk, a.dv, a.datty, a.att[l], a.q[l], a.k[l], a.v[l], as,
                       attn_scratch_.data(), pool_.get());
    rope_rotate(a.dq, n, t, c.n_heads, c.head_dim, c.rope_dim, c.rope, a.rope_cs, true,
                pool_.get());
    rope_rotate(a.dk, n, t, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope, a.rope_cs, true,
                pool_.get());
    zero(a.dln, n * d);
    matmul_backward(a.dln, gw.wq, a.dq, a.ln1[l], w.wq, n, d, qw);
    matmul_backward(a.dln, gw.wk, a.dk, a.ln1[l], w.wk, n, d, kvw);
    matmul_backward(a.dln, gw.wv, a.dv, a.ln1[l], w.wv, n, d, kvw);
    rmsnorm_backward(a.dres, gw.attn_norm, a.dln, a.res[l], w.attn_norm, a.rstd1[l], n, d,
                     pool_.get());
  }
  embedding_backward(g_.tok_embd, a.dres, a.tokens, n, d);
}

}  // namespace nexus::train
