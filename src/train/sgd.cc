// SGD with momentum, torch.optim.SGD's update with dampening 0 (see optimizer.h).
#include <algorithm>
#include <cstring>

#include "backends/cpu/optim.h"
#include "nexus/core/allocator.h"
#include "nexus/train/optimizer.h"

namespace nexus::train {

Sgd::Sgd(std::span<const ParamInfo> tensors, const SgdOptions& opts) : opts_(opts) {
  chunks_ = chunked(param_ranges(tensors, &n_));
  buf_ = static_cast<float*>(aligned_alloc_counted(n_ * sizeof(float), MemCategory::kOptimizer));
  std::memset(buf_, 0, n_ * sizeof(float));
}

Sgd::~Sgd() { aligned_free_counted(buf_, n_ * sizeof(float), MemCategory::kOptimizer); }

void Sgd::step(std::span<float> params, std::span<const float> grads, float lr) {
  NEXUS_CHECK(params.size() == n_ && grads.size() == n_,
              "[sgd] expected " + std::to_string(n_) + " parameters and gradients, got " +
                  std::to_string(params.size()) + " and " + std::to_string(grads.size()));
  ++t_;
  apply(params.data(), grads.data(), 0, 0, chunks_.size(), lr);
}

void Sgd::step_range(std::span<float> params, const float* grads, size_t begin, size_t end,
                     float lr) {
  NEXUS_CHECK(params.size() == n_, "[sgd] expected " + std::to_string(n_) + " parameters, got " +
                                       std::to_string(params.size()));
  const auto [c0, c1] = chunks_covering(chunks_, begin, end);
  apply(params.data(), grads, begin, c0, c1, lr);
}

void Sgd::apply(float* p, const float* grads, size_t g_origin, size_t c0, size_t c1, float lr) {
  const float mu = opts_.momentum;
  const bool nesterov = opts_.nesterov;
  // torch starts the buffer as a copy of the first d; with dampening 0 that is mu * 0 + d, so a
  // zero-initialised buffer gives the same numbers and keeps the state a plain array.
  auto run = [&](size_t c) {
    const ParamRange& r = chunks_[c];
    const float wd = r.decay ? opts_.weight_decay : 0.0f;
    const float* g = grads + (r.begin - g_origin);
    for (size_t i = r.begin; i < r.end; ++i) {
      const float gi = g[i - r.begin];
      const float d = wd != 0.0f ? gi + wd * p[i] : gi;
      const float b = mu * buf_[i] + d;
      buf_[i] = b;
      p[i] -= lr * (nesterov ? d + mu * b : b);
    }
  };
  if (pool_) {
    pool_->parallel_for(static_cast<int64_t>(c1 - c0), [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) run(c0 + static_cast<size_t>(c));
    });
  } else {
    for (size_t c = c0; c < c1; ++c) run(c);
  }
}

std::vector<StateBuffer> Sgd::state() { return {{"sgd.momentum", {buf_, n_}, {}}}; }

}  // namespace nexus::train
