// Pipeline parallel training: the stages' layouts, the cut and gather of parameters and optimizer
// state, and the 1F1B schedule of a step's micro-batches.
#include "nexus/dist/pipeline_parallel.h"

#include <algorithm>
#include <cstring>

#include "nexus/profile.h"

namespace nexus::dist {

StageLayers pipeline_stage(int64_t n_layers, int stage, int stages) {
  const int64_t first = n_layers * stage / stages, end = n_layers * (stage + 1) / stages;
  return {first, end - first};
}

Status check_pipeline(const ModelConfig& c, int stages) {
  if (stages < 1) return Status::error("--pp must be >= 1");
  if (stages == 1) return Status::ok();
  if (c.has_recurrent())
    return Status::error("pipeline parallel splits transformer blocks; " + c.arch_name +
                         " has state-space layers, which it does not split");
  if (c.n_layers < stages)
    return Status::error("pipeline parallel over " + std::to_string(stages) + " stages needs " +
                         std::to_string(stages) + " blocks or more; the model has " +
                         std::to_string(c.n_layers));
  return Status::ok();
}

PipelineTraining::PipelineTraining(Communicator& comm, const ModelConfig& full,
                                   std::span<const train::ParamInfo> full_tensors)
    : comm_(comm),
      rank_(comm.rank()),
      size_(comm.size()),
      full_(full),
      full_tensors_(full_tensors.begin(), full_tensors.end()) {
  for (const train::ParamInfo& t : full_tensors_)
    full_floats_ = std::max(full_floats_, t.offset + static_cast<size_t>(t.numel));
  for (int s = 0; s < size_; ++s) {
    std::vector<size_t> index;
    stage_.push_back(layout(s, &index));
    index_.push_back(std::move(index));
  }
}

// As TrainModel::layout_params lays out a stage: the tensors before the blocks on the first stage
// (and a tied token table on the last), the stage's blocks, the tensors after them on the last.
std::vector<train::ParamInfo> PipelineTraining::layout(int stage,
                                                       std::vector<size_t>* index) const {
  const StageLayers sl = pipeline_stage(full_.n_layers, stage, size_);
  const bool first = stage == 0, last = stage == size_ - 1;
  std::vector<train::ParamInfo> out;
  size_t at = 0;
  bool in_blocks = false, after_blocks = false;
  for (size_t i = 0; i < full_tensors_.size(); ++i) {
    const train::ParamInfo& t = full_tensors_[i];
    bool take;
    if (t.name.rfind("blk.", 0) == 0) {
      in_blocks = true;
      const int64_t l = std::atoll(t.name.c_str() + 4);
      take = l >= sl.first && l < sl.first + sl.count;
    } else {
      after_blocks = after_blocks || in_blocks;
      take = after_blocks ? last
                          : first || (last && full_.tied_output && t.name == "token_embd.weight");
    }
    if (!take) continue;
    train::ParamInfo s = t;
    s.offset = at;
    at += static_cast<size_t>(t.numel);
    out.push_back(std::move(s));
    index->push_back(i);
  }
  return out;
}

ModelConfig PipelineTraining::part_config() const {
  ModelConfig c = full_;
  c.n_layers = pipeline_stage(full_.n_layers, rank_, size_).count;
  return c;
}

void PipelineTraining::configure(train::TrainOptions* o) {
  o->first_layer = pipeline_stage(full_.n_layers, rank_, size_).first;
  o->total_layers = full_.n_layers;
}

namespace {

size_t floats(const std::vector<train::ParamInfo>& tensors) {
  return tensors.empty() ? 0 : tensors.back().offset + static_cast<size_t>(tensors.back().numel);
}

}  // namespace

size_t PipelineTraining::part_floats() const { return floats(stage_[rank_]); }

void PipelineTraining::cut(std::span<const float> full, std::span<float> stage) const {
  const std::vector<train::ParamInfo>& mine = stage_[rank_];
  NEXUS_CHECK(full.size() == full_floats_ && stage.size() == floats(mine),
              "[pipeline] cut: the arrays are not the model's");
  for (size_t i = 0; i < mine.size(); ++i) {
    const train::ParamInfo& f = full_tensors_[index_[rank_][i]];
    std::memcpy(stage.data() + mine[i].offset, full.data() + f.offset,
                static_cast<size_t>(f.numel) * sizeof(float));
  }
}

void PipelineTraining::gather(std::span<const float> stage, std::span<float> full) {
  const bool root = rank_ == 0;
  NEXUS_CHECK(stage.size() == floats(stage_[rank_]) && (!root || full.size() == full_floats_),
              "[pipeline] gather: the arrays are not the model's");
  std::vector<size_t> counts;
  size_t total = 0;
  for (const auto& s : stage_) {
    counts.push_back(floats(s));
    total += counts.back();
  }
  std::vector<float> all;
  if (root) {
    all.resize(total);
    std::copy(stage.begin(), stage.end(), all.begin());
  }
  comm_.gather(stage, all, counts, 0);
  if (!root) return;
  size_t base = 0;
  for (int s = 0; s < size_; ++s) {
    for (size_t i = 0; i < stage_[s].size(); ++i) {
      const train::ParamInfo& f = full_tensors_[index_[s][i]];
      // A tied token table is the first stage's (the last holds the same values).
      if (s != 0 && f.name == "token_embd.weight") continue;
      std::memcpy(full.data() + f.offset, all.data() + base + stage_[s][i].offset,
                  static_cast<size_t>(f.numel) * sizeof(float));
    }
    base += counts[static_cast<size_t>(s)];
  }
}

double PipelineTraining::mean(double local) {
  double v = local;  // the last stage's loss; the others add 0
  comm_.all_reduce_sum(std::span<double>(&v, 1));
  return v;
}

double PipelineTraining::grad_sumsq(std::span<const float> grads, ThreadPool* pool) {
  double sum = 0;
  const std::vector<train::ParamInfo>& mine = stage_[rank_];
  for (const train::ParamInfo& t : mine) {
    // A tied token table counts once (the first stage's).
    if (rank_ != 0 && t.name == "token_embd.weight") continue;
    sum += train::grad_sumsq(grads.subspan(t.offset, static_cast<size_t>(t.numel)), pool);
  }
  comm_.all_reduce_sum(std::span<double>(&sum, 1));
  return sum;
}

void PipelineTraining::update(train::Optimizer& optimizer, std::span<float> params,
                              std::span<float> grads, float lr, float grad_scale) {
  // Each stage its own tensors; the two copies of a tied table get the same gradient and stay
  // equal.
  optimizer.step_scaled(params, grads, lr, grad_scale);
}

void PipelineTraining::sum_tied(train::TrainModel& model) {
  if (!full_.tied_output || size_ == 1) return;
  const train::ParamInfo* tied = nullptr;
  for (const train::ParamInfo& t : stage_[rank_])
    if (t.name == "token_embd.weight") tied = &t;
  std::span<float> g;
  if (tied) {
    g = model.grads().subspan(tied->offset, static_cast<size_t>(tied->numel));
  } else {  // a middle stage adds nothing (zeros kept for the run: the sum writes into them)
    tied_zeros_.assign(static_cast<size_t>(full_.n_vocab * full_.dim), 0.0f);
    g = tied_zeros_;
  }
  comm_.all_reduce_sum(g);
}

double PipelineTraining::run_micro_batches(train::TrainModel& model,
                                           std::span<const MicroBatch> batches) {
  const auto m_count = static_cast<int64_t>(batches.size());
  const int64_t n = static_cast<int64_t>(batches[0].rows) * batches[0].seq_len;
  const auto width = static_cast<size_t>(n * full_.dim);
  const int prev = first() ? -1 : rank_ - 1, next = last() ? -1 : rank_ + 1;
  // The inputs of the micro-batches in flight (stages after the first) and the gradients of
  // their outputs (stages before the last).
  std::vector<std::vector<float>> input(static_cast<size_t>(m_count));
  std::vector<float> grad(last() ? 0 : width);
  int64_t resident = -1;  // the micro-batch whose activations the model holds
  double loss = 0;
  const auto forward = [&](int64_t m) {
    NEXUS_PROFILE_SCOPE("forward");
    const MicroBatch& b = batches[static_cast<size_t>(m)];
    NEXUS_CHECK(static_cast<int64_t>(b.rows) * b.seq_len == n,
                "[pipeline] the micro-batches of a step differ in size");
    if (!first())
      std::copy(input[static_cast<size_t>(m)].begin(), input[static_cast<size_t>(m)].end(),
                model.stage_input());
    const float l = model.forward(b.inputs, b.targets, b.rows, b.seq_len);
    if (last()) loss += l;  // (only earlier stages run a forward again)
    resident = m;
  };
  const auto output = [&] { return std::span<const float>(model.stage_output(), width); };
  const auto receive_input = [&](int64_t m) {
    if (first() || m >= m_count) return;
    input[static_cast<size_t>(m)].resize(width);
    comm_.recv(input[static_cast<size_t>(m)], prev);
  };
  // Backward of micro-batch m (its output's gradient in `grad`, stages before the last).
  const auto backward = [&](int64_t m) {
    if (resident != m) forward(m);  // the recompute: this stage keeps one micro-batch's
    NEXUS_PROFILE_SCOPE("backward");
    if (!last()) std::copy(grad.begin(), grad.end(), model.stage_grad());
    model.backward();
    resident = -1;
    input[static_cast<size_t>(m)] = {};
  };
  const auto input_grad = [&] { return std::span<const float>(model.stage_grad(), width); };

  const int64_t warmup = std::min<int64_t>(size_ - 1 - rank_, m_count);
  const int64_t steady = m_count - warmup;
  for (int64_t m = 0; m < warmup; ++m) {
    receive_input(m);
    forward(m);
    comm_.send(output(), next);
  }
  if (steady > 0) receive_input(warmup);
  for (int64_t i = 0; i < steady; ++i) {
    const int64_t m = warmup + i;
    forward(m);
    if (!last()) comm_.send_recv(output(), next, grad, next);
    backward(i);
    if (first()) continue;
    if (i + 1 == steady) {
      comm_.send(input_grad(), prev);
    } else {
      input[static_cast<size_t>(m + 1)].resize(width);
      comm_.send_recv(input_grad(), prev, input[static_cast<size_t>(m + 1)], prev);
    }
  }
  for (int64_t i = steady; i < m_count; ++i) {
    comm_.recv(grad, next);
    backward(i);
    if (!first()) comm_.send(input_grad(), prev);
  }
  sum_tied(model);
  return loss;
}

}  // namespace nexus::dist
