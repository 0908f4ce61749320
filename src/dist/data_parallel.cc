// Data parallel gradient exchange: bucketed all-reduce (ZeRO 0) and sharded optimizer (ZeRO 1).
#include "nexus/dist/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "nexus/core/thread_pool.h"

namespace nexus::dist {
namespace {

// Shard boundaries on multiples of 16 floats (64 bytes), as even as that allows.
std::vector<size_t> shard_counts_of(size_t n, int world) {
  std::vector<size_t> counts(world);
  size_t prev = 0;
  for (int r = 0; r < world; ++r) {
    size_t end = r + 1 == world ? n : (n * (r + 1) / world + 15) / 16 * 16;
    end = std::clamp(end, prev, n);
    counts[r] = end - prev;
    prev = end;
  }
  return counts;
}

}  // namespace

Status parse_zero(const std::string& text, int* out) {
  if (text == "0" || text == "1" || text == "2") {
    *out = text[0] - '0';
    return Status::ok();
  }
  return Status::error(
      "--zero must be 0 (all-reduce), 1 (optimizer state sharded) or 2 (gradients too), got '" +
      text + "'");
}

Status parse_comm_dtype(const std::string& text, CommDType* out) {
  if (text == "f32" || text == "fp32") {
    *out = CommDType::kF32;
    return Status::ok();
  }
  if (text == "bf16") {
    *out = CommDType::kBF16;
    return Status::ok();
  }
  return Status::error("--comm-dtype must be f32 or bf16, got '" + text + "'");
}

DataParallel::DataParallel(Communicator& comm, std::span<const train::ParamInfo> tensors,
                           size_t n_params, const DataParallelOptions& options)
    : comm_(comm), opts_(options), tensors_(tensors.begin(), tensors.end()), n_(n_params) {
  NEXUS_CHECK(options.zero >= 0 && options.zero <= 2,
              "[data parallel] ZeRO stage " + std::to_string(options.zero) + " is not 0, 1 or 2");
  counts_ = shard_counts_of(n_, comm.size());
  for (int r = 0; r < comm.rank(); ++r) lo_ += counts_[r];
  hi_ = lo_ + counts_[comm.rank()];
  if (options.zero == 0) lo_ = 0, hi_ = n_;
  if (options.zero >= 1) shard_grads_.resize(counts_[comm.rank()]);
}

std::vector<train::ParamInfo> DataParallel::shard_tensors() const {
  std::vector<train::ParamInfo> out;
  for (const train::ParamInfo& t : tensors_) {
    const size_t b = std::max(t.offset, lo_);
    const size_t e = std::min(t.offset + static_cast<size_t>(t.numel), hi_);
    if (b >= e) continue;
    train::ParamInfo p;
    p.name = t.name;
    const auto piece = static_cast<int64_t>(e - b);
    // The piece keeps its tensor's rank (weight decay follows it), and is updated element-wise.
    p.shape = t.shape.size() >= 2 ? std::vector<int64_t>{1, piece} : std::vector<int64_t>{piece};
    p.offset = b - lo_;
    p.numel = piece;
    out.push_back(std::move(p));
  }
  return out;
}

double DataParallel::bytes_per_step() const {
  const double n = static_cast<double>(comm_.size());
  const double bytes = static_cast<double>(n_) * 4.0;
  if (opts_.zero >= 1) return 2.0 * (n - 1) / n * bytes;
  const double wire = opts_.comm_dtype == CommDType::kBF16 ? 0.5 : 1.0;
  return 2.0 * (n - 1) / n * bytes * wire;
}

void DataParallel::ready(std::span<float> grads, size_t begin, size_t end) {
  if (opts_.zero == 2 || comm_.size() == 1 || begin >= end) return;
  if (pending_end_ > pending_begin_ && end == pending_begin_) {
    pending_begin_ = begin;  // backward runs from the last tensors to the first
  } else {
    flush(grads);
    pending_begin_ = begin, pending_end_ = end;
  }
  if ((pending_end_ - pending_begin_) * sizeof(float) >= opts_.bucket_bytes) flush(grads);
}

size_t DataParallel::parts(size_t begin, size_t end, std::vector<size_t>* counts) const {
  counts->assign(counts_.size(), 0);
  size_t at = 0;
  for (size_t r = 0; r < counts_.size(); ++r) {
    const size_t b = std::max(at, begin), e = std::min(at + counts_[r], end);
    (*counts)[r] = e > b ? e - b : 0;
    at += counts_[r];
  }
  return (*counts)[comm_.rank()];
}

void DataParallel::send(std::span<float> grads, size_t begin, size_t end) {
  if (opts_.zero == 0) {
    tickets_.push_back(
        comm_.start_all_reduce_sum(grads.subspan(begin, end - begin), opts_.comm_dtype));
  } else {
    std::vector<size_t> counts;
    const size_t mine = parts(begin, end, &counts);
    // A rank with no part of the range still takes part; its output is never written.
    float* out = shard_grads_.data() + (mine > 0 ? std::max(begin, lo_) - lo_ : 0);
    tickets_.push_back(comm_.start_reduce_scatter_sum(grads.subspan(begin, end - begin),
                                                      std::span<float>(out, mine), counts));
  }
  sent_.emplace_back(begin, end);
}

void DataParallel::flush(std::span<float> grads) {
  if (pending_end_ <= pending_begin_) return;
  // Bucket-sized pieces, the last first (backward's order): a 37 MB embedding in one collective
  // ran out of cache and held tensor-sized temporaries inside MPI.
  const size_t step = std::max<size_t>(opts_.bucket_bytes / sizeof(float), 16);
  for (size_t e = pending_end_; e > pending_begin_;) {
    const size_t b = e - std::min(step, e - pending_begin_);
    send(grads, b, e);
    e = b;
  }
  pending_begin_ = pending_end_ = 0;
}

void DataParallel::finish(std::span<float> grads) {
  NEXUS_CHECK(grads.size() == n_, "[data parallel] the gradients are not the model's");
  const int world = comm_.size();
  if (world == 1) return;
  flush(grads);
  // Whatever backward did not report (none in the models today) goes in one more exchange.
  std::sort(sent_.begin(), sent_.end());
  size_t at = 0;
  std::vector<std::pair<size_t, size_t>> gaps;
  for (const auto& [b, e] : sent_) {
    if (b > at) gaps.emplace_back(at, b);
    at = std::max(at, e);
  }
  if (at < n_) gaps.emplace_back(at, n_);
  for (const auto& [b, e] : gaps) send(grads, b, e);
  for (const Communicator::Ticket t : tickets_) comm_.wait(t);
  tickets_.clear();
  sent_.clear();
  // ZeRO 0 leaves the sum in place: the 1 / ranks goes into the norm and the optimizer's
  // gradient scale (a pass over every gradient less a step). ZeRO 1 copies its shard anyway.
  if (opts_.zero == 1) {
    const float inv = 1.0f / static_cast<float>(world);
    float* g = grads.data() + lo_;
    for (size_t i = 0; i < shard_grads_.size(); ++i) g[i] = shard_grads_[i] * inv;
  }
}

double DataParallel::mean(double local) {
  double v = local;
  comm_.all_reduce_sum(std::span<double>(&v, 1));
  return v / comm_.size();
}

double DataParallel::grad_sumsq(std::span<const float> grads, ThreadPool* pool) {
  if (opts_.zero == 0) {  // the same on every rank; the sum's, scaled to the mean's
    const double inv = 1.0 / comm_.size();
    return train::grad_sumsq(grads, pool) * inv * inv;
  }
  double s = train::grad_sumsq(
      opts_.zero == 2 ? std::span<const float>(shard_grads_) : grads.subspan(lo_, hi_ - lo_), pool);
  comm_.all_reduce_sum(std::span<double>(&s, 1));
  return s;
}

void DataParallel::update(train::Optimizer& optimizer, std::span<float> params,
                          std::span<float> grads, float lr, float grad_scale) {
  if (opts_.zero == 0) {  // grads hold the sum over ranks (finish)
    optimizer.step_scaled(params, grads, lr, grad_scale / static_cast<float>(comm_.size()));
    return;
  }
  optimizer.step_scaled(
      params.subspan(lo_, hi_ - lo_),
      opts_.zero == 2 ? std::span<float>(shard_grads_) : grads.subspan(lo_, hi_ - lo_), lr,
      grad_scale);
  // A bucket at a time, as the gradients went: each rank's part of it from its shard.
  const size_t step = std::max<size_t>(opts_.bucket_bytes / sizeof(float), 16);
  std::vector<size_t> counts;
  for (size_t b = 0; b < n_; b += step) {
    const size_t e = std::min(n_, b + step);
    parts(b, e, &counts);
    comm_.all_gather(params.subspan(b, e - b), counts);
  }
}

void DataParallel::begin_step() { std::fill(shard_grads_.begin(), shard_grads_.end(), 0.0f); }

void DataParallel::take(size_t begin, size_t end, const float* grads) {
  // Waited for here, on the compute thread, as DeepSpeed's ZeRO 2 does without overlap_comm: on
  // this 2-vCPU host the exchange overlapping the next block's backward (a copy of each block's
  // gradients in flight) measured 0.69-0.79x one process, waiting 0.86-0.93x
  // (bench/dist_train.sh). Bucket-sized pieces, as flush() sends.
  const size_t step = std::max<size_t>(opts_.bucket_bytes / sizeof(float), 16);
  std::vector<size_t> counts;
  for (size_t b = begin; b < end; b += step) {
    const size_t e = std::min(end, b + step);
    const size_t mine = parts(b, e, &counts);
    part_.resize(mine);
    comm_.reduce_scatter_sum(std::span<const float>(grads + (b - begin), e - b), part_, counts);
    float* acc = shard_grads_.data() + (mine > 0 ? std::max(b, lo_) - lo_ : 0);
    for (size_t i = 0; i < mine; ++i) acc[i] += part_[i];
  }
}

void DataParallel::finish_streamed(float scale) {
  const float s = scale / static_cast<float>(comm_.size());
  for (float& g : shard_grads_) g *= s;
}

void DataParallel::gather_state(train::Optimizer& shard, train::Optimizer* full) {
  std::vector<train::StateBuffer> s = shard.state(), f;
  if (full) f = full->state();
  NEXUS_CHECK(!full || s.size() == f.size(), "[data parallel] the optimizers are not of one kind");
  for (size_t i = 0; i < s.size(); ++i) {
    NEXUS_CHECK(s[i].dtype() == DType::kF32 && s[i].count() == hi_ - lo_ &&
                    (!full || (f[i].dtype() == DType::kF32 && f[i].count() == n_)),
                "[data parallel] ZeRO 1 checkpoints need f32 element-wise optimizer state; '" +
                    s[i].name + "' is not");
    std::span<float> all;
    if (full) {
      all = f[i].data;
      std::memcpy(all.data() + lo_, s[i].data.data(), s[i].bytes());
    }
    comm_.gather(s[i].data, all, counts_, 0);
  }
  if (full) full->set_steps(shard.steps());
}

void DataParallel::scatter_state(const train::Optimizer& full, train::Optimizer& shard) const {
  std::vector<train::StateBuffer> f = const_cast<train::Optimizer&>(full).state(),
                                  s = shard.state();
  NEXUS_CHECK(s.size() == f.size(), "[data parallel] the optimizers are not of one kind");
  for (size_t i = 0; i < s.size(); ++i) {
    NEXUS_CHECK(s[i].dtype() == DType::kF32 && f[i].dtype() == DType::kF32 && f[i].count() == n_ &&
                    s[i].count() == hi_ - lo_,
                "[data parallel] ZeRO 1 checkpoints need f32 element-wise optimizer state; '" +
                    f[i].name + "' is not");
    std::memcpy(s[i].data.data(), f[i].data.data() + lo_, s[i].bytes());
  }
  shard.set_steps(full.steps());
}

}  // namespace nexus::dist
