// Adafactor (Shazeer & Stern 2018, Algorithms 4 and 5 without momentum or relative step sizes):
// factored second moments for matrices, per-tensor update RMS clipping (see optimizer.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/optim.h"
#include "nexus/core/allocator.h"
#include "nexus/train/optimizer.h"

namespace nexus::train {

Adafactor::Adafactor(std::span<const ParamInfo> tensors, const AdafactorOptions& opts)
    : opts_(opts) {
  size_t max_cols = 0;
  for (const ParamInfo& info : tensors) {
    Slot s{info.offset, info.numel, 0, 0, 0, info.shape.size() >= 2};
    if (info.shape.size() >= 2) {
      s.cols = info.shape.back();
      s.rows = s.cols > 0 ? info.numel / s.cols : 0;
      s.state = n_rows_;
      s.col_state = n_cols_;
      n_rows_ += static_cast<size_t>(s.rows);
      n_cols_ += static_cast<size_t>(s.cols);
      max_cols = std::max(max_cols, static_cast<size_t>(s.cols));
    } else {
      s.state = n_v_;
      n_v_ += static_cast<size_t>(info.numel);
    }
    slots_.push_back(s);
  }
  ranges_ = param_ranges(tensors, &n_);  // also the flat size
  const size_t total = n_rows_ + n_cols_ + n_v_;
  state_ = static_cast<float*>(
      aligned_alloc_counted(std::max<size_t>(1, total) * sizeof(float), MemCategory::kOptimizer));
  std::memset(state_, 0, total * sizeof(float));
  size_t max_part = 0;
  for (const Slot& sl : slots_)
    if (sl.cols > 0)
      max_part = std::max(max_part, static_cast<size_t>(row_blocks(sl.rows, sl.cols) * sl.cols));
  col_part_.resize(max_part);
  block_part_.resize(static_cast<size_t>(kMaxRowBlocks));
  col_factor_.resize(max_cols);
}

Adafactor::~Adafactor() {
  const size_t total = n_rows_ + n_cols_ + n_v_;
  aligned_free_counted(state_, std::max<size_t>(1, total) * sizeof(float), MemCategory::kOptimizer);
}

void Adafactor::step(std::span<float> params, std::span<const float> grads, float lr) {
  NEXUS_CHECK(params.size() == n_ && grads.size() == n_,
              "[adafactor] expected " + std::to_string(n_) + " parameters and gradients, got " +
                  std::to_string(params.size()) + " and " + std::to_string(grads.size()));
  step_range(params, grads.data(), 0, n_, lr);
  finish_step();
}

void Adafactor::step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                           float lr) {
  NEXUS_CHECK(params.size() == n_, "[adafactor] expected " + std::to_string(n_) +
                                       " parameters, got " + std::to_string(params.size()));
  const auto [first, last] = chunks_covering(ranges_, begin, end);
  // beta2_t = 1 - t^decay for the step finish_step() completes: 0 at the first step (the running
  // means start as the first g^2).
  const double t = static_cast<double>(t_ + 1);
  const float beta2t = static_cast<float>(1.0 - std::pow(t, static_cast<double>(opts_.decay)));
  for (size_t i = first; i < last; ++i) {
    const Slot& s = slots_[i];
    float* p = params.data() + s.begin;
    const float* g = grads + (s.begin - begin);
    if (s.cols > 0)
      step_factored(s, p, g, lr, beta2t);
    else
      step_vector(s, p, g, lr, beta2t);
  }
}

// Rows of a factored tensor are cut into row_blocks(n, m) blocks, a function of the shape only,
// so that threads can share the work while every sum is taken in one fixed order.
int64_t Adafactor::row_blocks(int64_t n, int64_t m) {
  const int64_t by_size = std::max<int64_t>(1, n * m / static_cast<int64_t>(cpu::optim::kChunk));
  return std::min({n, by_size, kMaxRowBlocks});
}

void Adafactor::run_blocks(int64_t nb, const std::function<void(int64_t)>& fn) {
  if (pool_ && nb > 1) {
    pool_->parallel_for(nb, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  } else {
    for (int64_t i = 0; i < nb; ++i) fn(i);
  }
}

// Row sums and column sums accumulate in double (a column of the embedding sums 32000 rows): per
// block of rows, then the blocks' partial sums in block order.
void Adafactor::step_factored(const Slot& s, float* p, const float* g, float lr, float beta2t) {
  const int64_t n = s.rows, m = s.cols;
  const int64_t nb = row_blocks(n, m);
  const int64_t rows_per_block = (n + nb - 1) / nb;
  const float a = 1.0f - beta2t, eps1 = opts_.eps1;
  float* row = state_ + s.state;
  float* col = state_ + n_rows_ + s.col_state;
  double* col_part = col_part_.data();  // [nb, m]
  double* block_part = block_part_.data();
  auto block_rows = [&](int64_t b) {
    return std::pair<int64_t, int64_t>{b * rows_per_block, std::min(n, (b + 1) * rows_per_block)};
  };
  run_blocks(nb, [&](int64_t b) {
    double* cp = col_part + b * m;
    std::fill(cp, cp + m, 0.0);
    double total = 0.0;
    const auto [r0, r1] = block_rows(b);
    for (int64_t i = r0; i < r1; ++i) {
      const float* gi = g + i * m;
      double rs = 0.0;
      for (int64_t j = 0; j < m; ++j) {
        const double q = gi[j] * gi[j] + eps1;
        rs += q;
        cp[j] += q;
      }
      row[i] = beta2t * row[i] + a * static_cast<float>(rs / static_cast<double>(m));
      total += row[i];
    }
    block_part[b] = total;
  });
  double row_total = 0.0;
  for (int64_t b = 0; b < nb; ++b) row_total += block_part[b];
  for (int64_t j = 0; j < m; ++j) {
    double cs = 0.0;
    for (int64_t b = 0; b < nb; ++b) cs += col_part[b * m + j];
    col[j] = beta2t * col[j] + a * static_cast<float>(cs / static_cast<double>(n));
    col_factor_[j] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(col[j])));
  }
  // V_ij = row_i col_j / mean(row), so u_ij = g_ij rsqrt(row_i / mean(row)) rsqrt(col_j).
  const double row_mean = row_total / static_cast<double>(n);
  auto row_factor = [&](int64_t i) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(row[i]) / row_mean));
  };
  run_blocks(nb, [&](int64_t b) {
    double ss = 0.0;
    const auto [r0, r1] = block_rows(b);
    for (int64_t i = r0; i < r1; ++i) {
      const float rf = row_factor(i);
      const float* gi = g + i * m;
      for (int64_t j = 0; j < m; ++j) {
        const double u = gi[j] * rf * col_factor_[j];
        ss += u * u;
      }
    }
    block_part[b] = ss;
  });
  double ss = 0.0;
  for (int64_t b = 0; b < nb; ++b) ss += block_part[b];
  const double rms = std::sqrt(ss / static_cast<double>(n * m));
  const float scale = static_cast<float>(lr / std::max(1.0, rms / opts_.clip));
  const float keep = s.decay ? 1.0f - lr * opts_.weight_decay : 1.0f;
  run_blocks(nb, [&](int64_t b) {
    const auto [r0, r1] = block_rows(b);
    for (int64_t i = r0; i < r1; ++i) {
      const float rf = row_factor(i);
      const float* gi = g + i * m;
      float* pi = p + i * m;
      for (int64_t j = 0; j < m; ++j) pi[j] = pi[j] * keep - scale * (gi[j] * rf * col_factor_[j]);
    }
  });
}

void Adafactor::step_vector(const Slot& s, float* p, const float* g, float lr, float beta2t) {
  const float a = 1.0f - beta2t, eps1 = opts_.eps1;
  float* v = state_ + n_rows_ + n_cols_ + s.state;
  double ss = 0.0;
  for (int64_t i = 0; i < s.rows; ++i) {
    v[i] = beta2t * v[i] + a * (g[i] * g[i] + eps1);
    const double u = g[i] / std::sqrt(v[i]);
    ss += u * u;
  }
  const double rms = std::sqrt(ss / static_cast<double>(std::max<int64_t>(1, s.rows)));
  const float scale = static_cast<float>(lr / std::max(1.0, rms / opts_.clip));
  const float keep = s.decay ? 1.0f - lr * opts_.weight_decay : 1.0f;
  for (int64_t i = 0; i < s.rows; ++i) p[i] = p[i] * keep - scale * (g[i] / std::sqrt(v[i]));
}

std::vector<StateBuffer> Adafactor::state() {
  return {{"adafactor.row", {state_, n_rows_}, {}},
          {"adafactor.col", {state_ + n_rows_, n_cols_}, {}},
          {"adafactor.v", {state_ + n_rows_ + n_cols_, n_v_}, {}}};
}

}  // namespace nexus::train
