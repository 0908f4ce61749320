// DecodeSchedule: the learned matmul order of a decode step and the workers' prefetch of the next.
#include "ops/decode_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "nexus/status.h"
#include "ops/matmul.h"

namespace nexus {
namespace {

// Groups are told apart by their first weight (a weight belongs to one group of a step).
bool same(const DecodeSchedule::Group& g, const Tensor* const* w, int count) {
  return g.count == count && g.w[0] == w[0];
}

}  // namespace

bool idle_prefetch_enabled() {
  const char* e = std::getenv("NEXUS_NO_IDLE_PREFETCH");
  return e == nullptr || std::strcmp(e, "0") == 0;
}

const DecodeSchedule::Group* DecodeSchedule::ran(const Tensor* const* w, int count) {
  NEXUS_CHECK(count >= 1 && count <= kMaxWeights,
              "[decode schedule] a group holds 1 to 4 weights, got " + std::to_string(count));
  if (!enabled_) return nullptr;
  if (cycle_) {
    const size_t next = (last_ + 1) % order_.size();
    if (same(order_[next], w, count)) {
      last_ = next;
      return &order_[(next + 1) % order_.size()];
    }
    order_.clear();  // off the learned order: learn again from here
    cycle_ = false;
  }
  if (!order_.empty() && same(order_[0], w, count)) {
    cycle_ = true;
    last_ = 0;
    return &order_[1 % order_.size()];
  }
  // A group seen before, but not the first, means learning started mid-step: start again here.
  const bool seen =
      std::any_of(order_.begin(), order_.end(), [&](const Group& g) { return same(g, w, count); });
  if (seen || order_.size() >= kMaxGroups) order_.clear();
  Group g{};
  std::copy(w, w + count, g.w);
  g.count = count;
  order_.push_back(g);
  return nullptr;
}

void DecodeSchedule::after(const Tensor* const* w, int count, int64_t n_tokens, ThreadPool& pool) {
  if (!enabled_ || n_tokens > kMaxTokens || pool.size() < 2) return;
  if (const Group* next = ran(w, count))
    matmul_group_prefetch(next->w, next->count, n_tokens, pool, kPrefetchBytes);
}

}  // namespace nexus
