// Context: owns the KV cache, activation buffers and threads; validates a batch and runs the
// architecture's forward pass over it.
#include "nexus/context.h"

#include <algorithm>
#include <optional>
#include <numeric>
#include <vector>

#include "nexus/io/gguf.h"
#include "models/arch.h"
#include "nexus/profile.h"
#include "ops/attention.h"
#include "ops/device.h"
#include "ops/attention_naive.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/matmul.h"
#include "ops/rope.h"
#include "profile/memory.h"
#include "models/forward.h"

namespace nexus {

class ContextImpl {
 public:
  ContextImpl(const Model& m, const ContextOptions& o)
      : model(m),
        opts(o),
        pool(o.n_threads),
        // Attention layers only (a state-space model keeps one row-less layer for the positions).
        // nexus-ltm attends within a segment: its cache holds one segment a sequence.
        kv(KvCacheLayout{std::max<int64_t>(1, m.config().n_attention_layers()), o.n_seq,
                         m.config().memory_segment ? m.config().memory_segment : o.n_ctx,
                         m.config().n_kv_heads, m.config().head_dim, o.kv_type,
                         m.config().memory_segment ? 0 : o.kv_block, o.kv_blocks}) {
    const ModelConfig& c = m.config();
    const int64_t b = o.max_batch;
    const int64_t qw = c.n_heads * c.head_dim, kvw = c.n_kv_heads * c.head_dim;
    const AttentionParams ap{c.n_heads, c.n_kv_heads, c.head_dim, c.sliding_window, 1.0f};
    const size_t attn = c.n_heads > 0 ? attention_scratch_floats(ap, kvw) * pool.size() : 0;
    const size_t h_width = std::max(c.dim, qw);
    const size_t sizes[] = {static_cast<size_t>(b * c.dim),
                            b * h_width,
                            static_cast<size_t>(b * qw),
                            static_cast<size_t>(b * kvw),
                            static_cast<size_t>(b * kvw),
                            static_cast<size_t>(b * qw),
                            static_cast<size_t>(b * c.ffn_dim),
                            static_cast<size_t>(b * c.ffn_dim),
                            static_cast<size_t>(b * (qw + 2 * kvw)),
                            static_cast<size_t>(b * c.rope_dim),
                            attn,
                            static_cast<size_t>(ssm_scratch_floats(c, b)),
                            static_cast<size_t>(c.memory_segment ? b * qw : 0)};
    size_t total = 0;
    for (size_t s : sizes) total += (s * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
    activations = Arena(total, MemCategory::kActivations);
    float** bufs[] = {&st.x,
                      &st.h,
                      &st.q,
                      &st.k,
                      &st.v,
                      &st.att,
                      &st.a,
                      &st.b,
                      &st.qkv,
                      &st.rope_cs,
                      &st.attn_scratch,
                      &st.ssm_buf,
                      &st.mem};
    for (size_t i = 0; i < std::size(sizes); ++i) *bufs[i] = activations.alloc_n<float>(sizes[i]);
    // Scratch for activation conversion in matmul: the most any weight needs for a full batch.
    size_t need = matmul_scratch_bytes(m.weights().output, b);
    for (const LayerWeights& lw : m.weights().layers)
      for (const Tensor* t : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.wqkv, &lw.w_gate, &lw.w_up,
                              &lw.w_down, &lw.ssm_in, &lw.ssm_x, &lw.ssm_dt, &lw.ssm_out})
        if (!t->empty()) need = std::max(need, matmul_scratch_bytes(*t, b));
    // matmul_group (Q/K/V, gate/up) may convert once per dot type for a decode's few tokens.
    for (const LayerWeights& lw : m.weights().layers) {
      const Tensor* g[] = {&lw.wq, &lw.wk, &lw.wv, &lw.w_gate, &lw.w_up};
      size_t sum = 0;
      for (const Tensor* t : g) sum += t->empty() ? 0 : matmul_scratch_bytes(*t, b) + 64;
      need = std::max(need, sum);
    }
    scratch = Arena(need + 4 * kAlignment, MemCategory::kScratch);
    tracked_activations.emplace(activations.base(), activations.capacity(),
                                MemCategory::kActivations, "activations (max batch " +
                                                               std::to_string(b) + ")");
    tracked_scratch.emplace(scratch.base(), scratch.capacity(), MemCategory::kScratch,
                            "matmul scratch");
    if (c.has_recurrent()) {
      ssm.emplace(SsmStateLayout{c.n_recurrent_layers(), o.n_seq, c.ssm_conv - 1,
                                 c.ssm_conv_channels(),
                                 c.ssm_heads() * c.ssm_head_dim() * c.ssm_state});
      st.ssm = &*ssm;
      ssm_pos.assign(o.n_seq, 0);
    }
    if (c.memory_segment) {
      ltm.emplace(c, o.n_seq);
      st.ltm = &*ltm;
      ltm_pos.assign(o.n_seq, 0);
    }
    if (c.hybrid()) {  // each kind of layer numbered on its own in its cache
      int32_t kv_n = 0, state_n = 0;
      for (int64_t l = 0; l < c.n_layers; ++l) {
        const bool r = c.recurrent_layer(l);
        kv_slot.push_back(r ? -1 : kv_n++);
        state_slot.push_back(r ? state_n++ : -1);
      }
      st.kv_slot = kv_slot.data();
      st.state_slot = state_slot.data();
    }
    st.kv = &kv;
    st.pool = &pool;
    st.scratch = &scratch;
    st.schedule = &schedule;
  }

  const Model& model;
  ContextOptions opts;
  ThreadPool pool;
  KvCache kv;
  // State-space models: the recurrent state, and the position each sequence's state is at (-1:
  // rolled back, which a recurrent state cannot follow until it is cleared).
  std::optional<SsmState> ssm;
  std::vector<int32_t> ssm_pos;
  // nexus-ltm: the memories and segments, and the position each sequence is at (the cache holds
  // only its segment; -1: rolled back past a segment already in the memory).
  std::optional<LtmState> ltm;
  std::vector<int32_t> ltm_pos;
  std::vector<int32_t> kv_slot, state_slot;
  Arena activations;
  Arena scratch;
  std::optional<profile::TrackedBuffer> tracked_activations, tracked_scratch;
  DecodeSchedule schedule{idle_prefetch_enabled()};
  ForwardState st;
  std::vector<int32_t> out_rows;
  std::vector<int32_t> next_pos;
  // Runs the forward over rows `rows` of `batch` (nexus-ltm: one segment's tokens of each
  // sequence), their logits into `out` at the wanted rows' places among all the batch's.
  // out_index[i]: batch row i's place among the wanted rows, or -1.
  Status run_rows(const Batch& batch, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& out_index, std::vector<float>* out,
                  Context::Output what);
  std::vector<int32_t> sub_token, sub_pos, sub_seq, sub_out;
  std::vector<float> sub_logits;
};

Status ContextImpl::run_rows(const Batch& batch, const std::vector<int64_t>& rows,
                             const std::vector<int64_t>& out_index, std::vector<float>* out,
                             Context::Output what) {
  const ModelConfig& c = model.config();
  const int32_t seg = static_cast<int32_t>(c.memory_segment);
  const int64_t width = what == Context::Output::kHidden ? c.dim : c.n_vocab;
  const auto m = static_cast<int64_t>(rows.size());
  sub_token.clear();
  sub_pos.clear();
  sub_seq.clear();
  sub_out.clear();
  std::vector<int64_t> out_at;  // each wanted row's place among the batch's wanted rows
  std::vector<int32_t> end(static_cast<size_t>(opts.n_seq), -1);
  for (int64_t j = 0; j < m; ++j) {
    const int64_t i = rows[static_cast<size_t>(j)];
    sub_token.push_back(batch.token[i]);
    sub_pos.push_back(batch.pos[i] % seg);
    sub_seq.push_back(batch.seq[i]);
    end[batch.seq[i]] = batch.pos[i] % seg + 1;
    if (out_index[i] >= 0) {
      sub_out.push_back(static_cast<int32_t>(j));
      out_at.push_back(out_index[i]);
    }
  }
  for (int s = 0; s < opts.n_seq; ++s)
    if (end[s] > 0)
      if (Status r = kv.reserve(s, end[s]); !r) return r;
  sub_logits.resize(sub_out.size() * static_cast<size_t>(width));
  st.n = m;
  st.token = sub_token.data();
  st.pos = sub_pos.data();
  st.seq = sub_seq.data();
  st.out_rows = sub_out.data();
  st.n_out = static_cast<int64_t>(sub_out.size());
  st.logits = sub_logits.data();
  st.hidden_only = what == Context::Output::kHidden;
  embed_rows(model.weights().tok_embd, sub_token, st.x);
  rope_table(st.pos, m, c.rope_dim, c.rope_theta, st.rope_cs);  // positions within the segment
  try {
    const ScopedAttentionImpl attention_impl(opts.attention);
    forward_model(model, st);
  } catch (const Error& e) {
    return Status::error(e.what());
  }
  for (size_t k = 0; k < out_at.size(); ++k)
    std::copy_n(sub_logits.data() + k * width, width, out->data() + out_at[k] * width);
  // A completed segment is in the memory now: the cache starts the next one.
  for (int s = 0; s < opts.n_seq; ++s)
    if (end[s] > 0) kv.set_len(s, end[s] == seg ? 0 : end[s]);
  return Status::ok();
}

Context::Context(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
Context::~Context() = default;

Result<std::unique_ptr<Context>> Context::create(const Model& model, const ContextOptions& opts) {
  ContextOptions o = opts;
  const ModelConfig& c = model.config();
  if (o.n_ctx == 0) o.n_ctx = c.n_ctx_train;
  if (o.n_ctx < 1) return Status::error("context size must be positive, got " + std::to_string(o.n_ctx));
  if (c.arch == Arch::kGpt2 && o.n_ctx > c.n_ctx_train)
    return Status::error("context " + std::to_string(o.n_ctx) + " exceeds gpt2's " +
                         std::to_string(c.n_ctx_train) + " learned positions");
  if (o.n_seq < 1) return Status::error("n_seq must be >= 1");
  if (o.n_threads < 1) return Status::error("threads must be >= 1, got " + std::to_string(o.n_threads));
  if (o.max_batch < 1) return Status::error("max_batch must be >= 1");
  if (o.kv_block < 0 || o.kv_blocks < 0)
    return Status::error("KV block size and block count must be >= 0 (0: the default)");
  o.max_batch = std::min<int64_t>(o.max_batch, o.n_ctx * o.n_seq);
  if (o.kv_type != DType::kF32 && o.kv_type != DType::kF16 && o.kv_type != DType::kQ8_0)
    return Status::error("KV cache type must be f32, f16 or q8_0, got " +
                         std::string(dtype_name(o.kv_type)));
  if (!o.device.is_cpu()) {
    if (Result<const DeviceMemory*> mem = device_memory(o.device); !mem) return mem.status();
    return Status::error(o.device.str() +
                         ": the CUDA backend has device memory and copies but no kernels yet; "
                         "run on the CPU (--device cpu)");
  }
  if (o.kv_type == DType::kQ8_0 && (c.n_kv_heads * c.head_dim) % 32 != 0)
    return Status::error("q8_0 KV cache needs n_kv_heads * head_dim to be a multiple of 32");
  try {
    auto impl = std::make_unique<ContextImpl>(model, o);
    impl->next_pos.assign(o.n_seq, 0);
    return std::unique_ptr<Context>(new Context(std::move(impl)));
  } catch (const Error& e) {
    return Status::error(std::string("cannot create context: ") + e.what());
  }
}

Status Context::decode(const Batch& batch, std::vector<float>* logits, Output what) {
  ContextImpl& im = *impl_;
  const ModelConfig& c = im.model.config();
  const int64_t n = static_cast<int64_t>(batch.token.size());
  NEXUS_PROFILE_SCOPE(n > 1 ? "prefill" : "decode");
  if (n == 0) return Status::error("empty batch");
  if (batch.pos.size() != batch.token.size() || batch.seq.size() != batch.token.size() ||
      (!batch.want_logits.empty() && batch.want_logits.size() != batch.token.size()))
    return Status::error("batch arrays have different lengths");
  if (n > im.opts.max_batch)
    return Status::error("batch of " + std::to_string(n) + " tokens exceeds the maximum " +
                         std::to_string(im.opts.max_batch));
  // Positions of each sequence must continue its cache without gaps.
  std::vector<int32_t>& next = im.next_pos;
  for (int s = 0; s < im.opts.n_seq; ++s) next[s] = im.ltm ? im.ltm_pos[s] : im.kv.len(s);
  if (im.ltm)
    for (int64_t i = 0; i < n; ++i)
      if (batch.seq[i] >= 0 && batch.seq[i] < im.opts.n_seq && im.ltm_pos[batch.seq[i]] < 0)
        return Status::error("sequence " + std::to_string(batch.seq[i]) +
                             ": rolled back past a segment its long-term memory holds; clear "
                             "the sequence from position 0 and decode it again");
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = batch.token[i], s = batch.seq[i], p = batch.pos[i];
    if (t < 0 || t >= c.n_vocab)
      return Status::error("token id " + std::to_string(t) + " out of range [0, " +
                           std::to_string(c.n_vocab) + ")");
    if (s < 0 || s >= im.opts.n_seq)
      return Status::error("sequence id " + std::to_string(s) + " out of range [0, " +
                           std::to_string(im.opts.n_seq) + ")");
    if (p >= im.opts.n_ctx)
      return Status::error("context full: position " + std::to_string(p) + " of sequence " +
                           std::to_string(s) + " is past the context size " +
                           std::to_string(im.opts.n_ctx));
    if (p != next[s])
      return Status::error("sequence " + std::to_string(s) + ": position " + std::to_string(p) +
                           " given, " + std::to_string(next[s]) + " expected");
    ++next[s];
  }
  if (im.ssm)
    for (int64_t i = 0; i < n; ++i) {
      const int s = batch.seq[i];
      if (im.ssm_pos[s] != im.kv.len(s))
        return Status::error("sequence " + std::to_string(s) +
                             ": its recurrent state cannot be rolled back to position " +
                             std::to_string(im.kv.len(s)) +
                             "; clear the sequence from position 0 and decode it again");
    }
  im.out_rows.clear();
  if (batch.want_logits.empty()) {
    im.out_rows.push_back(static_cast<int32_t>(n - 1));
  } else {
    for (int64_t i = 0; i < n; ++i)
      if (batch.want_logits[i]) im.out_rows.push_back(static_cast<int32_t>(i));
  }
  logits->resize(im.out_rows.size() * (what == Output::kHidden ? c.dim : c.n_vocab));
  if (im.ltm) {
    // One segment of each sequence at a time: round r holds each sequence's tokens in the r-th
    // segment it has in the batch (the cache holds a segment; the memory is written between).
    const int64_t seg = c.memory_segment;
    std::vector<int32_t> first(im.opts.n_seq, -1);
    std::vector<std::vector<int64_t>> rounds;
    for (int64_t i = 0; i < n; ++i) {
      const int s = batch.seq[i];
      const int32_t k = batch.pos[i] / static_cast<int32_t>(seg);
      if (first[s] < 0) first[s] = k;
      const auto r = static_cast<size_t>(k - first[s]);
      if (rounds.size() <= r) rounds.resize(r + 1);
      rounds[r].push_back(i);
    }
    std::vector<int64_t> out_index(static_cast<size_t>(n), -1);
    for (size_t k = 0; k < im.out_rows.size(); ++k)
      out_index[im.out_rows[k]] = static_cast<int64_t>(k);
    for (const std::vector<int64_t>& rows : rounds)
      if (Status st = im.run_rows(batch, rows, out_index, logits, what); !st) {
        for (int64_t i = 0; i < n; ++i) im.ltm_pos[batch.seq[i]] = -1;  // part-way through
        return st;
      }
    for (int64_t i = 0; i < n; ++i) im.ltm_pos[batch.seq[i]] = batch.pos[i] + 1;
    return Status::ok();
  }

  ForwardState& st = im.st;
  st.n = n;
  st.token = batch.token.data();
  st.pos = batch.pos.data();
  st.seq = batch.seq.data();
  st.out_rows = im.out_rows.data();
  st.n_out = static_cast<int64_t>(im.out_rows.size());
  st.logits = logits->data();
  st.hidden_only = what == Output::kHidden;
  // Blocks for the new positions; on failure the ones taken here are given back.
  for (int s = 0; s < im.opts.n_seq; ++s) {
    if (next[s] == im.kv.len(s)) continue;
    if (Status r = im.kv.reserve(s, next[s]); !r) {
      for (int u = 0; u < s; ++u) im.kv.clear(u, im.kv.len(u));
      return r;
    }
  }
  NEXUS_PROFILE_NAMED_SCOPE(embed_span, "embed");
  embed_rows(im.model.weights().tok_embd, batch.token, st.x);
  if (!im.model.weights().pos_embd.empty()) {
    embed_rows(im.model.weights().pos_embd, batch.pos, st.h);  // learned positions (gpt2)
    add_inplace(st.x, st.h, n * c.dim);
  }
  if (c.rope != RopeStyle::kNone) rope_table(st.pos, n, c.rope_dim, c.rope_theta, st.rope_cs);
  embed_span.close();
  try {
    const ScopedAttentionImpl attention_impl(im.opts.attention);
    forward_model(im.model, st);
  } catch (const Error& e) {
    if (im.ssm)  // the batch's states may be part-way through the step
      for (int64_t i = 0; i < n; ++i) im.ssm_pos[batch.seq[i]] = -1;
    return Status::error(e.what());
  }
  for (int s = 0; s < im.opts.n_seq; ++s) im.kv.set_len(s, next[s]);
  if (im.ssm)
    for (int64_t i = 0; i < n; ++i) im.ssm_pos[batch.seq[i]] = next[batch.seq[i]];
  NEXUS_PROFILE_COUNTER("kv_cache.tokens", std::accumulate(next.begin(), next.end(), 0.0));
  return Status::ok();
}

void Context::clear_seq(int seq, int32_t from_pos) {
  ContextImpl& im = *impl_;
  if (seq < 0 || seq >= im.opts.n_seq) return;
  if (im.ltm) {
    // Within the segment being filled the cache rolls back; past its start the memory would
    // have to forget a segment, which it cannot.
    const int32_t seg = static_cast<int32_t>(im.model.config().memory_segment);
    const int32_t at = im.ltm_pos[seq];
    if (from_pos <= 0) {
      im.ltm->reset(seq);
      im.ltm_pos[seq] = 0;
      im.kv.clear(seq, 0);
    } else if (at >= 0 && from_pos < at) {
      const int32_t start = at - (at % seg == 0 ? seg : at % seg);
      if (from_pos >= start && at % seg != 0) {
        im.kv.clear(seq, from_pos - start);
        im.ltm_pos[seq] = from_pos;
      } else {
        im.ltm_pos[seq] = -1;
      }
    }
    return;
  }
  if (im.ssm) {
    if (from_pos <= 0) {
      im.ssm->reset(seq);
      im.ssm_pos[seq] = 0;
    } else if (from_pos < im.kv.len(seq)) {
      im.ssm_pos[seq] = -1;
    }
  }
  im.kv.clear(seq, from_pos);
}

Status Context::share_prefix(int src, int dst, int32_t n_pos) {
  const int n = impl_->opts.n_seq;
  if (src < 0 || src >= n || dst < 0 || dst >= n || src == dst)
    return Status::error("share_prefix: sequences " + std::to_string(src) + " and " +
                         std::to_string(dst) + " must differ and lie in [0, " +
                         std::to_string(n) + ")");
  ContextImpl& im = *impl_;
  if (im.ltm) {
    // The memory and the segment are the latest position's: shared whole or not at all.
    if (n_pos != im.ltm_pos[src])
      return Status::error("share_prefix: sequence " + std::to_string(src) +
                           " has a long-term memory at position " +
                           std::to_string(im.ltm_pos[src]) + ", not at " + std::to_string(n_pos));
    NEXUS_RETURN_IF_ERROR(im.kv.share_prefix(src, dst, im.kv.len(src)));
    im.ltm->copy(src, dst);
    im.ltm_pos[dst] = n_pos;
    return Status::ok();
  }
  if (im.ssm) {
    // A recurrent state is that of its latest position only: it is shared whole or not at all.
    if (n_pos != im.kv.len(src) || im.ssm_pos[src] != n_pos)
      return Status::error("share_prefix: sequence " + std::to_string(src) +
                           " has a recurrent state at position " +
                           std::to_string(im.ssm_pos[src]) + ", not at " +
                           std::to_string(n_pos));
    NEXUS_RETURN_IF_ERROR(im.kv.share_prefix(src, dst, n_pos));
    im.ssm->copy(src, dst);
    im.ssm_pos[dst] = n_pos;
    return Status::ok();
  }
  return im.kv.share_prefix(src, dst, n_pos);
}

Status Context::share_prefix(int src, int dst, const RecurrentSnapshot& snap) {
  ContextImpl& im = *impl_;
  const int n = im.opts.n_seq;
  if (im.ltm) return restore_state(dst, snap);  // a segment boundary's snapshot needs no cache
  if (!im.ssm) return Status::error("share_prefix: the model has no recurrent state to restore");
  if (src < 0 || src >= n || dst < 0 || dst >= n || src == dst)
    return Status::error("share_prefix: sequences " + std::to_string(src) + " and " +
                         std::to_string(dst) + " must differ and lie in [0, " +
                         std::to_string(n) + ")");
  if (snap.pos < 1 || static_cast<int64_t>(snap.state.size()) != im.ssm->seq_floats())
    return Status::error("share_prefix: the snapshot (position " + std::to_string(snap.pos) +
                         ", " + std::to_string(snap.state.size()) + " floats) is not one of "
                         "this model's states (" + std::to_string(im.ssm->seq_floats()) +
                         " floats)");
  NEXUS_RETURN_IF_ERROR(im.kv.share_prefix(src, dst, snap.pos));
  im.ssm->load(dst, snap.state.data());
  im.ssm_pos[dst] = snap.pos;
  return Status::ok();
}

Status Context::save_state(int seq, RecurrentSnapshot* out) const {
  const ContextImpl& im = *impl_;
  if (im.ltm) {
    // At a segment boundary the memory is the sequence's whole state (the cache is empty).
    const int64_t seg = im.model.config().memory_segment;
    if (seq < 0 || seq >= im.opts.n_seq || im.ltm_pos[seq] < 0 || im.ltm_pos[seq] % seg != 0)
      return Status::error(
          "save_state: a nexus-ltm sequence is saved at a segment boundary (a "
          "multiple of " +
          std::to_string(seg) + " positions); sequence " + std::to_string(seq) + " is at " +
          std::to_string(seq >= 0 && seq < im.opts.n_seq ? im.ltm_pos[seq] : -1));
    out->pos = im.ltm_pos[seq];
    out->state.resize(static_cast<size_t>(im.ltm->seq_floats()));
    im.ltm->save(seq, out->state.data());
    return Status::ok();
  }
  if (!im.ssm) return Status::error("save_state: the model has no recurrent state");
  if (seq < 0 || seq >= im.opts.n_seq)
    return Status::error("save_state: sequence " + std::to_string(seq) + " out of range [0, " +
                         std::to_string(im.opts.n_seq) + ")");
  if (im.ssm_pos[seq] != im.kv.len(seq))
    return Status::error("save_state: sequence " + std::to_string(seq) +
                         " was rolled back past its recurrent state");
  out->pos = im.ssm_pos[seq];
  out->state.resize(static_cast<size_t>(im.ssm->seq_floats()));
  im.ssm->save(seq, out->state.data());
  return Status::ok();
}

Status Context::restore_state(int seq, const RecurrentSnapshot& snap) {
  ContextImpl& im = *impl_;
  if (im.ltm) {
    const int64_t seg = im.model.config().memory_segment;
    if (seq < 0 || seq >= im.opts.n_seq || snap.pos < 0 || snap.pos % seg != 0 ||
        static_cast<int64_t>(snap.state.size()) != im.ltm->seq_floats())
      return Status::error(
          "restore_state: not a nexus-ltm snapshot of this model at a segment "
          "boundary (position " +
          std::to_string(snap.pos) + ", " + std::to_string(snap.state.size()) + " floats)");
    im.ltm->load(seq, snap.state.data());
    im.kv.clear(seq, 0);
    im.ltm_pos[seq] = snap.pos;
    return Status::ok();
  }
  if (!im.ssm) return Status::error("restore_state: the model has no recurrent state");
  if (seq < 0 || seq >= im.opts.n_seq)
    return Status::error("restore_state: sequence " + std::to_string(seq) + " out of range [0, " +
                         std::to_string(im.opts.n_seq) + ")");
  if (static_cast<int64_t>(snap.state.size()) != im.ssm->seq_floats())
    return Status::error("restore_state: the snapshot holds " + std::to_string(snap.state.size()) +
                         " floats, this model's state " + std::to_string(im.ssm->seq_floats()));
  if (snap.pos < 0 || snap.pos > im.kv.len(seq))
    return Status::error("restore_state: sequence " + std::to_string(seq) + " holds " +
                         std::to_string(im.kv.len(seq)) + " positions, the snapshot is at " +
                         std::to_string(snap.pos));
  im.kv.clear(seq, snap.pos);
  im.ssm->load(seq, snap.state.data());
  im.ssm_pos[seq] = snap.pos;
  return Status::ok();
}

Context::KvUsage Context::kv_usage() const {
  const KvCache& kv = impl_->kv;
  return {kv.block_size(), kv.n_blocks(), kv.n_blocks() - kv.free_blocks()};
}

std::span<const float> Context::long_term_memory(int seq, int64_t layer) const {
  ContextImpl& im = *impl_;
  const ModelConfig& c = im.model.config();
  if (!im.ltm || seq < 0 || seq >= im.opts.n_seq || layer < 0 || layer >= c.n_layers) return {};
  return {im.ltm->memory(layer, seq), static_cast<size_t>(im.ltm->memory_floats(layer))};
}

std::vector<float> Context::long_term_segment_keys(int seq, int64_t layer) const {
  ContextImpl& im = *impl_;
  const ModelConfig& c = im.model.config();
  if (!im.ltm || seq < 0 || seq >= im.opts.n_seq || layer < 0 || layer >= c.n_layers) return {};
  const int64_t seg = c.memory_segment;
  std::vector<float> out(static_cast<size_t>(seg * c.n_kv_heads * c.head_dim));
  if (const float* k = im.ltm->keys(layer, seq))
    std::copy_n(k, out.size(), out.begin());
  else
    im.kv.load_k_rows(layer, seq, 0, static_cast<int32_t>(seg), out.data());
  return out;
}

int32_t Context::seq_len(int seq) const {
  return impl_->ltm ? std::max(0, impl_->ltm_pos[seq]) : impl_->kv.len(seq);
}

Context::RecurrentState Context::recurrent_state(int seq, int64_t layer) const {
  const ContextImpl& im = *impl_;
  const ModelConfig& c = im.model.config();
  if (!im.ssm || seq < 0 || seq >= im.opts.n_seq || layer < 0 || layer >= c.n_layers ||
      !c.recurrent_layer(layer))
    return {};
  const int64_t slot = im.st.state_index(layer);
  const SsmState& st = *im.ssm;
  return {{st.conv(slot, seq), static_cast<size_t>((c.ssm_conv - 1) * c.ssm_conv_channels())},
          {st.scan(slot, seq),
           static_cast<size_t>(c.ssm_heads() * c.ssm_head_dim() * c.ssm_state)}};
}
const ContextOptions& Context::options() const { return impl_->opts; }
const Model& Context::model() const { return impl_->model; }
size_t Context::kv_bytes() const {
  return impl_->kv.bytes() + (impl_->ssm ? impl_->ssm->bytes() : 0) +
         (impl_->ltm ? impl_->ltm->bytes() : 0);
}

}  // namespace nexus
