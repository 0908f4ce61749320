// Sampler implementation: the penalty history ring, the chain stages over a preallocated candidate
// buffer, and parameter validation.
#include "nexus/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "ops/elementwise.h"

namespace nexus {
namespace {

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

Status bad_field(const char* field, const char* rule, const std::string& value) {
  return Status::error(std::string("[sampler] ") + field + " must be " + rule + ", got " + value);
}

// Descending logit, ties broken by ascending id: a strict total order, so partial_sort and
// nth_element give the same result with every standard library (given no NaN, checked earlier).
// A function object rather than a function, so that the sorts and heaps inline it.
struct Higher {
  bool operator()(const TokenProb& a, const TokenProb& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
constexpr Higher higher;

}  // namespace

Status validate(const SamplerParams& p) {
  if (!std::isfinite(p.temperature)) {
    return bad_field("temperature", "finite", fmt_float(p.temperature));
  }
  // Written so that NaN fails every range check.
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return bad_field("top_p", "in (0, 1]", fmt_float(p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return bad_field("min_p", "in [0, 1]", fmt_float(p.min_p));
  }
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f)) {
    return bad_field("repeat_penalty", "finite and > 0", fmt_float(p.repeat_penalty));
  }
  if (p.repeat_last_n < 0 || p.repeat_last_n > kMaxRepeatLastN) {
    return bad_field("repeat_last_n", ("in [0, " + std::to_string(kMaxRepeatLastN) + "]").c_str(),
                     std::to_string(p.repeat_last_n));
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return bad_field("frequency_penalty", "finite", fmt_float(p.frequency_penalty));
  }
  if (!std::isfinite(p.presence_penalty)) {
    return bad_field("presence_penalty", "finite", fmt_float(p.presence_penalty));
  }
  return Status::ok();
}

Sampler::Sampler(const SamplerParams& p, int64_t n_vocab)
    : params_(p), n_vocab_(n_vocab), rng_(p.seed) {
  Status st = validate(p);
  NEXUS_CHECK(st.is_ok(), st.message());
  NEXUS_CHECK(n_vocab >= 1 && n_vocab <= std::numeric_limits<int32_t>::max(),
              "[sampler] n_vocab must be in [1, 2^31 - 1], got " + std::to_string(n_vocab));
  logits_.resize(static_cast<size_t>(n_vocab));
  block_max_.resize(static_cast<size_t>((n_vocab + kBlockMaxEntries - 1) / kBlockMaxEntries));
  cand_.resize(static_cast<size_t>(n_vocab));
  if (p.repeat_last_n > 0) {
    ring_.resize(static_cast<size_t>(p.repeat_last_n));
    counts_.assign(static_cast<size_t>(n_vocab), 0);
  }
}

bool Sampler::penalties_active() const {
  return params_.repeat_last_n > 0 &&
         (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
          params_.presence_penalty != 0.0f);
}

void Sampler::accept(int32_t token) {
  NEXUS_CHECK(token >= 0 && token < n_vocab_, "[sampler] accept: token " + std::to_string(token) +
                                                  " outside [0, " + std::to_string(n_vocab_) + ")");
  if (ring_.empty()) return;
  if (ring_size_ == ring_.size()) {
    --counts_[static_cast<size_t>(ring_[ring_head_])];  // evict the oldest
  } else {
    ++ring_size_;
  }
  ring_[ring_head_] = token;
  ++counts_[static_cast<size_t>(token)];
  ring_head_ = (ring_head_ + 1) % ring_.size();
}

void Sampler::reset() {
  // The filled slots are [0, ring_size_) whether or not the ring has wrapped.
  for (size_t j = 0; j < ring_size_; ++j) counts_[static_cast<size_t>(ring_[j])] = 0;
  ring_size_ = 0;
  ring_head_ = 0;
  n_kept_ = 0;
  rng_.reseed(params_.seed);
}

void Sampler::apply_penalties(std::span<float> logits) {
  NEXUS_CHECK(static_cast<int64_t>(logits.size()) == n_vocab_,
              "[sampler] apply_penalties: expected " + std::to_string(n_vocab_) + " logits, got " +
                  std::to_string(logits.size()));
  if (!penalties_active()) return;
  const float rp = params_.repeat_penalty;
  // Each distinct token once: its count is negated after use to mark it done, then restored.
  for (size_t j = 0; j < ring_size_; ++j) {
    int32_t& c = counts_[static_cast<size_t>(ring_[j])];
    if (c <= 0) continue;
    float& x = logits[static_cast<size_t>(ring_[j])];
    x = x > 0.0f ? x / rp : x * rp;
    x -= static_cast<float>(c) * params_.frequency_penalty + params_.presence_penalty;
    c = -c;
  }
  for (size_t j = 0; j < ring_size_; ++j) {
    int32_t& c = counts_[static_cast<size_t>(ring_[j])];
    if (c < 0) c = -c;
  }
}

int32_t Sampler::sample(std::span<const float> logits) {
  NEXUS_CHECK(static_cast<int64_t>(logits.size()) == n_vocab_,
              "[sampler] expected " + std::to_string(n_vocab_) + " logits, got " +
                  std::to_string(logits.size()));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // Copy, check and take each block's max in one pass; the bad id is looked up only on failure.
  // The penalties work on a copy; without them the chain reads the caller's logits in place
  // (writing a vocabulary-sized copy costs more than reading it: it is cold after the weights'
  // stream of a decode step).
  const bool penalize = penalties_active();
  cur_ = penalize ? logits_.data() : logits.data();
  if (!copy_block_max(logits.data(), penalize ? logits_.data() : nullptr, n_vocab_,
                      block_max_.data())) {
    size_t i = 0;
    while (logits[i] < kInf) ++i;  // false for NaN and +inf
    throw Error("[sampler] logit of token " + std::to_string(i) + " is " +
                (std::isnan(logits[i]) ? "NaN" : "+inf"));
  }
  if (penalize) {
    apply_penalties(logits_);
    // A penalty may raise a logit (repeat_penalty < 1, negative frequency or presence penalty):
    // keep its block's bound above it. Lowered ones leave a loose but valid bound.
    for (size_t j = 0; j < ring_size_; ++j) {
      const auto id = static_cast<size_t>(ring_[j]);
      float& bound = block_max_[id / kBlockMaxEntries];
      bound = std::max(bound, cur_[id]);
    }
  }

  if (params_.temperature <= 0.0f) {
    // Greedy: the first occurrence of the maximum, so ties go to the lowest id. Blocks whose
    // bound is not above the best so far cannot hold a later maximum.
    float mx = -kInf;
    size_t best = 0;
    const auto n = static_cast<size_t>(n_vocab_);
    for (size_t b = 0; b < block_max_.size(); ++b) {
      if (!(block_max_[b] > mx)) continue;
      const size_t end = std::min(n, (b + 1) * kBlockMaxEntries);
      for (size_t i = b * kBlockMaxEntries; i < end; ++i)
        if (cur_[i] > mx) mx = cur_[i], best = i;
    }
    NEXUS_CHECK(mx > -kInf, "[sampler] every logit is -inf, nothing to sample");
    cand_[0] = TokenProb{static_cast<int32_t>(best), mx, 1.0f};
    n_kept_ = 1;
    return static_cast<int32_t>(best);
  }

  size_t n = gather_candidates();
  softmax(n);
  n = top_p(n);
  n = min_p(n);
  return draw(n);
}

size_t Sampler::gather_candidates() {
  const auto n = static_cast<size_t>(n_vocab_);
  const int k = params_.top_k;
  if (k <= 0 || static_cast<size_t>(k) >= n) {
    for (size_t i = 0; i < n; ++i) cand_[i] = TokenProb{static_cast<int32_t>(i), cur_[i], 0.0f};
    n_sorted_ = 0;
    return n;
  }
  // Top-k by a bounded heap over the logits, O(n log k) and usually one compare per token. With
  // `higher` as the heap order the front is the worst kept entry. The heap's internal layout is
  // implementation-defined, but sort_heap under a strict total order gives the same sorted result
  // everywhere.
  const auto kk = static_cast<size_t>(k);
  TokenProb* heap = cand_.data();
  for (size_t i = 0; i < kk; ++i) {
    heap[i] = TokenProb{static_cast<int32_t>(i), cur_[i], 0.0f};
    std::push_heap(heap, heap + i + 1, higher);
  }
  // The rest block by block: a block whose bound is not above the worst kept logit holds nothing
  // that would enter (the bar only rises), so it is skipped whole.
  for (size_t i = kk; i < n;) {
    const size_t b = i / kBlockMaxEntries, end = std::min(n, (b + 1) * kBlockMaxEntries);
    if (!(block_max_[b] > heap[0].logit)) {
      i = end;
      continue;
    }
    for (; i < end; ++i) {
      if (cur_[i] <= heap[0].logit) continue;  // a tie loses too: it has the higher id
      std::pop_heap(heap, heap + kk, higher);
      heap[kk - 1] = TokenProb{static_cast<int32_t>(i), cur_[i], 0.0f};
      std::push_heap(heap, heap + kk, higher);
    }
  }
  std::sort_heap(heap, heap + kk, higher);
  n_sorted_ = kk;
  return kk;
}

void Sampler::softmax(size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, cand_[i].logit);
  NEXUS_CHECK(mx > -std::numeric_limits<float>::infinity(),
              "[sampler] every logit is -inf, nothing to sample");
  // Inputs are checked, but extreme penalties (repeat_penalty near 0) can still overflow.
  NEXUS_CHECK(mx < std::numeric_limits<float>::infinity(),
              "[sampler] a penalized logit overflowed to +inf (repeat_penalty " +
                  fmt_float(params_.repeat_penalty) + ")");
  // Subtracting the max keeps exp() in (0, 1]; -inf logits give exactly 0. Dividing (rather than
  // multiplying by 1/T) keeps the max term at exp(0) even for a denormal T. Sum in double so that
  // a 100k-entry vocabulary does not lose the small terms.
  const float t = params_.temperature;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float e = std::exp((cand_[i].logit - mx) / t);
    cand_[i].p = e;
    sum += e;
  }
  const double inv_sum = 1.0 / sum;  // sum >= 1: the max term is exp(0)
  for (size_t i = 0; i < n; ++i) cand_[i].p = static_cast<float>(cand_[i].p * inv_sum);
}

size_t Sampler::nucleus_front(size_t n) {
  // Buckets of the logits' distance below the max (in units of the temperature: equal steps of
  // log probability), the last one open-ended. Distance is monotonic in the logit, so the buckets
  // from the top down to any one hold exactly the leading entries of the sorted order.
  constexpr int kBuckets = 256;
  constexpr double kPerUnit = 8.0;  // buckets per unit of (max - logit) / T
  double mass[kBuckets] = {};
  float mx = cand_[0].logit;
  for (size_t i = 1; i < n; ++i) mx = std::max(mx, cand_[i].logit);
  const double scale = kPerUnit / params_.temperature;
  auto bucket = [&](float logit) {
    const double d = (static_cast<double>(mx) - logit) * scale;  // +inf for a -inf logit
    return d < kBuckets - 1 ? static_cast<int>(d) : kBuckets - 1;
  };
  for (size_t i = 0; i < n; ++i) mass[bucket(cand_[i].logit)] += cand_[i].p;
  // The bucket where the mass reaches top_p, and one more: summed in another order than the walk,
  // the mass may round to either side of the target near a bucket's end.
  double cum = 0.0;
  int last = 0;
  while (last < kBuckets - 1 && cum + mass[last] < params_.top_p) cum += mass[last++];
  last = std::min(kBuckets - 1, last + 1);
  if (last == kBuckets - 1) return 0;  // the open-ended bucket: no smaller set to sort
  const auto front = std::partition(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(n),
                                    [&](const TokenProb& c) { return bucket(c.logit) <= last; });
  std::sort(cand_.begin(), front, higher);
  return static_cast<size_t>(front - cand_.begin());
}

size_t Sampler::top_p(size_t n) {
  if (params_.top_p >= 1.0f) return n;
  // A large unsorted set (top-k off or large): bring the entries of the buckets that hold the
  // nucleus to the front, sorted, and walk them; they are the leading entries of the full order,
  // so the walk below stops where it would on the whole sorted set (or goes on lazily if not).
  if (n_sorted_ == 0 && n > kNucleusBucketsFrom) n_sorted_ = nucleus_front(n);
  // Walk the candidates in descending order, sorting lazily: the sorted prefix grows by doubling
  // with partial_sort over the unsorted rest, so a peaked distribution never sorts the vocabulary.
  const double target = params_.top_p;
  double cum = 0.0;
  size_t i = 0;
  size_t s = n_sorted_;
  for (;;) {
    for (; i < s; ++i) {
      cum += cand_[i].p;
      if (cum >= target) return i + 1;
    }
    if (s == n) return n;  // rounding kept the total just under top_p: keep everything
    const size_t grow = std::min(n, s == 0 ? size_t{64} : 2 * s);
    std::partial_sort(cand_.begin() + static_cast<ptrdiff_t>(s),
                      cand_.begin() + static_cast<ptrdiff_t>(grow),
                      cand_.begin() + static_cast<ptrdiff_t>(n), higher);
    s = grow;
    n_sorted_ = s;
  }
}

size_t Sampler::min_p(size_t n) {
  if (params_.min_p <= 0.0f) return n;
  float p_max = 0.0f;
  for (size_t i = 0; i < n; ++i) p_max = std::max(p_max, cand_[i].p);
  // Ratios are unchanged by renormalization, so the threshold can use the current probabilities.
  const float threshold = params_.min_p * p_max;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (cand_[i].p >= threshold) cand_[kept++] = cand_[i];  // stable: order stays deterministic
  }
  return kept;
}

int32_t Sampler::draw(size_t n) {
  // Renormalize the kept entries (the max-probability entry is always among them, so sum > 0).
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += cand_[i].p;
  const double inv_sum = 1.0 / sum;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cand_[i].p = static_cast<float>(cand_[i].p * inv_sum);
    total += cand_[i].p;
  }
  n_kept_ = n;
  // Inverse CDF over the kept entries in their (deterministic) order. One draw per call.
  const double target = rng_.next_double() * total;
  double cum = 0.0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    if (cand_[i].p <= 0.0f) continue;
    cum += cand_[i].p;
    last_nonzero = i;
    if (cum > target) return cand_[i].id;
  }
  return cand_[last_nonzero].id;  // only reachable through rounding
}

}  // namespace nexus
