// TrainModel's mixed-precision pieces: rounded weight copies per block, rounding of saved
// activations (into their 16-bit copies) and of activation gradients, and restoring a block's
// activations into the working set before its backward (recomputing the cheap ones).
#include "nexus/core/thread_pool.h"
#include "nexus/train/train_model.h"
#include "ops/round.h"
#include "ops/train_ops.h"
#include "train/block_norm.h"

namespace nexus::train {

TrainModel::LayerParams TrainModel::layer_weights(int64_t l) {
  const LayerParams& m = p_.layers[l];
  if (!half()) return m;
  const auto [begin, end] = layer_range_[l];
  if (wcopy_layer_id_ != l) {
    round_copy(opts_.precision, params_ + begin, wcopy_layer_, static_cast<int64_t>(end - begin),
               pool_.get());
    wcopy_layer_id_ = l;
  }
  // The same tensor at the same place inside the block's range of the copy.
  auto at = [&](float* p) { return p ? wcopy_layer_ + (p - (params_ + begin)) : nullptr; };
  LayerParams r;
  r.attn_norm = at(m.attn_norm), r.wq = at(m.wq), r.wk = at(m.wk), r.wv = at(m.wv);
  r.wo = at(m.wo), r.ffn_norm = at(m.ffn_norm), r.w_gate = at(m.w_gate), r.w_up = at(m.w_up);
  r.w_down = at(m.w_down), r.attn_norm_b = at(m.attn_norm_b), r.bq = at(m.bq), r.bk = at(m.bk);
  r.bv = at(m.bv), r.bo = at(m.bo), r.ffn_norm_b = at(m.ffn_norm_b), r.b_up = at(m.b_up);
  r.b_down = at(m.b_down), r.q_norm = at(m.q_norm), r.k_norm = at(m.k_norm);
  return r;
}

void TrainModel::keep(float* x, uint16_t* h, int64_t count) {
  if (!half()) return;
  if (h)
    round_pack(opts_.precision, x, h, count, pool_.get());
  else
    round_to(opts_.precision, x, count, pool_.get());
}

void TrainModel::round_grad(float* x, int64_t count) {
  if (half()) round_to(opts_.precision, x, count, pool_.get());
}

void TrainModel::restore_block(int64_t l, const BlockActs& a, const LayerParams& w) {
  const ModelConfig& c = cfg_;
  const auto [t, n, d, f, qw, kvw, as] = dims();
  const Precision p = opts_.precision;
  ThreadPool* pool = pool_.get();
  const int64_t n_att = as.b * as.n_heads * t * t;
  if (!half_.empty()) {
    const HalfActs& h = half_[l];
    unpack(p, h.q, a.q, n * qw, pool);
    if (h.atty) unpack(p, h.atty, a.atty, n * qw, pool);
    unpack(p, h.k, a.k, n * kvw, pool);
    unpack(p, h.v, a.v, n * kvw, pool);
    if (h.att) unpack(p, h.att, a.att, n_att, pool);
    if (h.g) unpack(p, h.g, a.g, n * f, pool);
    unpack(p, h.u, a.u, n * f, pool);
    if (h.qp) {  // qwen3
      unpack(p, h.qp, a.qp, n * qw, pool);
      unpack(p, h.kp, a.kp, n * kvw, pool);
    }
  }
  // Recomputed as block_forward computed them (the norms also rewrite their statistics with the
  // same values).
  norm_forward(c, a.ln1, a.mean1, a.rstd1, act_.res[l], w.attn_norm, w.attn_norm_b, n, pool);
  keep(a.ln1, nullptr, n * d);
  norm_forward(c, a.ln2, a.mean2, a.rstd2, a.mid, w.ffn_norm, w.ffn_norm_b, n, pool);
  keep(a.ln2, nullptr, n * d);
  if (a.g)
    swiglu_forward(a.hact, a.g, a.u, n * f, pool);
  else
    gelu_forward(a.hact, a.u, n * f, pool);
  keep(a.hact, nullptr, n * f);
  if (opts_.selective_recompute) {
    // The probabilities and output from the block's (rounded) q, k and v, by the forward's own
    // op (which rounds them only after computing both, as here).
    attention_forward(a.atty, a.att, a.q, a.k, a.v, as, pool);
    keep(a.att, nullptr, n_att);
    keep(a.atty, nullptr, n * qw);
  }
}

}  // namespace nexus::train
