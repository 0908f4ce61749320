// TrainModel: parameter layout, activation arena, and the explicit forward / backward passes.
#include "nexus/train/train_model.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/arch.h"
#include "models/transformer_layer.h"
#include "nexus/core/thread_pool.h"
#include "nexus/profile.h"
#include "ops/elementwise.h"
#include "ops/round.h"
#include "ops/rope.h"
#include "ops/train_ops.h"
#include "profile/memory.h"

namespace nexus::train {
namespace {

void memset_floats(float* p, int64_t n) {
  std::memset(p, 0, static_cast<size_t>(n) * sizeof(float));
}

// Logits held at a time by the output head (8 Mi floats, 32 MiB: 262 rows of a 32k vocabulary):
// below ~256 rows the weight-gradient GEMM (k = rows) re-reads its 37 MB output too often
// (BM_TrainOutputHead; docs/KERNELS.md).
constexpr int64_t kHeadBlockFloats = int64_t{1} << 23;
// ... but never fewer rows than this (the batch permitting): with GPT-2's 50k vocabulary 8 Mi
// logits are 166 rows, for which its head runs about 17% slower than in blocks of 512 (98 MiB).
constexpr int64_t kMinHeadRows = 512;
// With the tied embedding's rows deferred (TrainOptions::row_updates) the logits share memory with
// the embedding's dense gradient, so fewer rows at a time: GPT-2's 256 rows are 49 MiB against 98
// at 512, for under 1% of a step and a lower peak RSS (docs/KERNELS.md).
constexpr int64_t kDeferredHeadRows = 256;
// With no memory-saving mode set, as many rows at a time as 64 Mi logits hold (256 MiB): the whole
// batch for L15M (2048 x 32000) and GPT-2 124M (1024 x 50257) at their benchmark shapes. The head's
// weight is then packed once a step and its gradient read and written once: a few percent of a
// step for 100-200 MiB more peak RSS (docs/KERNELS.md).
constexpr int64_t kPlainHeadLogits = int64_t{1} << 26;

}  // namespace

std::string memory_modes(const TrainOptions& o) {
  std::string s;
  const auto add = [&s](const char* mode) { s += (s.empty() ? "" : ", ") + std::string(mode); };
  if (o.recompute_blocks) add("gradient checkpointing");
  if (o.selective_recompute && !o.recompute_blocks) add("selective recompute");
  if (o.update_in_backward) add("optimizer in backward");
  return s;
}

Status TrainModel::validate(const ModelConfig& c, int64_t batch, int64_t seq, bool slice) {
  const std::string w = "[train] ";
  if (c.has_recurrent()) {
    if (c.dim <= 0 || c.n_layers <= 0 || c.n_vocab <= 0 || c.ssm_inner <= 0 || c.ssm_state <= 0 ||
        c.ssm_conv <= 0 || c.ssm_dt_rank <= 0 || c.ssm_n_groups() <= 0)
      return Status::error(w + "dim, layers, vocab and the state-space sizes must be > 0");
    if (c.ssm_inner % c.ssm_heads() != 0 || c.ssm_heads() % c.ssm_n_groups() != 0)
      return Status::error(w + c.arch_name + ": inner size " + std::to_string(c.ssm_inner) +
                           " must be a multiple of the heads (" + std::to_string(c.ssm_heads()) +
                           "), and they of the groups (" + std::to_string(c.ssm_n_groups()) + ")");
    if (batch <= 0 || seq <= 0) return Status::error(w + "batch and seq must be > 0");
    if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0)
      return Status::error(w + "norm_eps must be > 0");
    // A hybrid without attention layers has no attention sizes to check.
    if (c.ssm() || c.n_attention_layers() == 0) return Status::ok();
  }
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.ffn_dim <= 0 ||
      c.n_vocab <= 0 || c.head_dim <= 0)
    return Status::error(w + "dim, layers, heads, kv_heads, head_dim, ffn and vocab must be > 0");
  if (c.n_heads % c.n_kv_heads != 0)
    return Status::error(w + "heads " + std::to_string(c.n_heads) +
                         " is not a multiple of kv_heads " + std::to_string(c.n_kv_heads));
  if (c.sliding_window < 0) return Status::error(w + "negative sliding window");
  if (c.sliding_window > 0 && c.arch == Arch::kGpt2)
    return Status::error(w + "gpt2 has no sliding window");
  if (batch <= 0 || seq <= 0) return Status::error(w + "batch and seq must be > 0");
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0)
    return Status::error(w + "norm_eps must be > 0");
  if (c.arch == Arch::kGpt2) {  // RoPE fields are ignored: gpt2 has learned positions
    if (c.head_dim * c.n_heads != c.dim && !slice)
      return Status::error(w + "gpt2 needs head_dim * heads == dim");
    if (c.n_ctx_train < seq)
      return Status::error(w + "gpt2's position table has " + std::to_string(c.n_ctx_train) +
                           " rows (context length), fewer than seq " + std::to_string(seq));
    return Status::ok();
  }
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return Status::error(w + "rope_dim " + std::to_string(c.rope_dim) + " is invalid");
  if (c.hybrid()) {  // granitehybrid: adjacent-pair RoPE or none
    if (c.rope == RopeStyle::kNeox) return Status::error(w + "granitehybrid uses llama's RoPE or none");
    return Status::ok();
  }
  if (c.arch == Arch::kLtm && (c.memory_segment <= 0 || seq % c.memory_segment != 0))
    return Status::error(w + "nexus-ltm: seq " + std::to_string(seq) +
                         " must be a whole number of memory segments of " +
                         std::to_string(c.memory_segment));
  if (!c.memory_slots.empty())
    return Status::error(w +
                         "nexus-ltm: a slot-reduced memory (nexus memory-reduce) is for "
                         "inference; train the full model and reduce it again");
  const bool qwen = c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3;
  if (c.rope != (qwen ? RopeStyle::kNeox : RopeStyle::kNormal))
    return Status::error(w + (qwen ? std::string(c.arch == Arch::kQwen2 ? "qwen2" : "qwen3") +
                                         " uses NeoX (halves) RoPE; got another style"
                                   : "llama uses adjacent-pair (normal) RoPE; got another style"));
  return Status::ok();
}

TrainModel::TrainModel(const ModelConfig& cfg, int64_t batch, int64_t seq, const TrainOptions& opts)
    : cfg_(cfg),
      batch_(batch),
      seq_(seq),
      opts_(opts),
      head_rows_(std::clamp<int64_t>(std::max(kHeadBlockFloats / cfg.n_vocab, kMinHeadRows), 1,
                                     batch * seq)) {
  if (cfg_.arch == Arch::kGpt2) cfg_.rope = RopeStyle::kNone;
  layout_params();
  blocks_begin_ = layer_range_.front().first;
  blocks_end_ = layer_range_.back().second;
  block_floats_ = layer_range_.front().second - blocks_begin_;
  for (const auto& [b, e] : layer_range_) {
    // A hybrid's attention and state-space blocks differ in size; updating in backward shares one
    // block-sized gradient slot, which needs them equal.
    NEXUS_CHECK(e - b == block_floats_ || !opts_.update_in_backward,
                "[train] --optimizer-in-backward needs blocks of one size (" + cfg_.arch_name +
                    "'s differ)");
    block_floats_ = std::max(block_floats_, e - b);
  }
  // Updating in backward, the blocks' gradients share one block's slot: in the gradient array,
  // or, when checkpointing, in the activation arena beside the memory the head's logits use
  // (layout_activations), since the slot is dead while the head runs.
  slot_in_arena_ = opts_.update_in_backward && opts_.recompute_blocks;
  // The tied embedding (offset 0) updated row by row: its gradient goes to the arena too.
  defer_rows_ = slot_in_arena_ && cfg_.tied_output && opts_.row_updates;
  const size_t tied = deferred_floats();
  if (defer_rows_) {
    NEXUS_CHECK(infos_.front().name == "token_embd.weight" && infos_.front().offset == 0,
                "[train] the token embedding is not the first tensor");
    infos_.front().row_pieces = true;
    head_rows_ = std::min(head_rows_, kDeferredHeadRows);
  }
  if (!opts_.recompute_blocks && !opts_.selective_recompute && !opts_.update_in_backward)
    head_rows_ = std::max(head_rows_, std::min(kPlainHeadLogits / cfg.n_vocab, batch * seq));
  grad_floats_ = opts_.update_in_backward ? n_params_ - (blocks_end_ - blocks_begin_) - tied +
                                                (slot_in_arena_ ? 0 : block_floats_)
                                          : n_params_;
  params_ =
      static_cast<float*>(aligned_alloc_counted(n_params_ * sizeof(float), MemCategory::kWeights));
  grads_ = static_cast<float*>(
      aligned_alloc_counted(grad_floats_ * sizeof(float), MemCategory::kOptimizer));
  memset_floats(params_, static_cast<int64_t>(n_params_));
  memset_floats(grads_, static_cast<int64_t>(grad_floats_));
  if (half()) {
    // Rounded weight copies: the largest block, the output matrix and the final norm's weights.
    size_t layer_max = 0;
    for (const auto& [b, e] : layer_range_) layer_max = std::max(layer_max, e - b);
    const size_t head = static_cast<size_t>(cfg_.n_vocab * cfg_.dim);
    wcopy_floats_ = layer_max + head + 2 * static_cast<size_t>(cfg_.dim);
    wcopy_ = static_cast<float*>(
        aligned_alloc_counted(wcopy_floats_ * sizeof(float), MemCategory::kWeights));
    wcopy_layer_ = wcopy_;
    wcopy_head_ = wcopy_ + layer_max;
    wcopy_norm_ = wcopy_head_ + head;
  }
  layout_activations();
  if (opts_.update_in_backward && !slot_in_arena_) slot_ = grads_ + blocks_begin_;
  bind();
  if (cfg_.rope != RopeStyle::kNone) {  // the angles of positions 0 .. seq - 1
    std::vector<int32_t> pos(static_cast<size_t>(seq_));
    for (int64_t p = 0; p < seq_; ++p) pos[p] = static_cast<int32_t>(p);
    nexus::rope_table(pos.data(), seq_, cfg_.rope_dim, cfg_.rope_theta, act_.rope_cs);
  }
  set_threads(1);
}

void TrainModel::layout_params() {
  // The architecture's tensor tables (models/arch.h) give every name and shape; a block's tensors
  // are contiguous, the embeddings before the blocks and the head after them, as in a GGUF file.
  const ModelConfig& c = cfg_;
  const ArchSpec& spec = arch_spec(c.arch);
  const std::vector<ModelSlot> outer = spec.model_slots(c);
  slots_ = spec.layer_slots(c);
  layers_.clear();
  for (int64_t l = 0; l < c.n_layers; ++l) layers_.push_back(&layer_type(c, l));
  layer_range_.assign(static_cast<size_t>(c.n_layers), {0, 0});
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    infos_.push_back({std::move(name), std::move(shape), n_params_, n});
    n_params_ += static_cast<size_t>(n);
  };
  // A pipeline stage holds the embeddings (the first), the head (the last; tied: the token table
  // as its weights) and its blocks, named by their place in the whole model.
  const bool embed = has_embedding(), head = has_head();
  for (const ModelSlot& o : outer)
    if (o.required && !o.after_blocks &&
        (embed || (head && c.tied_output && o.field == &ModelWeights::tok_embd)))
      add(o.name, o.shape);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    layer_range_[l].first = n_params_;
    for (const LayerSlot& ls : slots_)
      if (ls.required && slot_in_layer(ls, c, l))
        add(layer_tensor_name(ls.name, l + opts_.first_layer), ls.shape);
    layer_range_[l].second = n_params_;
  }
  for (const ModelSlot& o : outer)
    if (o.required && o.after_blocks && head) add(o.name, o.shape);
}

void TrainModel::layout_activations() {
  const ModelConfig& c = cfg_;
  const int64_t n = batch_ * seq_, d = c.dim;
  const bool gpt2 = c.arch == Arch::kGpt2;
  // Every block has the same layer type (TrainModel checks the blocks' sizes agree).
  const LayerType& type = *layers_.front();
  const std::vector<SavedSlot> saved = type.saved(c, batch_, seq_);
  const std::vector<ScratchSlot> scratch = type.scratch(c, batch_, seq_);
  // With mixed precision the blocks share one f32 working set, and every block but the last (which
  // is still in the working set when backward() starts) keeps a 16-bit copy of its kInput and
  // kOutput activations. With selective recompute in f32 they share it too, but keep their own
  // kInput ones; the 16-bit copies then leave out the kOutput ones, which restore recomputes.
  // kStat activations are every block's own f32 in either mode.
  const bool packed = half() && !opts_.recompute_blocks;
  const bool selective = opts_.selective_recompute && !opts_.recompute_blocks;
  shared_set_ = packed || selective;
  const int64_t n_sets = opts_.recompute_blocks ? 1 : c.n_layers;
  // Checkpointing recomputes every block in backward, the last one too, so the output head's
  // block of logits can share memory with the block's working set and the gradients of backward's
  // scratch: none of them is live while the head runs.
  const bool head_shares = opts_.recompute_blocks;
  // Two passes over the same slices: the first sums their (64-byte padded) sizes by purpose and
  // sizes the arena, the second carves them out of it.
  for (int pass = 0; pass < 2; ++pass) {
    ActivationBytes sz;
    auto A = [&](int64_t count, size_t* bucket) -> float* {
      if (count == 0) return nullptr;
      *bucket += (static_cast<size_t>(count) * 4 + kAlignment - 1) / kAlignment * kAlignment;
      return pass ? arena_.alloc_n<float>(static_cast<size_t>(count)) : nullptr;
    };
    auto H = [&](int64_t count) -> uint16_t* {
      return reinterpret_cast<uint16_t*>(A((count + 1) / 2, &sz.half));
    };
    act_.sets.clear();
    half_.clear();
    for (int64_t s = 0; s < n_sets; ++s) {
      if (shared_set_ && s > 0) {  // shares the working set but for the slots it keeps itself
        std::vector<float*> set = act_.sets[0];
        for (size_t i = 0; i < saved.size(); ++i)
          if (saved[i].keep == Saved::kStat || (!packed && saved[i].keep == Saved::kInput))
            set[i] = A(saved[i].count, &sz.blocks);
        act_.sets.push_back(std::move(set));
      }
      if (packed && s < n_sets - 1) {  // the last block stays in the working set
        std::vector<uint16_t*> h(saved.size(), nullptr);
        for (size_t i = 0; i < saved.size(); ++i)
          if (saved[i].keep == Saved::kInput || (!selective && saved[i].keep == Saved::kOutput))
            h[i] = H(saved[i].count);
        half_.push_back(std::move(h));
      }
      if (shared_set_ && s > 0) continue;
      std::vector<float*> set(saved.size());
      for (size_t i = 0; i < saved.size(); ++i) set[i] = A(saved[i].count, &sz.blocks);
      act_.sets.push_back(std::move(set));
    }
    size_t* scr = &sz.scratch;
    // Backward's gradients of a block (d lnf, in dln, is written by the head and stays apart).
    auto block_grads = [&] {
      act_.dres = A(n * d, scr);
      act_.scratch.assign(scratch.size(), nullptr);
      for (size_t i = 0; i < scratch.size(); ++i) act_.scratch[i] = A(scratch[i].count, scr);
    };
    const int64_t logits = head_rows_ * c.n_vocab;
    float* const set0 = act_.sets[0].front();  // the working set's first slice
    if (head_shares) {
      // The logits start where the block's working set does (its first slice), which is
      // followed by the block gradients and, updating in backward, the parameters' gradient slot;
      // what the logits need beyond them is padding.
      block_grads();
      if (slot_in_arena_) slot_ = A(static_cast<int64_t>(block_floats_), scr);
      // Deferring the tied embedding's rows, its dense gradient comes first (it is live from the
      // head to the rows' update right after it), then the logits.
      const int64_t tied = defer_rows_ ? (c.n_vocab * d + 15) / 16 * 16 : 0;
      const size_t shared = sz.blocks + sz.scratch;
      const size_t need = static_cast<size_t>(tied + logits) * 4;
      if (need > shared) A(static_cast<int64_t>((need - shared + 3) / 4), &sz.head);
      if (defer_rows_) tied_grad_ = set0;
      act_.logits = set0 ? set0 + tied : nullptr;
    }
    act_.res.clear();
    for (int64_t l = 0; l <= c.n_layers; ++l) act_.res.push_back(A(n * d, &sz.block_inputs));
    act_.lnf = A(n * d, &sz.head);
    act_.rstdf = A(n, &sz.head);
    act_.meanf = gpt2 ? A(n, &sz.head) : nullptr;
    act_.row_loss = A(n, &sz.head);
    if (!head_shares) act_.logits = A(logits, &sz.head);
    act_.rope_cs = c.rope != RopeStyle::kNone ? A(seq_ * c.rope_dim, scr) : nullptr;
    act_.dln = A(n * d, scr);
    // d lnf lives in dln: forward() writes it, backward() reads it before any block uses dln.
    act_.dlnf = act_.dln;
    if (!head_shares) block_grads();
    if (defer_rows_) {
      batch_rows_ = A(n * d, scr);
      row_index_ = reinterpret_cast<int32_t*>(A(n, scr));
    }
    act_.tokens = reinterpret_cast<int32_t*>(A(n, scr));  // int32 and float are both 4 bytes
    act_.targets = reinterpret_cast<int32_t*>(A(n, scr));
    if (pass == 0) {
      act_bytes_ = sz;
      arena_ = Arena(sz.total(), MemCategory::kActivations);
      // Named in the profiler's list of the largest live buffers.
      profile::track_buffer(
          arena_.base(), sz.total(), MemCategory::kActivations,
          opts_.recompute_blocks ? "train activations (checkpointed blocks)" : "train activations");
    }
  }
}

void TrainModel::set_threads(int n) {
  NEXUS_CHECK(n >= 1, "[train] threads must be >= 1, got " + std::to_string(n));
  pool_ = n > 1 ? std::make_unique<ThreadPool>(n) : nullptr;
  // The GEMMs are split over the pool, one single-threaded OpenBLAS call per thread
  // (train_ops.cc says why OpenBLAS's own threads are not used).
  openblas_set_num_threads(1);
  attn_scratch_.assign(static_cast<size_t>(n * attention_backward_scratch(seq_)), 0.0f);
}

TrainModel::~TrainModel() {
  profile::untrack_buffer(arena_.base());
  aligned_free_counted(params_, n_params_ * sizeof(float), MemCategory::kWeights);
  aligned_free_counted(grads_, grad_floats_ * sizeof(float), MemCategory::kOptimizer);
  if (wcopy_) aligned_free_counted(wcopy_, wcopy_floats_ * sizeof(float), MemCategory::kWeights);
}

float* TrainModel::grad_at(size_t offset) const {
  if (!opts_.update_in_backward) return grads_ + offset;
  // Deferring rows, the tied embedding [0, tied) is in the arena and grads_ starts after it.
  const size_t tied = deferred_floats();
  if (offset < tied) return tied_grad_ + offset;
  if (offset < blocks_begin_) return grads_ + (offset - tied);
  if (offset < blocks_end_) return slot_ + (offset - blocks_begin_) % block_floats_;
  return grads_ + (blocks_begin_ - tied) + (slot_in_arena_ ? 0 : block_floats_) +
         (offset - blocks_end_);
}

void TrainModel::bind() {
  const ModelConfig& c = cfg_;
  const std::vector<ModelSlot> outer = arch_spec(c.arch).model_slots(c);
  auto at = [&](const std::string& name, bool grad) -> float* {
    const ParamInfo* info = find(name);
    if (!info) return nullptr;
    return grad ? grad_at(info->offset) : params_ + info->offset;
  };
  // The parameter behind a weights member, found through the architecture's tables (null when
  // the architecture has no such tensor).
  auto outer_at = [&](Tensor ModelWeights::*field, bool grad) -> float* {
    for (const ModelSlot& o : outer)
      if (o.field == field && o.required) return at(o.name, grad);
    return nullptr;
  };
  for (bool grad : {false, true}) {
    Outer& o = grad ? g_ : p_;
    o.tok_embd = outer_at(&ModelWeights::tok_embd, grad);
    o.pos_embd = outer_at(&ModelWeights::pos_embd, grad);
    o.out_norm = outer_at(&ModelWeights::out_norm, grad);
    o.out_norm_b = outer_at(&ModelWeights::out_norm_b, grad);
    o.output = c.tied_output ? o.tok_embd : outer_at(&ModelWeights::output, grad);
    std::vector<std::vector<float*>>& layers = grad ? gw_ : pw_;
    layers.assign(static_cast<size_t>(c.n_layers), std::vector<float*>(slots_.size(), nullptr));
    for (int64_t l = 0; l < c.n_layers; ++l)
      for (size_t i = 0; i < slots_.size(); ++i)
        layers[l][i] = at(layer_tensor_name(slots_[i].name, l + opts_.first_layer), grad);
  }
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
  NEXUS_CHECK(!opts_.update_in_backward || info->offset < blocks_begin_ ||
                  info->offset >= blocks_end_,
              "[train] the gradient of " + name +
                  " is not kept when updating in backward (the blocks share one buffer)");
  return Tensor(DType::kF32, info->shape, grad_at(info->offset));
}

std::span<float> TrainModel::grads() {
  NEXUS_CHECK(!opts_.update_in_backward,
              "[train] the gradients are not kept when updating in backward");
  return {grads_, n_params_};
}

std::span<const float> TrainModel::grads() const {
  return const_cast<TrainModel*>(this)->grads();
}

// Split over the pool (one thread's memset of GPT-2's gradients was a visible part of a step),
// with streaming stores where the CPU has AVX2: a plain memset first reads every line it clears
// (twice the time), and the gradients are not read again until their backward GEMM.
void TrainModel::zero_grad() {
  NEXUS_PROFILE_SCOPE("zero_grad");
  fill_zero(grads_, static_cast<int64_t>(grad_floats_), pool_.get(), /*streaming=*/true);
}


float TrainModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t b, int64_t t, bool for_backward) {
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
  Activations& a = act_;
  cur_b_ = b;
  cur_t_ = t;
  have_forward_ = false;
  wcopy_layer_id_ = -1;
  if (has_embedding()) {  // (a later pipeline stage finds its input in res[0])
    embedding_forward(a.res[0], a.tokens, p_.tok_embd, c.n_vocab, n, c.dim);
    if (p_.pos_embd) positions_forward(a.res[0], p_.pos_embd, n, t, c.dim);
    keep(a.res[0], n * c.dim);
  }
  for (int64_t l = 0; l < c.n_layers; ++l)
    block_forward(l, opts_.recompute_blocks ? 0 : l, true);
  if (!has_head()) {  // a pipeline stage before the last: its output is res[n_layers]
    have_forward_ = for_backward;
    return 0.0f;
  }
  final_norm_forward(n);
  have_forward_ = for_backward;
  return head_forward(n, for_backward);
}

float TrainModel::head_forward(int64_t n, bool for_backward) {
  const int64_t d = cfg_.dim, nv = cfg_.n_vocab;
  Activations& a = act_;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += a.targets[i] >= 0 ? 1 : 0;
  const float scale = count ? 1.0f / static_cast<float>(count) : 0.0f;
  if (for_backward) fill_zero(a.dlnf, n * d, pool_.get());
  // The deferred embedding's gradient shares the arena with the blocks: clear it here.
  NEXUS_CHECK(!for_backward || !defer_rows_ || grad_ready_,
              "[train forward] updating in backward needs a grad-ready callback");
  if (for_backward && defer_rows_) fill_zero(tied_grad_, nv * d, pool_.get(), /*streaming=*/true);
  const float* w = p_.output;
  if (half()) {
    round_copy(opts_.precision, p_.output, wcopy_head_, nv * d, pool_.get());
    w = wcopy_head_;
  }
  // Per block of rows: logits, loss and d logits in place, then d lnf and d output (added to the
  // output weight's gradient directly).
  for (int64_t r0 = 0; r0 < n; r0 += head_rows_) {
    const int64_t rows = std::min(head_rows_, n - r0);
    matmul_forward(a.logits, a.lnf + r0 * d, w, rows, d, nv, pool_.get(), bf16_ops());
    // Mixed precision: the logits rounded (keep) and their gradients (round_grad) row by row
    // inside the cross-entropy, each row in cache, where two passes over all of them ran before
    // and after it (L15M bf16: 2 x 262 MB read and written a step).
    if (for_backward && teacher_ != nullptr)
      distill_loss_fused(a.logits, teacher_ + r0 * nv, a.row_loss + r0, a.targets + r0, rows, nv,
                         scale * loss_scale_, temperature_, alpha_, pool_.get());
    else
      cross_entropy_fused(a.logits, a.row_loss + r0, a.targets + r0, rows, nv,
                          scale * loss_scale_, pool_.get(),
                          half() ? opts_.precision : Precision::kF32);
    if (!for_backward) continue;
    matmul_backward(a.dlnf + r0 * d, g_.output, a.logits, a.lnf + r0 * d, w, rows, d, nv,
                    pool_.get(), bf16_ops());
  }
  if (for_backward) round_grad(a.dlnf, n * d);
  if (for_backward && defer_rows_) update_rows_outside_batch(n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += a.row_loss[i];
  return count ? static_cast<float>(total / static_cast<double>(count)) : 0.0f;
}

std::vector<float> TrainModel::logits() const {
  NEXUS_CHECK(cur_b_ > 0, "[train logits] no forward() has run");
  const int64_t n = cur_b_ * cur_t_;
  std::vector<float> out(static_cast<size_t>(n * cfg_.n_vocab));
  matmul_forward(out.data(), act_.lnf, p_.output, n, cfg_.dim, cfg_.n_vocab, pool_.get());
  return out;
}

void TrainModel::final_norm_forward(int64_t n) {
  const float *w = p_.out_norm, *b = p_.out_norm_b;
  if (half()) {  // rounded copies of the norm's weight (and bias)
    round_copy(opts_.precision, w, wcopy_norm_, cfg_.dim);
    if (b) round_copy(opts_.precision, b, wcopy_norm_ + cfg_.dim, cfg_.dim);
    w = wcopy_norm_;
    b = b ? wcopy_norm_ + cfg_.dim : nullptr;
  }
  norm_forward(cfg_, act_.lnf, act_.meanf, act_.rstdf, act_.res[cfg_.n_layers], w, b, n,
               pool_.get());
  keep(act_.lnf, n * cfg_.dim);
}

void TrainModel::final_norm_backward(int64_t n) {
  // The head of this pass left the rounded norm weights in wcopy_norm_.
  const float* w = half() ? wcopy_norm_ : p_.out_norm;
  norm_backward(cfg_, act_.dres, g_.out_norm, g_.out_norm_b, act_.dlnf, act_.res[cfg_.n_layers],
                w, act_.meanf, act_.rstdf, n, pool_.get());
  round_grad(act_.dres, n * cfg_.dim);
}

LayerPass TrainModel::layer_pass(int64_t l, int64_t set, const float* const* w) const {
  LayerPass p{};
  p.cfg = &cfg_;
  p.slots = &slots_;
  p.layer = l;
  p.b = cur_b_;
  p.t = cur_t_;
  p.pool = pool_.get();
  p.precision = opts_.precision;
  p.bf16_ops = bf16_ops();
  p.w = w;
  p.g = gw_[l].data();
  p.a = act_.sets[set].data();
  p.scratch = act_.scratch.data();
  p.rope_cs = act_.rope_cs;
  p.attn_scratch = const_cast<float*>(attn_scratch_.data());
  p.x = act_.res[l];
  p.dres = act_.dres;
  p.dln = act_.dln;
  p.tp = opts_.tp;
  return p;
}

void TrainModel::block_forward(int64_t l, int64_t set, bool write_output) {
  NEXUS_PROFILE_LAYER(l);
  LayerPass p = layer_pass(l, set, layer_weights(l));
  // Where the block's activations are kept in 16 bits (mixed precision, not recomputing).
  if (write_output && l < static_cast<int64_t>(half_.size())) p.h = half_[l].data();
  if (write_output) p.y = act_.res[l + 1];
  layers_[l]->forward(p);
}

void TrainModel::block_backward(int64_t l, int64_t set, bool restore) {
  NEXUS_PROFILE_LAYER(l);
  const LayerPass p = layer_pass(l, set, layer_weights(l));
  if (restore) restore_block(l, p);
  layers_[l]->backward(p);
}

void TrainModel::backward() {
  NEXUS_CHECK(have_forward_, "[train backward] no forward() to differentiate (or already used)");
  have_forward_ = false;
  const ModelConfig& c = cfg_;
  const int64_t t = cur_t_, n = cur_b_ * t, d = c.dim;
  Activations& a = act_;
  const bool in_backward = opts_.update_in_backward;
  NEXUS_CHECK(!in_backward || grad_ready_,
              "[train backward] updating in backward needs a grad-ready callback");
  // The head's backward ran in forward() (its weight gradient is in grads()): go on from d lnf.
  // (A pipeline stage before the last was handed d / d its output in dres.)
  if (has_head()) {
    fill_zero(a.dres, n * d, pool_.get());
    final_norm_backward(n);
  }
  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    // One gradient slot for every block: clear what the previous block left (or, in the arena,
    // what the head's logits left).
    if (in_backward && (l != c.n_layers - 1 || slot_in_arena_))
      fill_zero(slot_, static_cast<int64_t>(block_floats_), pool_.get());
    if (!opts_.recompute_blocks) {
      // A shared working set (mixed precision, selective recompute) still holds the last block
      // from forward(); the others are restored into it.
      block_backward(l, l, shared_set_ && l != c.n_layers - 1);
    } else {
      // Checkpointing: every block is recomputed from its saved input, with the same ops in the
      // same order (the last one too: the head's logits overwrote the working set).
      block_forward(l, 0, false);
      block_backward(l, 0);
    }
    if (in_backward)
      grad_ready_(layer_range_[l].first, layer_range_[l].second, slot_);
    else if (grads_done_)
      grads_done_(layer_range_[l].first, layer_range_[l].second);
  }
  if (!has_embedding()) {
    // A later pipeline stage: dres holds d / d its input for the stage before.
  } else if (defer_rows_) {
    embedding_backward(batch_rows_, a.dres, row_index_, n, d);
    update_batch_rows();
  } else {
    embedding_backward(g_.tok_embd, a.dres, a.tokens, n, d);
  }
  if (g_.pos_embd && has_embedding()) positions_backward(g_.pos_embd, a.dres, n, t, d);
  if (!in_backward) {
    if (grads_done_) {
      if (blocks_begin_ > 0) grads_done_(0, blocks_begin_);
      if (blocks_end_ < n_params_) grads_done_(blocks_end_, n_params_);
    }
    return;
  }
  const size_t tied = deferred_floats();
  if (tied < blocks_begin_) grad_ready_(tied, blocks_begin_, grad_at(tied));
  if (blocks_end_ < n_params_)
    grad_ready_(blocks_end_, n_params_, grad_at(blocks_end_));
}

// The head has summed the tied embedding's gradient over every row: rows no token of the batch
// reads are final and go to the optimizer now (the runs between the batch's tokens); the batch's
// rows are copied aside, in token order, to receive the embedding's scatter at the end of
// backward (update_batch_rows). Each row gets the same sums in the same order as in the dense
// gradient, so the update is the same.
void TrainModel::update_rows_outside_batch(int64_t n) {
  const int64_t d = cfg_.dim, nv = cfg_.n_vocab;
  const int32_t* tokens = act_.tokens;
  batch_tokens_.assign(tokens, tokens + n);
  std::sort(batch_tokens_.begin(), batch_tokens_.end());
  batch_tokens_.erase(std::unique(batch_tokens_.begin(), batch_tokens_.end()),
                      batch_tokens_.end());
  for (size_t j = 0; j < batch_tokens_.size(); ++j)
    std::memcpy(batch_rows_ + static_cast<int64_t>(j) * d, tied_grad_ + batch_tokens_[j] * d,
                static_cast<size_t>(d) * sizeof(float));
  for (int64_t i = 0; i < n; ++i)
    row_index_[i] = static_cast<int32_t>(
        std::lower_bound(batch_tokens_.begin(), batch_tokens_.end(), tokens[i]) -
        batch_tokens_.begin());
  int64_t from = 0;
  auto ready = [&](int64_t to) {
    if (to > from)
      grad_ready_(static_cast<size_t>(from * d), static_cast<size_t>(to * d),
                  tied_grad_ + from * d);
  };
  for (const int32_t tok : batch_tokens_) {
    ready(tok);
    from = tok + 1;
  }
  ready(nv);
}

// The batch's rows of the tied embedding, complete now: to the optimizer in runs of consecutive
// tokens.
void TrainModel::update_batch_rows() {
  const int64_t d = cfg_.dim;
  const size_t k = batch_tokens_.size();
  for (size_t j0 = 0; j0 < k;) {
    size_t j1 = j0 + 1;
    while (j1 < k && batch_tokens_[j1] == batch_tokens_[j1 - 1] + 1) ++j1;
    grad_ready_(static_cast<size_t>(batch_tokens_[j0] * d),
                static_cast<size_t>((batch_tokens_[j1 - 1] + 1) * d),
                batch_rows_ + static_cast<int64_t>(j0) * d);
    j0 = j1;
  }
}

}  // namespace nexus::train
