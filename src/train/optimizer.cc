// AdamW, gradient clipping, LR schedules and the optimizer factory (see optimizer.h). The element
// loops are the optim ops (ops/optim.h, backends/cpu/optim.cc: scalar and AVX2).
#include "nexus/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "backends/cpu/optim.h"
#include "nexus/core/allocator.h"
#include "ops/optim.h"

namespace nexus::train {

void Optimizer::set_threads(int n) {
  NEXUS_CHECK(n >= 1, "[optimizer] threads must be >= 1, got " + std::to_string(n));
  pool_ = n > 1 ? std::make_unique<ThreadPool>(n) : nullptr;
}

size_t Optimizer::state_bytes() {
  size_t bytes = 0;
  for (const StateBuffer& b : state()) bytes += b.bytes();
  return bytes;
}

std::vector<ParamRange> param_ranges(std::span<const ParamInfo> tensors, size_t* n_out) {
  std::vector<ParamRange> out;
  size_t n = 0;
  for (const ParamInfo& info : tensors) {
    out.push_back({info.offset, info.offset + static_cast<size_t>(info.numel),
                   info.shape.size() >= 2,
                   info.row_pieces ? static_cast<size_t>(info.shape.back()) : 0});
    n = std::max(n, out.back().end);
  }
  if (n_out) *n_out = n;
  return out;
}

std::pair<size_t, size_t> chunks_covering(const std::vector<ParamRange>& chunks, size_t begin,
                                          size_t end) {
  const auto first = std::lower_bound(chunks.begin(), chunks.end(), begin,
                                      [](const ParamRange& r, size_t b) { return r.begin < b; });
  const auto last = std::lower_bound(first, chunks.end(), end,
                                     [](const ParamRange& r, size_t e) { return r.begin < e; });
  const bool ok = begin < end && first != chunks.end() && first->begin == begin &&
                  last != first && std::prev(last)->end == end;
  NEXUS_CHECK(ok, "[optimizer] range [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") does not start and end on tensor boundaries");
  return {static_cast<size_t>(first - chunks.begin()), static_cast<size_t>(last - chunks.begin())};
}

void Optimizer::step_range(std::span<float>, const float*, size_t, size_t, float) {
  throw Error(std::string("[optimizer] ") + name() +
              " cannot update part of the parameters at a time (optimizer in backward)");
}

std::vector<ParamRange> chunked(const std::vector<ParamRange>& ranges) {
  std::vector<ParamRange> out;
  for (const ParamRange& r : ranges) {
    const size_t piece = r.piece ? r.piece : cpu::optim::kChunk;
    for (size_t b = r.begin; b < r.end; b += piece)
      out.push_back({b, std::min(r.end, b + piece), r.decay});
  }
  return out;
}

namespace {

// fn(i) for i in [0, n), on the pool when there is one.
template <typename Fn>
void for_each_chunk(ThreadPool* pool, size_t n, const Fn& fn) {
  if (pool == nullptr) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(static_cast<size_t>(i));
  });
}

}  // namespace

AdamW::AdamW(const TrainModel& model, const AdamWOptions& opts) : AdamW(model.tensors(), opts) {}

AdamW::AdamW(std::span<const ParamInfo> tensors, const AdamWOptions& opts) : opts_(opts) {
  chunks_ = chunked(param_ranges(tensors, &n_));
  // The bf16 kernels index elements in 32 bits for their random bits.
  NEXUS_CHECK(!opts_.bf16_state || n_ <= UINT32_MAX,
              "[adamw] bf16 state supports up to 2^32 parameters");
  state_ = aligned_alloc_counted(state_bytes_alloc(), MemCategory::kOptimizer);
  std::memset(state_, 0, state_bytes_alloc());
}

AdamW::~AdamW() { aligned_free_counted(state_, state_bytes_alloc(), MemCategory::kOptimizer); }

size_t AdamW::state_bytes_alloc() const {
  return 2 * n_ * (opts_.bf16_state ? sizeof(uint16_t) : sizeof(float));
}

void AdamW::step(std::span<float> params, std::span<const float> grads, float lr) {
  update(params, grads, lr, 1.0f);
}

void AdamW::step_scaled(std::span<float> params, std::span<float> grads, float lr,
                        float grad_scale) {
  update(params, grads, lr, grad_scale);
}

void AdamW::update(std::span<float> params, std::span<const float> grads, float lr,
                   float grad_scale) {
  NEXUS_CHECK(params.size() == n_ && grads.size() == n_,
              "[adamw] expected " + std::to_string(n_) + " parameters and gradients, got " +
                  std::to_string(params.size()) + " and " + std::to_string(grads.size()));
  ++t_;
  apply(params.data(), grads.data(), 0, 0, chunks_.size(), lr, grad_scale, t_);
}

void AdamW::step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                       float lr) {
  NEXUS_CHECK(params.size() == n_, "[adamw] expected " + std::to_string(n_) +
                                       " parameters, got " + std::to_string(params.size()));
  const auto [c0, c1] = chunks_covering(chunks_, begin, end);
  apply(params.data(), grads, begin, c0, c1, lr, 1.0f, t_ + 1);
}

void AdamW::apply(float* p, const float* g, size_t g_origin, size_t c0, size_t c1, float lr,
                  float grad_scale, int64_t step) {
  // Bias corrections in double: 1 - beta^t loses digits in f32 once beta^t is close to 1.
  const double t = static_cast<double>(step);
  AdamWCoef k{};
  k.b1 = opts_.beta1;
  k.b2 = opts_.beta2;
  k.step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(opts_.beta1), t)));
  k.inv_bc2_sqrt =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(opts_.beta2), t)));
  k.eps = opts_.eps;
  k.gscale = grad_scale;
  const float keep_decay = 1.0f - lr * opts_.weight_decay;
  float* m = static_cast<float*>(state_);  // one of these two views is used
  uint16_t* m16 = static_cast<uint16_t*>(state_);
  const uint32_t seed = mix32(static_cast<uint32_t>(step));  // bf16 rounding bits
  for_each_chunk(pool_.get(), c1 - c0, [&](size_t i) {
    const ParamRange& r = chunks_[c0 + i];
    AdamWArgs a{p + r.begin, g + (r.begin - g_origin)};
    a.n = static_cast<int64_t>(r.end - r.begin);
    a.k = k;
    a.k.keep = r.decay ? keep_decay : 1.0f;
    if (opts_.bf16_state) {
      a.m16 = m16 + r.begin, a.v16 = m16 + n_ + r.begin;
      a.index0 = static_cast<uint32_t>(r.begin), a.seed = seed;
    } else {
      a.m = m + r.begin, a.v = m + n_ + r.begin;
    }
    adamw_update(a);
  });
}

std::vector<StateBuffer> AdamW::state() {
  if (opts_.bf16_state) {
    uint16_t* m = static_cast<uint16_t*>(state_);
    return {{"adamw.m", {}, {m, n_}}, {"adamw.v", {}, {m + n_, n_}}};
  }
  float* m = static_cast<float*>(state_);
  return {{"adamw.m", {m, n_}, {}}, {"adamw.v", {m + n_, n_}, {}}};
}

double grad_sumsq(std::span<const float> grads, ThreadPool* pool) {
  return sum_squares(grads.data(), static_cast<int64_t>(grads.size()), pool);
}

float grad_norm(std::span<const float> grads, ThreadPool* pool) {
  return static_cast<float>(std::sqrt(grad_sumsq(grads, pool)));
}

float clip_factor(float norm, float max_norm) {
  const float coef = max_norm / (norm + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

void scale_grads(std::span<float> grads, float c, ThreadPool* pool) {
  scale_values(grads.data(), static_cast<int64_t>(grads.size()), c, pool);
}

float clip_grad_norm(std::span<float> grads, float max_norm, ThreadPool* pool) {
  const float norm = grad_norm(grads, pool);
  const float coef = clip_factor(norm, max_norm);
  if (coef < 1.0f) scale_grads(grads, coef, pool);
  return norm;
}

void Optimizer::step_scaled(std::span<float> params, std::span<float> grads, float lr,
                            float grad_scale) {
  if (grad_scale != 1.0f) scale_grads(grads, grad_scale, pool_.get());
  step(params, grads, lr);
}

float LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup)
    return lr * static_cast<float>(step + 1) / static_cast<float>(warmup);
  if (decay == LrDecay::kConstant || total_steps <= warmup) return lr;
  const double frac =
      std::clamp(static_cast<double>(step - warmup) /
                     static_cast<double>(std::max<int64_t>(1, total_steps - warmup)),
                 0.0, 1.0);
  const double k =
      decay == LrDecay::kLinear ? 1.0 - frac : 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
  return min_lr + static_cast<float>(k) * (lr - min_lr);
}

namespace {

// An error naming the setting when `ok` is false (NaN fails every check).
Status check(bool ok, const std::string& opt, const std::string& what, float value) {
  if (ok) return Status::ok();
  return Status::error("[train] " + opt + " " + what + ", got " + std::to_string(value));
}

Status validate(const OptimizerOptions& o) {
  const AdamWOptions& a = o.adamw;
  if (o.name == "adamw") {
    for (Status c :
         {check(a.beta1 >= 0.0f && a.beta1 < 1.0f, "adamw", "beta1 must be in [0, 1)", a.beta1),
          check(a.beta2 >= 0.0f && a.beta2 < 1.0f, "adamw", "beta2 must be in [0, 1)", a.beta2),
          check(a.eps >= 0.0f, "adamw", "eps must be >= 0", a.eps),
          check(a.weight_decay >= 0.0f, "adamw", "weight decay must be >= 0", a.weight_decay)})
      if (!c.is_ok()) return c;
  } else if (o.name == "sgd") {
    for (Status c : {check(o.momentum >= 0.0f, "sgd", "momentum must be >= 0", o.momentum),
                     check(!o.nesterov || o.momentum > 0.0f, "sgd", "nesterov needs a momentum > 0",
                           o.momentum),
                     check(o.sgd_weight_decay >= 0.0f, "sgd", "weight decay must be >= 0",
                           o.sgd_weight_decay)})
      if (!c.is_ok()) return c;
  } else if (o.name == "adafactor") {
    for (Status c :
         {check(o.adafactor_decay < 0.0f, "adafactor", "decay must be < 0", o.adafactor_decay),
          check(o.adafactor_eps1 >= 0.0f, "adafactor", "eps1 must be >= 0", o.adafactor_eps1),
          check(o.adafactor_clip > 0.0f, "adafactor", "clip threshold must be > 0",
                o.adafactor_clip),
          check(o.adafactor_weight_decay >= 0.0f, "adafactor", "weight decay must be >= 0",
                o.adafactor_weight_decay)})
      if (!c.is_ok()) return c;
  }
  return Status::ok();
}

}  // namespace

Status set_optimizer_state(const std::string& value, OptimizerOptions* opts) {
  if (value != "f32" && value != "bf16")
    return Status::error("--optimizer-state must be f32 or bf16, got '" + value + "'");
  if (value == "bf16" && opts->name != "adamw")
    return Status::error("--optimizer-state bf16 is for adamw (not " + opts->name + ")");
  opts->adamw.bf16_state = value == "bf16";
  return Status::ok();
}

Result<std::unique_ptr<Optimizer>> make_optimizer(std::span<const ParamInfo> tensors,
                                                  const OptimizerOptions& opts) {
  if (Status s = validate(opts); !s.is_ok()) return s;
  if (opts.name == "adamw") return std::unique_ptr<Optimizer>(new AdamW(tensors, opts.adamw));
  if (opts.name == "sgd")
    return std::unique_ptr<Optimizer>(
        new Sgd(tensors, {opts.momentum, opts.nesterov, opts.sgd_weight_decay}));
  if (opts.name == "adafactor")
    return std::unique_ptr<Optimizer>(
        new Adafactor(tensors, {opts.adafactor_decay, opts.adafactor_eps1, opts.adafactor_clip,
                                opts.adafactor_weight_decay}));
  return Status::error("[train] unknown optimizer '" + opts.name +
                       "' (known: adamw, sgd, adafactor)");
}

}  // namespace nexus::train
