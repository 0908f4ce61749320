// Sampler tests: RNG known answers, each chain stage against hand-computed values, the empirical
// distribution against softmax(logits / T), penalties, determinism and parameter validation.
#include "nexus/runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "nexus/core/rng.h"

namespace nexus {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Params with every truncation and penalty switched off.
SamplerParams plain(float temperature, uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// Probabilities {0.5, 0.2, 0.15, 0.1, 0.05} placed at ids {3, 0, 4, 1, 2}, as logits = log p.
std::vector<float> five_logits() {
  return {std::log(0.2f), std::log(0.1f), std::log(0.05f), std::log(0.5f), std::log(0.15f)};
}

// Kept ids of the last sample() call, sorted, and the probability of each id (0 if dropped).
std::set<int32_t> kept_ids(const Sampler& s) {
  std::set<int32_t> ids;
  for (const TokenProb& c : s.last_candidates()) ids.insert(c.id);
  return ids;
}
// Token ids by descending logit, ties by ascending id (the sampler's order).
std::vector<int32_t> sorted_ids(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  return order;
}
float kept_p(const Sampler& s, int32_t id) {
  for (const TokenProb& c : s.last_candidates()) {
    if (c.id == id) return c.p;
  }
  return 0.0f;
}

TEST(Rng, KnownAnswers) {
  // Published vectors: xoshiro256starstar.c from state {1, 2, 3, 4} (as in the rand_xoshiro
  // crate's tests) and splitmix64 from 1234567 (Rosetta Code); the seed-42 values come from an
  // independent Python implementation that reproduces both.
  Xoshiro256 x({1, 2, 3, 4});
  const uint64_t want[] = {11520ull,
                           0ull,
                           1509978240ull,
                           1215971899390074240ull,
                           1216172134540287360ull,
                           607988272756665600ull,
                           16172922978634559625ull,
                           8476171486693032832ull,
                           10595114339597558777ull,
                           2904607092377533576ull};
  for (uint64_t w : want) EXPECT_EQ(x.next_u64(), w);
  uint64_t sm = 1234567;
  EXPECT_EQ(splitmix64(sm), 6457827717110365317ull);
  EXPECT_EQ(splitmix64(sm), 3203168211198807973ull);
  EXPECT_EQ(splitmix64(sm), 9817491932198370423ull);
  // Seeding through splitmix64 and the 53-bit double.
  Xoshiro256 y(42);
  EXPECT_EQ(y.next_u64(), 1546998764402558742ull);
  EXPECT_EQ(y.next_double(), 0.3789802506626686);
  y.reseed(42);
  EXPECT_EQ(y.next_u64(), 1546998764402558742ull);
}

TEST(Sampler, GreedyArgmaxTiesGoToLowestId) {
  Sampler s(plain(0.0f), 5);
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, kNegInf};
  EXPECT_EQ(s.sample(logits), 1);
  ASSERT_EQ(s.last_candidates().size(), 1u);
  EXPECT_EQ(s.last_candidates()[0].p, 1.0f);
  Sampler neg(plain(-1.0f), 5);
  EXPECT_EQ(neg.sample(logits), 1);
  EXPECT_EQ(neg.sample(std::vector<float>{kNegInf, kNegInf, -5.0f, kNegInf, -5.0f}), 2);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const int64_t n = 97;
  SamplerParams p = plain(1.3f, 7);
  p.top_k = 1;
  Sampler topk(p, n);
  Sampler greedy(plain(0.0f), n);
  Xoshiro256 gen(3);
  std::vector<float> logits(n);
  for (int trial = 0; trial < 200; ++trial) {
    // Integer logits in [0, 6): ties for the maximum are common.
    for (float& x : logits) x = static_cast<float>(gen.next_u64() % 6);
    EXPECT_EQ(topk.sample(logits), greedy.sample(logits)) << "trial " << trial;
  }
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplerParams p = plain(1.0f);
  p.top_k = 2;
  Sampler s(p, 5);
  s.sample(five_logits());
  EXPECT_EQ(kept_ids(s), (std::set<int32_t>{3, 0}));
  EXPECT_NEAR(kept_p(s, 3), 0.5 / 0.7, 1e-6);
  EXPECT_NEAR(kept_p(s, 0), 0.2 / 0.7, 1e-6);
}

TEST(Sampler, TopKMatchesFullSortWithTies) {
  // Integer logits in [0, 8) over 500 tokens: many ties at the k-th place, which go to the lowest
  // ids, exactly as a full sort by (logit desc, id asc) would choose.
  const int64_t n = 500;
  Xoshiro256 gen(9);
  std::vector<float> logits(n);
  for (int k : {1, 7, 40, 499, 500, 1000}) {
    for (float& x : logits) x = static_cast<float>(gen.next_u64() % 8);
    SamplerParams p = plain(1.0f);
    p.top_k = k;
    Sampler s(p, n);
    s.sample(logits);
    std::vector<int32_t> order = sorted_ids(logits);
    order.resize(std::min<size_t>(order.size(), static_cast<size_t>(k)));
    EXPECT_EQ(kept_ids(s), std::set<int32_t>(order.begin(), order.end())) << "k " << k;
  }
}

TEST(Sampler, TopPKeepsMinimalPrefixReachingP) {
  // Sorted probabilities 0.5, 0.2, 0.15, 0.1, 0.05; cumulative 0.5, 0.7, 0.85, 0.95, 1.0.
  struct Case {
    float top_p;
    std::set<int32_t> ids;
  };
  const Case cases[] = {{0.4f, {3}}, {0.6f, {3, 0}}, {0.8f, {3, 0, 4}}, {0.9f, {3, 0, 4, 1}}};
  for (const Case& c : cases) {
    SamplerParams p = plain(1.0f);
    p.top_p = c.top_p;
    Sampler s(p, 5);
    for (int i = 0; i < 500; ++i) {
      const int32_t id = s.sample(five_logits());
      ASSERT_TRUE(c.ids.count(id)) << "top_p " << c.top_p << " drew " << id;
    }
    EXPECT_EQ(kept_ids(s), c.ids) << "top_p " << c.top_p;
  }
  // top_p = 0.8 keeps {0.5, 0.2, 0.15}, renormalized by 0.85.
  SamplerParams p = plain(1.0f);
  p.top_p = 0.8f;
  Sampler s(p, 5);
  s.sample(five_logits());
  EXPECT_NEAR(kept_p(s, 3), 0.5 / 0.85, 1e-6);
  EXPECT_NEAR(kept_p(s, 0), 0.2 / 0.85, 1e-6);
  EXPECT_NEAR(kept_p(s, 4), 0.15 / 0.85, 1e-6);
}

TEST(Sampler, TopPOnLargeVocabularyMatchesFullSort) {
  // Flat-ish logits make the nucleus hold hundreds of tokens, so the lazy sort has to grow.
  const int64_t n = 3000;
  std::vector<float> logits(n);
  Xoshiro256 gen(11);
  for (float& x : logits) x = static_cast<float>(gen.next_double() * 4.0);
  logits[17] = logits[18];  // a tie
  for (float top_p : {0.3f, 0.7f, 0.95f}) {
    SamplerParams p = plain(0.9f);
    p.top_p = top_p;
    Sampler s(p, n);
    s.sample(logits);
    // Reference: full sort by (logit desc, id asc), softmax in double, minimal prefix.
    std::vector<int32_t> order(n);
    for (int32_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double z = 0.0;
    for (float x : logits) z += std::exp((x - logits[order[0]]) / 0.9);
    std::set<int32_t> want;
    double cum = 0.0;
    for (int32_t id : order) {
      want.insert(id);
      cum += std::exp((logits[id] - logits[order[0]]) / 0.9) / z;
      if (cum >= top_p) break;
    }
    EXPECT_EQ(kept_ids(s), want) << "top_p " << top_p;
  }
}

TEST(Sampler, TemperatureIsAppliedBeforeTopP) {
  // T = 0.5 squares the probabilities: {0.25, 0.04, 0.0225, 0.01, 0.0025} / 0.335
  // = {0.746, 0.119, 0.067, 0.030, 0.007}; top_p 0.8 now keeps two tokens instead of three.
  SamplerParams p = plain(0.5f);
  p.top_p = 0.8f;
  Sampler s(p, 5);
  s.sample(five_logits());
  EXPECT_EQ(kept_ids(s), (std::set<int32_t>{3, 0}));
  EXPECT_NEAR(kept_p(s, 3), 0.25 / 0.29, 1e-5);
}

TEST(Sampler, MinPThresholdIsFractionOfMaxProb) {
  // Max probability 0.5: min_p 0.25 → threshold 0.125 keeps {0.5, 0.2, 0.15};
  // min_p 0.35 → 0.175 keeps {0.5, 0.2}; min_p 0.45 → 0.225 keeps {0.5}.
  const std::pair<float, std::set<int32_t>> cases[] = {
      {0.25f, {3, 0, 4}}, {0.35f, {3, 0}}, {0.45f, {3}}, {0.0f, {0, 1, 2, 3, 4}}};
  for (const auto& [min_p, ids] : cases) {
    SamplerParams p = plain(1.0f);
    p.min_p = min_p;
    Sampler s(p, 5);
    s.sample(five_logits());
    EXPECT_EQ(kept_ids(s), ids) << "min_p " << min_p;
  }
  SamplerParams p = plain(1.0f);
  p.min_p = 0.25f;
  Sampler s(p, 5);
  s.sample(five_logits());
  EXPECT_NEAR(kept_p(s, 4), 0.15 / 0.85, 1e-6);
}

// Draws `n_draws` tokens and checks the counts against softmax(logits / T) computed in double:
// every count within 5 standard errors and Pearson's chi-square under the 1e-5 critical value.
// The seeds are fixed, so the test is deterministic; the strict level keeps a correct sampler from
// failing by bad luck (at the 0.1% level, seed 303 at T = 2.5 does: chi2 = 19.25), while a wrong
// temperature or a biased draw gives a chi-square in the hundreds.
void check_frequencies(const std::vector<float>& logits, float temperature, uint64_t seed) {
  const int n_draws = 20000;
  Sampler s(plain(temperature, seed), static_cast<int64_t>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n_draws; ++i) ++counts[static_cast<size_t>(s.sample(logits))];
  const double mx = *std::max_element(logits.begin(), logits.end());
  double z = 0.0;
  for (float x : logits) z += std::exp((x - mx) / temperature);
  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = std::exp((logits[i] - mx) / temperature) / z;
    const double expected = p * n_draws;
    const double se = std::sqrt(n_draws * p * (1.0 - p));
    EXPECT_LT(std::abs(counts[i] - expected), 5.0 * se) << "token " << i << " T " << temperature;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // Chi-square with 4 degrees of freedom: P(X > x) = exp(-x/2) (1 + x/2) = 1e-5 at x = 28.47.
  ASSERT_EQ(logits.size(), 5u);
  EXPECT_LT(chi2, 28.47) << "T " << temperature;
}

TEST(Sampler, EmpiricalFrequenciesMatchTemperatureSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  check_frequencies(logits, 1.0f, 101);
  check_frequencies(logits, 0.7f, 202);
  check_frequencies(logits, 2.5f, 303);
}

TEST(Sampler, NegativeInfinityLogitsAreNeverDrawn) {
  Sampler s(plain(1.0f), 4);
  const std::vector<float> logits = {0.0f, kNegInf, 0.0f, kNegInf};
  for (int i = 0; i < 1000; ++i) {
    const int32_t id = s.sample(logits);
    ASSERT_TRUE(id == 0 || id == 2) << id;
  }
}

TEST(Sampler, PenaltiesChangeExactlyTheExpectedLogits) {
  SamplerParams p = plain(1.0f);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p, 5);
  for (int32_t t : {0, 1, 0, 3}) s.accept(t);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
  s.apply_penalties(logits);
  // token 0: count 2, 2.0 > 0 → 2.0 / 2 = 1.0, minus 2 * 0.5 + 0.25 → -0.25
  // token 1: count 1, -1.0 <= 0 → -1.0 * 2 = -2.0, minus 0.5 + 0.25 → -2.75
  // token 3: count 1, 0.0 <= 0 → 0.0 * 2 = 0.0, minus 0.75 → -0.75; tokens 2 and 4 untouched.
  EXPECT_EQ(logits, (std::vector<float>{-0.25f, -2.75f, 0.5f, -0.75f, 3.0f}));
  // Applying again uses the same counts (the history is unchanged by apply_penalties).
  std::vector<float> again = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
  s.apply_penalties(again);
  EXPECT_EQ(again, logits);
  s.reset();
  std::vector<float> fresh = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
  s.apply_penalties(fresh);
  EXPECT_EQ(fresh, (std::vector<float>{2.0f, -1.0f, 0.5f, 0.0f, 3.0f}));
}

TEST(Sampler, PenaltyWindowIsTheLastNTokens) {
  SamplerParams p = plain(1.0f);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.repeat_last_n = 2;
  Sampler s(p, 5);
  for (int32_t t : {0, 1, 0, 3}) s.accept(t);  // window: {0, 3}
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 4.0f, 3.0f};
  s.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{0.0f, -1.0f, 0.5f, 1.0f, 3.0f}));
  s.accept(0);
  s.accept(0);  // window: {0, 0}; token 3 has left it
  logits = {2.0f, -1.0f, 0.5f, 4.0f, 3.0f};
  s.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{-1.0f, -1.0f, 0.5f, 4.0f, 3.0f}));

  p.repeat_last_n = 0;  // disabled
  Sampler off(p, 5);
  off.accept(0);
  logits = {2.0f, -1.0f, 0.5f, 4.0f, 3.0f};
  off.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.0f, 0.5f, 4.0f, 3.0f}));
}

TEST(Sampler, SampleAppliesPenaltiesFromHistory) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 1.1f;  // 2.0 / 1.1 = 1.82 < 1.9
  Sampler s(p, 2);
  const std::vector<float> logits = {2.0f, 1.9f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);
  EXPECT_EQ(s.sample(logits), 1);
  s.reset();
  EXPECT_EQ(s.sample(logits), 0);
}

std::vector<int32_t> draw_sequence(Sampler& s, int n) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(s.sample(logits));
    s.accept(out.back());
  }
  return out;
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  SamplerParams p;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, T 0.8
  p.repeat_penalty = 1.1f;
  p.seed = 1234;
  Sampler a(p, 50);
  Sampler b(p, 50);
  const std::vector<int32_t> seq_a = draw_sequence(a, 200);
  EXPECT_EQ(seq_a, draw_sequence(b, 200));
  a.reset();
  EXPECT_EQ(seq_a, draw_sequence(a, 200));
  p.seed = 1235;
  Sampler c(p, 50);
  EXPECT_NE(seq_a, draw_sequence(c, 200));
}

TEST(Sampler, BadLogitsThrowNamingTheToken) {
  Sampler s(plain(1.0f), 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  try {
    s.sample(std::vector<float>{0.0f, 1.0f, nan, 2.0f});
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 2 is NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.sample(std::vector<float>{0.0f, -kNegInf, 0.0f, 0.0f}), Error);
  EXPECT_THROW(s.sample(std::vector<float>(4, kNegInf)), Error);
  EXPECT_THROW(s.sample(std::vector<float>(3, 0.0f)), Error);
  EXPECT_THROW(s.accept(4), Error);
  EXPECT_THROW(s.accept(-1), Error);
  // A repeat_penalty near 0 can push a penalized logit to +inf; that is reported, not sampled.
  SamplerParams tiny = plain(1.0f);
  tiny.repeat_penalty = 1e-38f;
  Sampler t(tiny, 2);
  t.accept(0);
  EXPECT_THROW(t.sample(std::vector<float>{1000.0f, 0.0f}), Error);
  Sampler g(plain(0.0f), 2);
  EXPECT_THROW(g.sample(std::vector<float>{nan, 0.0f}), Error);
  EXPECT_THROW(g.sample(std::vector<float>(2, kNegInf)), Error);
}

TEST(Sampler, ValidateRejectsBadValues) {
  EXPECT_TRUE(validate(SamplerParams{}).is_ok());
  SamplerParams edge;
  edge.temperature = -1.0f;
  edge.top_p = 1.0f;
  edge.min_p = 0.0f;
  edge.top_k = -5;
  edge.repeat_last_n = 0;
  edge.frequency_penalty = -2.0f;
  EXPECT_TRUE(validate(edge).is_ok()) << validate(edge).message();

  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    void (*set)(SamplerParams&);
    const char* expect;
  };
  const Case cases[] = {
      {[](SamplerParams& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); },
       "temperature must be finite, got nan"},
      {[](SamplerParams& p) { p.temperature = std::numeric_limits<float>::infinity(); },
       "temperature must be finite, got inf"},
      {[](SamplerParams& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {[](SamplerParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplerParams& p) { p.min_p = -0.1f; }, "min_p must be in [0, 1], got -0.1"},
      {[](SamplerParams& p) { p.min_p = 2.0f; }, "min_p must be in [0, 1], got 2"},
      {[](SamplerParams& p) { p.repeat_penalty = 0.0f; }, "repeat_penalty must be finite and > 0"},
      {[](SamplerParams& p) { p.repeat_penalty = -1.0f; }, "got -1"},
      {[](SamplerParams& p) { p.repeat_last_n = -1; }, "repeat_last_n must be in [0, "},
      {[](SamplerParams& p) { p.frequency_penalty = -std::numeric_limits<float>::infinity(); },
       "frequency_penalty must be finite, got -inf"},
      {[](SamplerParams& p) { p.presence_penalty = std::numeric_limits<float>::quiet_NaN(); },
       "presence_penalty must be finite"},
  };
  for (const Case& c : cases) {
    SamplerParams p;
    c.set(p);
    Status st = validate(p);
    ASSERT_FALSE(st.is_ok()) << c.expect;
    EXPECT_NE(st.message().find(c.expect), std::string::npos) << st.message();
    EXPECT_THROW(Sampler(p, 10), Error) << c.expect;
  }
  SamplerParams nan_top_p;
  nan_top_p.top_p = nan;
  EXPECT_FALSE(validate(nan_top_p).is_ok());
  SamplerParams inf_penalty;
  inf_penalty.repeat_penalty = inf;
  EXPECT_FALSE(validate(inf_penalty).is_ok());
  EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
}

// Greedy and top-k skip whole blocks of 64 logits whose max cannot win; over a large vocabulary
// with its maximum and its ties in different blocks they choose what a full scan chooses.
TEST(Sampler, LargeVocabularyGreedyAndTopKMatchAFullScan) {
  const int64_t n = 10000;
  Xoshiro256 gen(21);
  std::vector<float> logits(n);
  for (int trial = 0; trial < 20; ++trial) {
    for (float& x : logits) x = static_cast<float>(gen.next_u64() % 1000) / 10.0f;
    if (trial % 2) logits[n - 1] = 200.0f;                    // the maximum in the last block
    if (trial % 3 == 0) logits[7000] = logits[300] = 150.0f;  // a tie across blocks
    const auto first_max = std::max_element(logits.begin(), logits.end()) - logits.begin();
    Sampler g(plain(0.0f), n);
    EXPECT_EQ(g.sample(logits), first_max) << "trial " << trial;
    SamplerParams p = plain(1.0f);
    p.top_k = 40;
    Sampler s(p, n);
    s.sample(logits);
    std::vector<int32_t> order = sorted_ids(logits);
    order.resize(40);
    EXPECT_EQ(kept_ids(s), std::set<int32_t>(order.begin(), order.end())) << "trial " << trial;
  }
}

// A penalty below 1 raises a logit: a token in a block of low logits that the penalty lifts
// above everything is still found (its block's bound is raised with it).
TEST(Sampler, PenaltyThatRaisesALogitIsSeenByGreedyAndTopK) {
  const int64_t n = 1000;
  std::vector<float> logits(n, 1.0f);
  for (int64_t i = 512; i < 576; ++i) logits[i] = -5.0f;  // block 8: all low
  logits[520] = 0.9f;
  logits[100] = 1.5f;
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 0.25f;  // 0.9 / 0.25 = 3.6 > 1.5
  p.repeat_last_n = 8;
  Sampler g(p, n);
  g.accept(520);
  EXPECT_EQ(g.sample(logits), 520);
  p.temperature = 1.0f;
  p.top_k = 1;
  Sampler s(p, n);
  s.accept(520);
  EXPECT_EQ(s.sample(logits), 520);
}

// With top-k off, top-p first sorts only the buckets of logits that hold the nucleus (from 1,024
// candidates on). Over peaked, flat and tied distributions the kept entries are exactly the
// reference's and come in the full sort's order (which fixes the draw).
TEST(Sampler, TopPBucketsMatchTheFullSortOrder) {
  const int64_t n = 20000;
  Xoshiro256 gen(31);
  std::vector<float> logits(n);
  for (int shape = 0; shape < 4; ++shape) {
    for (float& x : logits) {
      const double u = gen.next_double();
      x = shape == 0   ? static_cast<float>(u * 2.0)                           // flat
          : shape == 1 ? static_cast<float>(std::pow(u, 8.0) * 30.0)           // a few high
          : shape == 2 ? static_cast<float>(static_cast<int>(u * 6.0))         // six tied levels
                       : static_cast<float>(-std::log(-std::log(u + 1e-12)));  // Gumbel-like
    }
    if (shape == 3) logits[n / 2] = -std::numeric_limits<float>::infinity();
    for (float temp : {0.5f, 1.0f, 2.0f}) {
      for (float top_p : {0.2f, 0.9f, 0.99f}) {
        SamplerParams p = plain(temp);
        p.top_p = top_p;
        Sampler s(p, n);
        s.sample(logits);
        const std::vector<int32_t> order = sorted_ids(logits);
        double z = 0.0;
        for (float x : logits) z += std::exp((static_cast<double>(x) - logits[order[0]]) / temp);
        std::vector<int32_t> want;
        double cum = 0.0;
        for (int32_t id : order) {
          want.push_back(id);
          cum += std::exp((static_cast<double>(logits[id]) - logits[order[0]]) / temp) / z;
          if (cum >= top_p) break;
        }
        std::vector<int32_t> got;
        for (const TokenProb& c : s.last_candidates()) got.push_back(c.id);
        // The reference sums in double from exact exponentials; the sampler's float
        // probabilities may end the nucleus one entry to either side.
        const size_t m = std::min(got.size(), want.size());
        EXPECT_LE(std::max(got.size(), want.size()) - m, 1u)
            << "shape " << shape << " T " << temp << " top_p " << top_p;
        for (size_t i = 0; i < m; ++i)
          ASSERT_EQ(got[i], want[i])
              << "entry " << i << " shape " << shape << " T " << temp << " top_p " << top_p;
      }
    }
  }
}

}  // namespace
}  // namespace nexus
