// Token sampling: repetition/frequency/presence penalties, then top-k, temperature softmax, top-p,
// min-p and a seeded draw (llama.cpp's chain order). Deterministic across platforms for a given
// seed; no allocation after construction. See docs/SAMPLING.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nexus/status.h"
#include "nexus/core/rng.h"

namespace nexus {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0 → greedy (argmax of the penalized logits, ties → lowest id)
  int top_k = 40;            // keep the k most likely tokens; <= 0 → disabled
  float top_p = 0.95f;       // keep the smallest prefix with mass >= top_p; >= 1 → disabled
  float min_p = 0.05f;       // drop tokens with p < min_p * max p; <= 0 → disabled
  float repeat_penalty = 1.0f;     // llama.cpp: logit > 0 → logit / penalty, else logit * penalty
  int repeat_last_n = 64;          // how many recent tokens the penalties look at; 0 → none
  float frequency_penalty = 0.0f;  // OpenAI: logit -= count * frequency_penalty
  float presence_penalty = 0.0f;   // OpenAI: logit -= (count > 0) * presence_penalty
  uint64_t seed = 0;               // same seed → same sequence of choices
};

// Largest accepted repeat_last_n (the history ring is allocated up front).
inline constexpr int kMaxRepeatLastN = 1 << 20;

// Checks every field: temperature finite; top_p in (0, 1]; min_p in [0, 1]; repeat_penalty finite
// and > 0; frequency/presence penalties finite; repeat_last_n in [0, kMaxRepeatLastN]. The error
// names the field and the value, e.g. "[sampler] top_p must be in (0, 1], got 1.5".
Status validate(const SamplerParams& p);

// One entry of the distribution a sample() call drew from.
struct TokenProb {
  int32_t id;
  float logit;  // after penalties, before temperature
  float p;      // probability after the whole chain (the kept entries sum to 1)
};

// Samples token ids from logits. Not thread-safe; use one Sampler per sequence.
class Sampler {
 public:
  // Throws nexus::Error when validate(p) fails or n_vocab is not in [1, INT32_MAX].
  Sampler(const SamplerParams& p, int64_t n_vocab);

  // Applies the penalties from the history, then the chain, and returns the chosen id. Draws
  // exactly one random number per call unless greedy (temperature <= 0), so the choice at step i
  // depends only on the seed, i and the inputs. Does not record the token: call accept() with it.
  // Throws nexus::Error when logits.size() != n_vocab, a logit is NaN or +inf (the message names
  // the token id), or every logit is -inf.
  int32_t sample(std::span<const float> logits);

  // Records a token (prompt or generated) in the penalty history; only the last repeat_last_n
  // are kept. Throws nexus::Error for an id outside [0, n_vocab).
  void accept(int32_t token);

  // Clears the history and restarts the random stream from the seed.
  void reset();

  // Applies the repetition, frequency and presence penalties for the current history to
  // `logits` (n_vocab entries) in place; each distinct token in the window is penalized once,
  // using its count in the window. sample() calls this on its own copy of the logits.
  void apply_penalties(std::span<float> logits);

  // The distribution the last sample() drew from (greedy: the chosen token with p = 1), in an
  // unspecified but deterministic order. Valid until the next sample() or reset().
  std::span<const TokenProb> last_candidates() const {
    return std::span<const TokenProb>(cand_.data(), n_kept_);
  }

  const SamplerParams& params() const { return params_; }
  int64_t n_vocab() const { return n_vocab_; }

 private:
  bool penalties_active() const;
  // Fills cand_ from cur_: the top_k best, sorted, when top-k is active, else every token in id
  // order. Returns the count.
  size_t gather_candidates();
  // Chain stages over cand_[0, n). Each returns the new count.
  void softmax(size_t n);
  size_t top_p(size_t n);
  // top_p's first step for large unsorted sets: moves every entry whose logit is within the
  // buckets that hold the top_p mass (plus one) to the front, sorted, and returns their count
  // (0 when that would be nearly everything; nothing is moved then).
  size_t nucleus_front(size_t n);
  static constexpr size_t kNucleusBucketsFrom = 1024;
  size_t min_p(size_t n);
  int32_t draw(size_t n);

  SamplerParams params_;
  int64_t n_vocab_;
  Xoshiro256 rng_;
  std::vector<float> logits_;   // penalized copy of the input (when penalties are active)
  const float* cur_ = nullptr;  // the logits of the sample() call: the input or logits_
  // An upper bound of each kBlockMaxEntries-entry block of cur_ (its max before the penalties,
  // raised where a penalty raised a logit): whole blocks under the bar are skipped by greedy and
  // top-k.
  std::vector<float> block_max_;
  std::vector<TokenProb> cand_;  // candidates, compacted stage by stage
  size_t n_kept_ = 0;            // entries of cand_ after the last sample()
  size_t n_sorted_ = 0;          // cand_[0, n_sorted_) is in descending order and holds the top
  std::vector<int32_t> ring_;    // last repeat_last_n accepted tokens, circular
  size_t ring_head_ = 0;         // next slot to write
  size_t ring_size_ = 0;         // filled slots
  std::vector<int32_t> counts_;  // occurrences of each id in ring_
};

}  // namespace nexus
