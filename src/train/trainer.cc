// Trainer: gradient accumulation, clipping, the optimizer step, and the validation pass.
#include "nexus/train/trainer.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "nexus/core/thread_pool.h"
#include "nexus/profile.h"

namespace nexus::train {

Status check_update_in_backward(const TrainerOptions& options, const Optimizer& optimizer) {
  std::string why;
  if (options.accum != 1) why += ", gradient accumulation";
  if (options.clip > 0) why += ", gradient clipping (a clip of 0 turns it off)";
  if (options.loss_scale) why += ", loss scaling";
  if (!optimizer.supports_range_step())
    why += std::string(", the ") + optimizer.name() + " optimizer";
  if (why.empty()) return Status::ok();
  return Status::error("the optimizer step in backward rules out" + why.substr(1) +
                       " (each needs every gradient before the first update)");
}

Status validate(const TrainerOptions& o) {
  const auto number = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  if (o.accum < 1 || o.steps < 1)
    return Status::error("[trainer] accum and steps must be >= 1, got " + std::to_string(o.accum) +
                         " and " + std::to_string(o.steps));
  const LrSchedule& l = o.schedule;
  if (!std::isfinite(l.lr) || l.lr < 0)
    return Status::error("[trainer] the learning rate must be finite and >= 0, got " +
                         number(l.lr));
  if (!std::isfinite(l.min_lr) || l.min_lr < 0)
    return Status::error("[trainer] the final learning rate must be finite and >= 0, got " +
                         number(l.min_lr));
  if (l.warmup < 0)
    return Status::error("[trainer] warmup steps must be >= 0, got " + std::to_string(l.warmup));
  if (o.distill && (!o.distill->teacher || !(o.distill->temperature > 0) ||
                    !(o.distill->alpha >= 0 && o.distill->alpha <= 1)))
    return Status::error("[trainer] distillation needs a teacher, a temperature > 0 and alpha in "
                         "[0, 1], got temperature " + number(o.distill->temperature) +
                         " and alpha " + number(o.distill->alpha));
  if (!std::isfinite(o.clip) || o.clip < 0)
    return Status::error(
        "[trainer] the gradient-norm limit must be finite and >= 0 (0: off), got " +
        number(o.clip));
  return Status::ok();
}

Trainer::Trainer(TrainModel& model, Optimizer& optimizer, DataLoader& loader,
                 const TrainerOptions& options)
    : model_(model), opt_(optimizer), loader_(loader), opts_(options) {
  if (Status st = validate(options); !st) NEXUS_CHECK(false, st.message());
  NEXUS_CHECK(loader.batch() <= model.max_batch() && loader.seq_len() <= model.max_seq(),
              "[trainer] the loader's batch " + std::to_string(loader.batch()) + " x " +
                  std::to_string(loader.seq_len()) + " does not fit the model's arena " +
                  std::to_string(model.max_batch()) + " x " + std::to_string(model.max_seq()));
  if (options.loss_scale) {
    const LossScaleOptions& ls = *options.loss_scale;
    NEXUS_CHECK(std::isfinite(ls.init) && ls.init > 0 && ls.growth >= 1 && ls.backoff > 0 &&
                    ls.backoff <= 1 && ls.growth_interval >= 1,
                "[trainer] loss scale: need init > 0, growth >= 1, 0 < backoff <= 1 and "
                "growth interval >= 1");
    scaler_.emplace(ls);
  }
  if (options.keep_zeros) {
    const std::span<float> p = model_.params();
    zero_bits_.assign((p.size() + 63) / 64, 0);
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] == 0.0f) zero_bits_[i / 64] |= uint64_t{1} << (i % 64);
  }
  if (streaming()) {
    NEXUS_CHECK(model.options().update_in_backward,
                "[trainer] streamed gradients (ZeRO 2) need a model built with update_in_backward");
    model_.set_grad_ready([this](size_t begin, size_t end, const float* g) {
      NEXUS_PROFILE_SCOPE("gradient exchange");
      opts_.exchange->take(begin, end, g);
    });
    return;
  }
  if (options.exchange)
    NEXUS_CHECK(!model.options().update_in_backward,
                "[trainer] data parallel exchanges the gradients after backward: it rules out the "
                "optimizer step in backward");
  if (!model.options().update_in_backward) return;
  if (Status st = check_update_in_backward(options, optimizer); !st)
    throw Error("[trainer] " + st.message());
  NEXUS_CHECK(!model.options().row_updates || optimizer.supports_row_updates(),
              std::string("[trainer] the model was built for row updates (TrainOptions::"
                          "row_updates), which the ") +
                  optimizer.name() + " optimizer cannot do");
  model_.set_grad_ready([this](size_t begin, size_t end, const float* g) {
    NEXUS_PROFILE_SCOPE("optimizer");
    sumsq_in_backward_ += grad_sumsq({g, end - begin}, opt_.pool());
    opt_.step_range(model_.params(), g, begin, end, lr_in_backward_);
    rezero(begin, end);
  });
}

Trainer::~Trainer() {
  if (model_.options().update_in_backward) model_.set_grad_ready(nullptr);
}

bool Trainer::streaming() const {
  return opts_.exchange != nullptr && opts_.exchange->streams_gradients();
}

float Trainer::accumulate() {
  model_.zero_grad();
  if (streaming()) opts_.exchange->begin_step();
  const float loss_scale = scaler_ ? scaler_->scale() : 1.0f;
  model_.set_loss_scale(loss_scale);
  double loss = 0;
  wait_ = 0;
  const bool pipelined = opts_.exchange != nullptr && opts_.exchange->runs_micro_batches();
  if (pipelined) {
    std::vector<GradientExchange::MicroBatch> batches(static_cast<size_t>(opts_.accum));
    for (GradientExchange::MicroBatch& mb : batches) {
      NEXUS_PROFILE_SCOPE("data");
      const Batch& b = loader_.next();
      wait_ += loader_.last_wait_seconds();
      mb.rows = b.rows;
      mb.seq_len = b.seq_len;
      mb.inputs.assign(b.inputs.begin(), b.inputs.end());
      mb.targets.assign(b.targets.begin(), b.targets.end());
      tokens_ += static_cast<int64_t>(b.rows) * b.seq_len;
    }
    loss = opts_.exchange->run_micro_batches(model_, batches);
  }
  for (int64_t i = 0; i < (pipelined ? 0 : opts_.accum); ++i) {
    // Streamed gradients are handed over per micro-batch: the model's buffers (the tensors outside
    // the blocks keep theirs through backward) start each one from zero.
    if (streaming() && i > 0) model_.zero_grad();
    const Batch* b;
    {
      NEXUS_PROFILE_SCOPE("data");
      b = &loader_.next();
      wait_ += loader_.last_wait_seconds();
    }
    if (opts_.distill) {
      NEXUS_PROFILE_SCOPE("teacher");
      model_.set_teacher(opts_.distill->teacher(*b), opts_.distill->temperature,
                         opts_.distill->alpha);
    }
    {
      NEXUS_PROFILE_SCOPE("forward");
      loss += model_.forward(b->inputs, b->targets, b->rows, b->seq_len);
    }
    // Data parallel: the last micro-batch's gradients go to the other ranks as backward
    // completes them.
    GradientExchange* ex = streaming() ? nullptr : opts_.exchange;
    const bool last = i + 1 == opts_.accum;
    if (ex && last)
      model_.set_grads_done(
          [this, ex](size_t b0, size_t b1) { ex->ready(model_.grads(), b0, b1); });
    {
      NEXUS_PROFILE_SCOPE("backward");
      model_.backward();
    }
    if (ex && last) {
      model_.set_grads_done(nullptr);
      NEXUS_PROFILE_SCOPE("gradient exchange");
      ex->finish(model_.grads());
    }
    if (opts_.distill) model_.set_teacher(nullptr, 1.0f, 1.0f);
    tokens_ +=
        static_cast<int64_t>(b->rows) * b->seq_len * (opts_.exchange ? opts_.exchange->world() : 1);
  }
  if (streaming()) {
    opts_.exchange->finish_streamed(1.0f / (static_cast<float>(opts_.accum) * loss_scale));
  } else if (opts_.accum > 1 || loss_scale != 1.0f) {
    // Exact for power-of-two accum and loss scale (a scale by 2^-k); otherwise one rounding per
    // gradient.
    const float scale = 1.0f / (static_cast<float>(opts_.accum) * loss_scale);
    // Elementwise, so the split over the optimizer's threads changes nothing.
    float* g = model_.grads().data();
    const auto scale_range = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) g[i] *= scale;
    };
    const auto n = static_cast<int64_t>(model_.grads().size());
    if (ThreadPool* pool = opt_.pool())
      pool->parallel_for(n, scale_range, 1 << 16);
    else
      scale_range(0, n);
  }
  const double mean = loss / static_cast<double>(opts_.accum);
  return static_cast<float>(opts_.exchange ? opts_.exchange->mean(mean) : mean);
}

StepStats Trainer::step() {
  NEXUS_PROFILE_SCOPE("step");
  const auto t0 = std::chrono::steady_clock::now();
  StepStats s;
  if (model_.options().update_in_backward && !streaming()) {
    // The updates happen inside backward(), block by block (the constructor's callback).
    s.lr = lr_in_backward_ = opts_.schedule.at(step_);
    sumsq_in_backward_ = 0;
    s.loss = accumulate();
    opt_.finish_step();
    s.grad_norm = static_cast<float>(std::sqrt(sumsq_in_backward_));
  } else {
    s.loss = accumulate();
    update(s);
  }
  s.step = ++step_;
  s.tokens = tokens_;
  s.data_wait_s = wait_;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

void Trainer::update(StepStats& s) {
  NEXUS_PROFILE_SCOPE("optimizer");
  // With clipping off the norm is still reported: an infinite limit never scales. The clip
  // factor goes to the optimizer, which multiplies as it reads (AdamW) or scales the gradients
  // first (the others): the same bits as clip_grad_norm followed by step().
  const float limit = opts_.clip > 0 ? opts_.clip : std::numeric_limits<float>::infinity();
  // Streamed gradients live in the exchange only.
  const std::span<float> grads = streaming() ? std::span<float>() : model_.grads();
  s.grad_norm = opts_.exchange
                    ? static_cast<float>(std::sqrt(opts_.exchange->grad_sumsq(grads, opt_.pool())))
                    : grad_norm(grads, opt_.pool());
  s.lr = opts_.schedule.at(step_);
  if (scaler_) {
    s.loss_scale = scaler_->scale();
    s.skipped = !scaler_->update(std::isfinite(s.grad_norm));
  }
  if (!s.skipped) {
    const float factor = clip_factor(s.grad_norm, limit);
    if (opts_.exchange)
      opts_.exchange->update(opt_, model_.params(), grads, s.lr, factor);
    else
      opt_.step_scaled(model_.params(), grads, s.lr, factor);
    rezero(0, model_.params().size());
  }
}

void Trainer::rezero(size_t begin, size_t end) {
  if (zero_bits_.empty()) return;
  float* p = model_.params().data();
  // A word of the mask at a time, visiting only its set bits (a dense tensor's words are 0).
  for (size_t w = begin / 64; w * 64 < end; ++w) {
    uint64_t bits = zero_bits_[w];
    if (w * 64 < begin) bits &= ~uint64_t{0} << (begin - w * 64);
    if (end - w * 64 < 64) bits &= (uint64_t{1} << (end - w * 64)) - 1;
    for (; bits != 0; bits &= bits - 1)
      p[w * 64 + static_cast<size_t>(__builtin_ctzll(bits))] = 0.0f;
  }
}

float Trainer::evaluate(SequentialBatches& val, int64_t max_batches) {
  NEXUS_PROFILE_SCOPE("eval");
  val.reset();
  double sum = 0, count = 0;
  const Batch* b;
  for (int64_t i = 0; (max_batches <= 0 || i < max_batches) && val.next(&b); ++i) {
    const double n = static_cast<double>(b->rows) * b->seq_len;
    sum += n * model_.forward(b->inputs, b->targets, b->rows, b->seq_len, /*for_backward=*/false);
    count += n;
  }
  return count > 0 ? static_cast<float>(sum / count) : 0.0f;
}

}  // namespace nexus::train
