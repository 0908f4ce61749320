// runtime/perplexity against the PyTorch reference logits of the golden fixtures (the expected
// negative log-likelihoods are computed here from PyTorch's logits, not from nexus's), its
// chunking and BOS rule, and its errors.
#include "nexus/runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "golden/reference_logits.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "test_paths.h"

namespace nexus {
namespace {

struct Fixture {
  std::unique_ptr<Model> model;
  test::Reference ref;
};

Fixture load_fixture(const std::string& name) {
  Fixture f;
  const std::string dir = test::fixtures_dir() + "/models/" + name;
  auto m = Model::load(dir + ".gguf");
  EXPECT_TRUE(m) << m.status().message();
  if (m) f.model = std::move(m).value();
  auto r = test::read_reference(dir + ".logits.bin");
  EXPECT_TRUE(r) << r.status().message();
  if (r) f.ref = std::move(r).value();
  return f;
}

std::unique_ptr<Context> make_context(const Model& m, int64_t n_ctx, int64_t max_batch) {
  ContextOptions o;
  o.n_ctx = n_ctx;
  o.kv_type = DType::kF32;
  o.n_threads = 2;
  o.max_batch = max_batch;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  return ctx ? std::move(ctx).value() : nullptr;
}

PerplexityOptions chunks_of(int64_t n_ctx, int64_t n_batch) {
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  return o;
}

// Mean NLL of the second half of sequence `seq` from PyTorch's logits, in double precision.
double reference_mean_nll(const test::Reference& ref, int seq, int64_t n) {
  const int64_t first = n / 2;
  double sum = 0;
  for (int64_t j = first; j < n - 1; ++j) {
    const auto row = ref.row(seq, static_cast<int>(j));
    double mx = row[0];
    for (float v : row) mx = std::max<double>(mx, v);
    double z = 0;
    for (float v : row) z += std::exp(v - mx);
    sum += std::log(z) + mx - row[static_cast<size_t>(ref.tokens[seq][j + 1])];
  }
  return sum / static_cast<double>(n - 1 - first);
}

TEST(Perplexity, MatchesTheReferenceLogitsOfEveryFixture) {
  for (const char* name : {"llama_gqa_tied", "qwen2", "qwen3", "gpt2"}) {
    Fixture f = load_fixture(name);
    ASSERT_TRUE(f.model);
    for (int seq = 0; seq < static_cast<int>(f.ref.tokens.size()); ++seq) {
      const std::vector<int32_t>& toks = f.ref.tokens[seq];
      const auto n = static_cast<int64_t>(toks.size());
      ASSERT_GE(n, 4) << name;
      // Batches of 3 tokens: the scored rows are spread over several decode() calls.
      for (int64_t batch : {n, int64_t{3}}) {
        auto ctx = make_context(*f.model, n, batch);
        ASSERT_TRUE(ctx);
        auto r = perplexity(*ctx, toks, chunks_of(n, batch));
        ASSERT_TRUE(r) << r.status().message();
        const double want = reference_mean_nll(f.ref, seq, n);
        EXPECT_NEAR(r->mean_nll, want, 1e-4) << name << " seq " << seq << " batch " << batch;
        EXPECT_NEAR(r->ppl, std::exp(want), 1e-4 * std::exp(want)) << name;
        EXPECT_EQ(r->n_chunks, 1);
        EXPECT_EQ(r->n_scored, n - 1 - n / 2);
      }
    }
  }
}

// Two copies of a sequence are two equal chunks (each from an empty cache), a partial chunk at
// the end is left out, max_chunks stops early, and the standard error follows the per-token
// spread (zero for one token).
TEST(Perplexity, ChunksStartFromAnEmptyCache) {
  Fixture f = load_fixture("qwen3");
  ASSERT_TRUE(f.model);
  const std::vector<int32_t>& toks = f.ref.tokens[0];
  const auto n = static_cast<int64_t>(toks.size());
  std::vector<int32_t> text = toks;
  text.insert(text.end(), toks.begin(), toks.end());
  text.insert(text.end(), toks.begin(), toks.begin() + n / 2);  // not a whole chunk
  auto ctx = make_context(*f.model, n, n);
  ASSERT_TRUE(ctx);
  PerplexityOptions o = chunks_of(n, n);
  std::vector<double> progress;
  auto two = perplexity(*ctx, text, o, [&](int64_t c, const PerplexityResult& so_far) {
    EXPECT_EQ(c, static_cast<int64_t>(progress.size()));
    progress.push_back(so_far.ppl);
  });
  ASSERT_TRUE(two) << two.status().message();
  EXPECT_EQ(two->n_chunks, 2);
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_NEAR(progress[0], progress[1], 1e-9 * progress[0]);
  const double want = reference_mean_nll(f.ref, 0, n);
  EXPECT_NEAR(two->mean_nll, want, 1e-4);
  o.max_chunks = 1;
  auto one = perplexity(*ctx, text, o);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->n_chunks, 1);
  EXPECT_EQ(one->n_scored, two->n_scored / 2);
  EXPECT_GT(one->nll_stderr, 0.0);
  EXPECT_NEAR(one->ppl_stderr, one->ppl * one->nll_stderr, 1e-12);
}

// With a BOS id, the first token of each chunk is replaced: a chunk of a text whose first token
// differs scores exactly as the reference sequence once that token is overwritten.
TEST(Perplexity, BosReplacesEachChunksFirstToken) {
  Fixture f = load_fixture("qwen3");
  ASSERT_TRUE(f.model);
  std::vector<int32_t> toks = f.ref.tokens[0];
  const auto n = static_cast<int64_t>(toks.size());
  const int32_t first = toks[0];
  toks[0] = (first + 1) % f.ref.n_vocab;
  auto ctx = make_context(*f.model, n, n);
  ASSERT_TRUE(ctx);
  PerplexityOptions o = chunks_of(n, n);
  auto changed = perplexity(*ctx, toks, o);
  o.bos = first;
  auto restored = perplexity(*ctx, toks, o);
  ASSERT_TRUE(changed && restored);
  const double want = reference_mean_nll(f.ref, 0, n);
  EXPECT_NEAR(restored->mean_nll, want, 1e-4);
  EXPECT_GT(std::fabs(changed->mean_nll - want), 1e-4) << "the first token should matter";
}

TEST(Perplexity, RejectsBadInput) {
  Fixture f = load_fixture("qwen3");
  ASSERT_TRUE(f.model);
  auto ctx = make_context(*f.model, 16, 8);
  ASSERT_TRUE(ctx);
  const std::vector<int32_t> text(40, 5);
  auto expect_error = [&](const PerplexityOptions& o, std::span<const int32_t> t,
                          const std::string& part) {
    auto r = perplexity(*ctx, t, o);
    ASSERT_FALSE(r) << part;
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  };
  const PerplexityOptions o = chunks_of(16, 8);
  expect_error(o, std::span<const int32_t>(text).first(10), "fewer than one chunk of 16");
  PerplexityOptions big = o;
  big.n_ctx = 32;
  expect_error(big, text, "chunk size 32 must be 4 to 16");
  PerplexityOptions tiny = o;
  tiny.n_ctx = 2;
  expect_error(tiny, text, "chunk size 2");
  PerplexityOptions batch = o;
  batch.n_batch = 9;
  expect_error(batch, text, "batch size 9 must be 1 to 8");
  std::vector<int32_t> bad = text;
  bad[17] = f.ref.n_vocab;
  expect_error(o, bad, "token id " + std::to_string(f.ref.n_vocab) + " is outside");
  PerplexityOptions bos = o;
  bos.bos = f.ref.n_vocab + 3;
  expect_error(bos, text, "BOS id");
}

}  // namespace
}  // namespace nexus
