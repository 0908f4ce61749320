// The optimizer seam (AdamW, SGD with momentum, Adafactor behind one interface), global-norm
// gradient clipping, and learning-rate schedules (warmup then cosine, linear or constant).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nexus/core/thread_pool.h"
#include "nexus/train/train_model.h"

namespace nexus::train {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied to tensors of rank >= 2 only (not norms)
  // Keep m and v in bf16 with stochastic rounding (backends/cpu/optim.h): half the state memory
  // (4 instead of 8 bytes per parameter); the update itself is computed in f32 as usual.
  bool bf16_state = false;
};

struct SgdOptions {
  float momentum = 0.9f;      // 0 turns the buffer into a copy of the gradient (plain SGD)
  bool nesterov = false;      // step along g + momentum * buf instead of buf
  float weight_decay = 0.0f;  // coupled (added to the gradient, as torch.optim.SGD); rank >= 2
};

struct AdafactorOptions {
  float decay = -0.8f;        // beta2_t = 1 - t^decay
  float eps1 = 1e-30f;        // added to the squared gradient
  float clip = 1.0f;          // update RMS clipping threshold d: u / max(1, rms(u) / d)
  float weight_decay = 0.0f;  // decoupled (p -= lr wd p); rank >= 2 only
};

// The optimizer seam: every optimizer updates the flat parameter array from the flat gradient
// array and exposes its state as named f32 buffers, which is all a checkpoint needs to resume it
// bit-exactly (restore by copying the saved buffers back into state() and calling set_steps()).
struct StateBuffer {
  std::string name;  // stable across runs, e.g. "adamw.m"
  std::span<float> data;
  std::span<uint16_t> bf16;  // instead of data, for a buffer kept in bf16
  size_t bytes() const { return data.size_bytes() + bf16.size_bytes(); }
  size_t count() const { return data.size() + bf16.size(); }
  DType dtype() const { return data.empty() && !bf16.empty() ? DType::kBF16 : DType::kF32; }
  // The buffer's bytes, whichever type holds them.
  void* raw() const { return data.empty() ? static_cast<void*>(bf16.data()) : data.data(); }
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update at learning rate `lr`; increments steps().
  virtual void step(std::span<float> params, std::span<const float> grads, float lr) = 0;
  // The same update with the gradients multiplied by grad_scale first (gradient clipping): the
  // same bits as scaling `grads` in place (one f32 multiply each) and calling step(), which is
  // what this default does (and leaves `grads` scaled); AdamW multiplies as it reads instead,
  // sparing a pass over the gradients, and leaves them as they were.
  virtual void step_scaled(std::span<float> params, std::span<float> grads, float lr,
                           float grad_scale);
  // The optimizer step in backward (TrainOptions::update_in_backward): updates only the whole
  // tensors in [begin, end) of the flat arrays, where grads[i - begin] is the gradient of element
  // i, as part of the step that the next finish_step() completes (its bias corrections use
  // steps() + 1). Updating every tensor once this way and then calling finish_step() gives the
  // bits of step(). AdamW, SGD and Adafactor support it (supports_range_step()).
  virtual bool supports_range_step() const { return false; }
  // Whether step_range takes any whole rows of a tensor marked ParamInfo::row_pieces (element-wise
  // updates: AdamW, SGD), as TrainOptions::row_updates needs.
  virtual bool supports_row_updates() const { return false; }
  virtual void step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                          float lr);
  void finish_step() { ++t_; }
  virtual const char* name() const = 0;  // "adamw", "sgd", "adafactor"
  virtual std::vector<StateBuffer> state() = 0;
  int64_t steps() const { return t_; }
  void set_steps(int64_t t) { t_ = t; }
  // Threads (our ThreadPool, the caller included) for step(); default 1. Work is split by fixed
  // element ranges, so the result does not depend on the thread count.
  void set_threads(int n);
  ThreadPool* pool() const { return pool_.get(); }
  // Total bytes of state().
  size_t state_bytes();

 protected:
  int64_t t_ = 0;
  std::unique_ptr<ThreadPool> pool_;
};

// One parameter tensor's place in the flat arrays, and whether weight decay applies to it
// (rank >= 2: matrices and embeddings, not norm weights).
struct ParamRange {
  size_t begin, end;
  bool decay;
  size_t piece = 0;  // the largest piece the element-wise optimizers cut it into (0: kChunk)
};
// The ranges of `tensors` (in their order) and the flat size (max end).
std::vector<ParamRange> param_ranges(std::span<const ParamInfo> tensors, size_t* n_out);
// `ranges` cut into pieces of at most kChunk elements (or each range's own piece): the units the
// element-wise optimizers' threads claim.
std::vector<ParamRange> chunked(const std::vector<ParamRange>& ranges);
// The chunks [c0, c1) of `chunks` (sorted, contiguous) that cover exactly [begin, end); throws
// naming the range when it does not start and end on chunk (tensor) boundaries.
std::pair<size_t, size_t> chunks_covering(const std::vector<ParamRange>& chunks, size_t begin,
                                          size_t end);
// Sum of squares of `grads` in double, over the same fixed chunks as grad_norm (which is its
// square root).
double grad_sumsq(std::span<const float> grads, ThreadPool* pool = nullptr);

// AdamW state: first and second moments in one allocation (2 x n_params floats, or bf16 values
// with AdamWOptions::bf16_state).
class AdamW final : public Optimizer {
 public:
  // Sized for `model`'s parameters; the decay mask follows its tensor table.
  AdamW(const TrainModel& model, const AdamWOptions& opts);
  AdamW(std::span<const ParamInfo> tensors, const AdamWOptions& opts);
  ~AdamW() override;
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update of params from grads at learning rate `lr`, as torch.optim.AdamW does it:
  // p -= lr wd p; m, v moments; p -= lr m_hat / (sqrt(v_hat) + eps). One pass over the arrays,
  // AVX2 when the CPU has it (bit-identical to the scalar path), threaded by set_threads().
  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  void step_scaled(std::span<float> params, std::span<float> grads, float lr,
                   float grad_scale) override;
  bool supports_range_step() const override { return true; }
  bool supports_row_updates() const override { return true; }
  void step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                  float lr) override;
  const char* name() const override { return "adamw"; }
  std::vector<StateBuffer> state() override;
  const AdamWOptions& options() const { return opts_; }

 private:
  void update(std::span<float> params, std::span<const float> grads, float lr, float grad_scale);
  // Chunks [c0, c1) of step `step`; grads[i - g_origin] is the gradient of element i.
  void apply(float* p, const float* grads, size_t g_origin, size_t c0, size_t c1, float lr,
             float grad_scale, int64_t step);
  AdamWOptions opts_;
  std::vector<ParamRange> chunks_;  // chunked() tensor ranges
  size_t state_bytes_alloc() const;
  size_t n_ = 0;
  void* state_ = nullptr;  // m then v: floats, or bf16 values
};

// torch.optim.SGD with momentum (dampening 0): d = g + wd p (rank >= 2); buf = mu buf + d;
// p -= lr (nesterov ? d + mu buf : buf). State: one momentum buffer of n_params floats.
class Sgd final : public Optimizer {
 public:
  Sgd(std::span<const ParamInfo> tensors, const SgdOptions& opts);
  ~Sgd() override;
  Sgd(const Sgd&) = delete;
  Sgd& operator=(const Sgd&) = delete;

  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  bool supports_range_step() const override { return true; }
  bool supports_row_updates() const override { return true; }
  void step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                  float lr) override;
  const char* name() const override { return "sgd"; }
  std::vector<StateBuffer> state() override;
  const SgdOptions& options() const { return opts_; }

 private:
  void apply(float* p, const float* grads, size_t g_origin, size_t c0, size_t c1, float lr);
  SgdOptions opts_;
  std::vector<ParamRange> chunks_;
  size_t n_ = 0;
  float* buf_ = nullptr;
};

// Adafactor (Shazeer & Stern 2018) at a given lr, without momentum, relative step or parameter
// scaling (as HF transformers' Adafactor(relative_step=False, scale_parameter=False,
// warmup_init=False, beta1=None)). A matrix [n, m] keeps running means of g^2 + eps1 over its
// rows (n floats) and columns (m floats) and uses V = R C / mean(R); a vector keeps V itself.
// Tensors of rank > 2 are factored as [numel / last, last]. u = g / sqrt(V) is divided by
// max(1, rms(u) / clip) per tensor. Matrices are threaded by blocks of rows fixed by the shape.
class Adafactor final : public Optimizer {
 public:
  Adafactor(std::span<const ParamInfo> tensors, const AdafactorOptions& opts);
  ~Adafactor() override;
  Adafactor(const Adafactor&) = delete;
  Adafactor& operator=(const Adafactor&) = delete;

  void step(std::span<float> params, std::span<const float> grads, float lr) override;
  // Every statistic Adafactor keeps (row and column means, the update RMS) is per tensor, so
  // whole tensors can be updated on their own.
  bool supports_range_step() const override { return true; }
  void step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                  float lr) override;
  const char* name() const override { return "adafactor"; }
  // "adafactor.row" (every factored tensor's row means, in tensor order), "adafactor.col"
  // (column means) and "adafactor.v" (vectors' full second moments).
  std::vector<StateBuffer> state() override;
  const AdafactorOptions& options() const { return opts_; }

 private:
  struct Slot {
    size_t begin;        // in the flat arrays
    int64_t rows, cols;  // cols == 0: unfactored vector of `rows` elements
    size_t state;        // offset of its row values (or v) in the row (or v) part of state_
    size_t col_state;    // offset of its column values in the column part of state_
    bool decay;
  };
  // Blocks of rows a factored [n, m] tensor is cut into: about n m / 64 Ki, at most 64.
  static constexpr int64_t kMaxRowBlocks = 64;
  static int64_t row_blocks(int64_t n, int64_t m);
  void run_blocks(int64_t nb, const std::function<void(int64_t)>& fn);
  void step_factored(const Slot& s, float* p, const float* g, float lr, float beta2t);
  void step_vector(const Slot& s, float* p, const float* g, float lr, float beta2t);

  AdafactorOptions opts_;
  std::vector<Slot> slots_;
  std::vector<ParamRange> ranges_;  // slots_[i]'s elements, for step_range
  size_t n_ = 0, n_rows_ = 0, n_cols_ = 0, n_v_ = 0;
  float* state_ = nullptr;          // rows, then cols, then v
  std::vector<double> col_part_;    // per row block column sums of the tensor being updated
  std::vector<double> block_part_;  // per row block sums (row total, then sum of u^2)
  std::vector<float> col_factor_;   // rsqrt(col) of the tensor being updated
};

// Scales grads so that their global L2 norm is at most max_norm (torch's clip_grad_norm_: factor
// max_norm / (norm + 1e-6) when below 1). Returns the norm before clipping. The sum of squares is
// taken in double over fixed chunks combined in order, so the result does not depend on `pool`'s
// thread count or the ISA (AVX2 and scalar paths are bit-identical).
float clip_grad_norm(std::span<float> grads, float max_norm, ThreadPool* pool = nullptr);
// Its two halves: the global L2 norm (same sums), and the factor clip_grad_norm multiplies by
// (max_norm / (norm + 1e-6) when that is below 1, else 1).
float grad_norm(std::span<const float> grads, ThreadPool* pool = nullptr);
float clip_factor(float norm, float max_norm);
// g *= c over the fixed chunks, on `pool`'s threads.
void scale_grads(std::span<float> grads, float c, ThreadPool* pool = nullptr);

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  float lr = 1e-3f;     // peak learning rate
  float min_lr = 0.0f;  // floor reached at total_steps (linear / cosine)
  int64_t warmup = 0;   // steps of linear warmup from lr / warmup
  int64_t total_steps = 1;
  LrDecay decay = LrDecay::kCosine;

  // Learning rate of step `step` (0-based).
  float at(int64_t step) const;
};

}  // namespace nexus::train

namespace nexus::train {

// Every optimizer's settings in one place, for the CLI, configs and checkpoints.
struct OptimizerOptions {
  std::string name = "adamw";  // "adamw" | "sgd" | "adafactor"
  AdamWOptions adamw;
  float momentum = 0.9f;                // sgd
  float sgd_weight_decay = 0.0f;        // sgd, coupled (added to the gradient, as torch.optim.SGD)
  bool nesterov = false;                // sgd
  float adafactor_decay = -0.8f;        // adafactor: beta2_t = 1 - t^decay
  float adafactor_eps1 = 1e-30f;        // regularizes the squared gradient
  float adafactor_clip = 1.0f;          // update RMS clipping threshold
  float adafactor_weight_decay = 0.0f;  // decoupled, rank >= 2
};

// Sets opts->adamw.bf16_state from a --optimizer-state value ("f32" or "bf16"); an error naming
// the value when it is neither, or when bf16 is asked of another optimizer than adamw.
Status set_optimizer_state(const std::string& value, OptimizerOptions* opts);

// Whether the optimizer opts.name names updates elements independently, so it can take any whole
// rows of a tensor on their own (Optimizer::supports_row_updates): AdamW and SGD, not Adafactor.
// What nexus train and find-batch-size set TrainOptions::row_updates from.
inline bool updates_rows(const OptimizerOptions& opts) { return opts.name != "adafactor"; }

// The optimizer named by opts.name for these tensors, or an error naming the unknown optimizer.
Result<std::unique_ptr<Optimizer>> make_optimizer(std::span<const ParamInfo> tensors,
                                                  const OptimizerOptions& opts);
inline Result<std::unique_ptr<Optimizer>> make_optimizer(const TrainModel& model,
                                                         const OptimizerOptions& opts) {
  return make_optimizer(model.tensors(), opts);
}

}  // namespace nexus::train
