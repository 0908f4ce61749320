// The serving engine against `generate()` (the loop `nexus run` uses) on the real stories260K
// model: greedy outputs of requests batched together, with prompts cut into chunks, and with the
// KV pool too small for all of them (preemption), equal each request's output alone.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/runtime/generator.h"
#include "nexus/serve/engine.h"
#include "nexus/tokenizer.h"
#include "test_paths.h"

namespace nexus::serve {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load(const std::string& path = test::shared_path(kModel)) {
  Loaded l;
  auto m = Model::load(path);
  EXPECT_TRUE(m) << m.status().message();
  l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(l.model->gguf());
  EXPECT_TRUE(t);
  l.tok = std::move(t).value();
  return l;
}

const std::vector<std::string> kPrompts = {
    "Once upon a time", "The little dog", "Lily and Ben went to the park to play with a big red ball",
    "One day"};

// The tokens generate() makes for `prompt` alone, greedily.
std::vector<int32_t> alone(const Loaded& l, const std::string& prompt, int64_t n,
                           int64_t n_ctx = 256) {
  ContextOptions co;
  co.n_ctx = n_ctx;
  auto ctx = Context::create(*l.model, co);
  EXPECT_TRUE(ctx);
  GenerateOptions g;
  g.sampler.temperature = 0.0f;
  g.n_predict = n;
  auto r = generate(**ctx, *l.tok, prompt, g, [](std::string_view) { return true; });
  EXPECT_TRUE(r) << r.status().message();
  return r->tokens;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  Event finish;
};

Outcome collect(Stream& s) {
  Outcome o;
  Event e;
  for (;;) {
    if (!s.next(&e, std::chrono::milliseconds(10000))) {
      ADD_FAILURE() << "no event within 10 s";
      return o;
    }
    o.text += e.text;
    if (e.kind == Event::Kind::kFinish) {
      o.finish = e;
      return o;
    }
    o.tokens.push_back(e.token);
  }
}

GenRequest greedy(const Loaded& l, const std::string& prompt, int64_t n) {
  GenRequest r;
  r.prompt = l.tok->encode(prompt, true);
  r.sampler.temperature = 0.0f;
  r.max_tokens = n;
  return r;
}

void expect_batched_equals_alone(const EngineOptions& eo, int64_t n, uint64_t* preemptions) {
  const Loaded l = load();
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::shared_ptr<Stream>> streams;
  for (const std::string& p : kPrompts) {
    Refusal why;
    std::string msg;
    streams.push_back((*engine)->submit(greedy(l, p, n), &why, &msg));
    ASSERT_TRUE(streams.back()) << msg;
  }
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const Outcome o = collect(*streams[i]);
    EXPECT_EQ(o.finish.finish_reason, "length") << o.finish.error;
    EXPECT_EQ(o.tokens, alone(l, kPrompts[i], n)) << "prompt " << i << ": " << o.text;
    EXPECT_EQ(o.finish.completion_tokens, n);
    std::string pieces;
    for (int32_t id : o.tokens) pieces += l.tok->token_to_piece(id);
    EXPECT_EQ(o.text, pieces);
  }
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.generated_tokens, kPrompts.size() * n);
  if (preemptions) *preemptions = st.preemptions;
}

TEST(ServeEngine, BatchedGreedyOutputEqualsEachRequestAlone) {
  NEXUS_REQUIRE_SHARED(kModel);
  EngineOptions eo;
  eo.max_seqs = 4;
  eo.n_ctx = 256;
  eo.max_batch_tokens = 64;
  eo.prefill_chunk = 7;  // prompts advance 7 tokens a step beside the decoding ones
  expect_batched_equals_alone(eo, 40, nullptr);
}

TEST(ServeEngine, ChunkedPrefillAndFewSlotsGiveTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  EngineOptions eo;
  eo.max_seqs = 2;          // two requests wait for a slot
  eo.n_ctx = 256;
  eo.max_batch_tokens = 5;  // prompts go in chunks beside the others' decode tokens
  expect_batched_equals_alone(eo, 30, nullptr);
}

TEST(ServeEngine, APoolTooSmallForAllPreemptsAndStillGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  const ModelConfig& c = l.model->config();
  EngineOptions eo;
  eo.max_seqs = 4;
  eo.n_ctx = 256;
  eo.kv_block = 8;
  // Room for 12 blocks of 8 positions: each request needs up to 9 (a prompt of up to 17 tokens
  // and 48 generated), the four together about 30.
  const int64_t block = 2 * c.n_layers * eo.kv_block *
                        static_cast<int64_t>(row_bytes(eo.kv_type, c.n_kv_heads * c.head_dim));
  eo.kv_memory = 12 * block;
  uint64_t preemptions = 0;
  expect_batched_equals_alone(eo, 48, &preemptions);
  EXPECT_GT(preemptions, 0u);
}

TEST(ServeEngine, ARequestStartsFromACachedPrefixAndGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.kv_block = 8;
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  const std::string prefix = "Lily and Ben went to the park to play with a big red ball. ";
  const std::vector<std::string> prompts = {prefix + "They", prefix + "The sun", prefix};
  Refusal why;
  std::string msg;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = (*engine)->submit(greedy(l, prompts[i], 16), &why, &msg);
    ASSERT_TRUE(s) << msg;
    const Outcome o = collect(*s);
    EXPECT_EQ(o.tokens, alone(l, prompts[i], 16)) << prompts[i];
    const EngineStats st = (*engine)->stats();
    EXPECT_EQ(st.prefix_hits, i) << "request " << i;
  }
  // The shared part is the common prompt prefix (its full blocks and the partial last one).
  const int64_t common = static_cast<int64_t>(l.tok->encode(prefix, true).size());
  EXPECT_GE((*engine)->stats().prefix_tokens, static_cast<uint64_t>(2 * (common - 1)));
  EngineOptions off = eo;
  off.prefix_cache = 0;
  auto plain = Engine::create(*l.model, *l.tok, off);
  ASSERT_TRUE(plain);
  for (const std::string& p : prompts) collect(*(*plain)->submit(greedy(l, p, 4), &why, &msg));
  EXPECT_EQ((*plain)->stats().prefix_hits, 0u);
}

// Requests that arrive together with one long prefix while another request decodes: the first
// computes the prefix (its whole prompt fits the step's prompt budget), the others wait for it
// rather than compute it beside it in the same step, and start from its blocks with the same
// output.
TEST(ServeEngine, ABurstWithOnePrefixComputesItOnce) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.kv_block = 8;
  eo.prefill_chunk = 96;  // room for the first prompt and part of the next in one step
  const std::string prefix =
      "Lily and Ben went to the park to play with a big red ball. They ran and laughed all day "
      "long, and then they sat under a tall tree. ";
  const std::vector<std::string> prompts = {prefix + "They", prefix + "The sun", prefix + "Mom"};
  const int64_t common = static_cast<int64_t>(l.tok->encode(prefix, true).size());
  ASSERT_GE(common, 4 * eo.kv_block);
  ASSERT_LT(common + 4, eo.prefill_chunk);
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  Refusal why;
  std::string msg;
  auto busy = (*engine)->submit(greedy(l, "One day", 120), &why, &msg);
  ASSERT_TRUE(busy) << msg;
  Event first;
  ASSERT_TRUE(busy->next(&first, std::chrono::milliseconds(10000)));  // it is decoding
  std::vector<std::shared_ptr<Stream>> streams;
  for (const std::string& p : prompts) streams.push_back((*engine)->submit(greedy(l, p, 12), &why, &msg));
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(collect(*streams[i]).tokens, alone(l, prompts[i], 12)) << prompts[i];
  collect(*busy);
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.prefix_hits, 2u);
  EXPECT_GE(st.prefix_tokens, static_cast<uint64_t>(2 * (common - 1)));
}

// The demo hybrid (Mamba-2 and attention layers): requests that share a long prompt prefix with
// a finished one start from its state snapshot at the latest multiple of the interval within the
// prefix (and the KV blocks before it) and give generate()'s output.
TEST(ServeEngine, AHybridStartsFromAStateSnapshotOfASharedPrefix) {
  const Loaded l = load(std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-hybrid-1m.gguf");
  ASSERT_TRUE(l.model->config().hybrid());
  std::string prefix;
  for (int i = 0; i < 12; ++i) prefix += "KING RICHARD: Now is the winter of our discontent. ";
  const int64_t common = static_cast<int64_t>(l.tok->encode(prefix, true).size());
  ASSERT_GT(common, 130);
  ASSERT_LT(common, 500);
  const std::vector<std::string> prompts = {prefix + "GLOUCESTER:", prefix + "QUEEN:",
                                            prefix + "DUKE OF YORK: My lord"};
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.state_interval = 64;
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine) << engine.status().message();
  Refusal why;
  std::string msg;
  // One request, then two at once: both start from the first one's snapshots.
  auto first = (*engine)->submit(greedy(l, prompts[0], 12), &why, &msg);
  ASSERT_TRUE(first) << msg;
  EXPECT_EQ(collect(*first).tokens, alone(l, prompts[0], 12, 512));
  EXPECT_GT((*engine)->stats().state_snapshot_bytes, 0);
  std::vector<std::shared_ptr<Stream>> streams;
  for (size_t i = 1; i < prompts.size(); ++i)
    streams.push_back((*engine)->submit(greedy(l, prompts[i], 12), &why, &msg));
  for (size_t i = 1; i < prompts.size(); ++i)
    EXPECT_EQ(collect(*streams[i - 1]).tokens, alone(l, prompts[i], 12, 512)) << prompts[i];
  const EngineStats st = (*engine)->stats();
  EXPECT_EQ(st.prefix_hits, 2u);
  EXPECT_EQ(st.state_restores, 2u);
  const uint64_t at_snapshot = static_cast<uint64_t>((common - 1) / 64 * 64);
  EXPECT_GE(st.prefix_tokens, 2 * at_snapshot);

  // Without snapshots only whole states are shared: none of these prompts continues another.
  EngineOptions off = eo;
  off.state_snapshots = 0;
  auto plain = Engine::create(*l.model, *l.tok, off);
  ASSERT_TRUE(plain);
  for (const std::string& p : prompts) collect(*(*plain)->submit(greedy(l, p, 4), &why, &msg));
  EXPECT_EQ((*plain)->stats().prefix_hits, 0u);
  EXPECT_EQ((*plain)->stats().state_snapshot_bytes, 0);
  // An interval off the KV block grid is refused by name.
  EngineOptions odd = eo;
  odd.state_interval = 100;
  auto bad = Engine::create(*l.model, *l.tok, odd);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("multiple of the KV block size"), std::string::npos);
}

// The hidden states decode() returns are what the output head projects: logits = hidden W^T.
// The embedding is their mean over the tokens, L2-normalised.
TEST(ServeEngine, EmbeddingsArePooledNormalisedHiddenStates) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  const ModelConfig& c = l.model->config();
  ContextOptions co;
  co.n_ctx = 64;
  auto ctx = Context::create(*l.model, co);
  ASSERT_TRUE(ctx);
  const std::vector<int32_t> ids = l.tok->encode("Lily and Ben went to the park", true);
  Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> hidden, logits;
  ASSERT_TRUE((*ctx)->decode(b, &hidden, Context::Output::kHidden));
  (*ctx)->clear_seq(0);
  ASSERT_TRUE((*ctx)->decode(b, &logits));
  ASSERT_EQ(hidden.size(), ids.size() * c.dim);
  const Tensor& out = l.model->weights().output;
  ASSERT_EQ(out.dtype(), DType::kF32);
  const float* w = out.data_as<const float>();
  for (size_t r = 0; r < ids.size(); ++r)
    for (int64_t v = 0; v < c.n_vocab; v += 37) {
      double dot = 0;
      for (int64_t d = 0; d < c.dim; ++d) dot += double(hidden[r * c.dim + d]) * w[v * c.dim + d];
      EXPECT_NEAR(logits[r * c.n_vocab + v], dot, 1e-3) << r << " " << v;
    }
  std::vector<double> mean(c.dim, 0.0);
  for (size_t r = 0; r < ids.size(); ++r)
    for (int64_t d = 0; d < c.dim; ++d) mean[d] += hidden[r * c.dim + d] / double(ids.size());
  double norm = 0;
  for (double m : mean) norm += m * m;
  norm = std::sqrt(norm);
  EngineOptions eo;
  eo.n_ctx = 64;
  eo.max_batch_tokens = 3;  // in chunks
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  auto e = (*engine)->embed(ids);
  ASSERT_TRUE(e) << e.status().message();
  ASSERT_EQ(e->size(), static_cast<size_t>(c.dim));
  for (int64_t d = 0; d < c.dim; ++d) EXPECT_NEAR((*e)[d], mean[d] / norm, 1e-5);
  EXPECT_FALSE((*engine)->embed({}));
  EXPECT_FALSE((*engine)->embed(std::vector<int32_t>(65, 1)));
}

// Prompt lookup speculation: drafts from earlier n-grams are verified in the same forward pass;
// greedy and seeded sampled outputs equal those decoded one token at a time.
TEST(ServeEngine, PromptLookupSpeculationGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.max_seqs = 2;
  EngineOptions spec = eo;
  spec.lookup_ngram = 2;
  spec.lookup_max = 6;
  auto plain = Engine::create(*l.model, *l.tok, eo);
  auto fast = Engine::create(*l.model, *l.tok, spec);
  ASSERT_TRUE(plain && fast);
  const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play";
  Refusal why;
  std::string msg;
  for (float temp : {0.0f, 0.9f}) {
    GenRequest r = greedy(l, prompt, 96);
    r.sampler.temperature = temp;
    r.sampler.seed = 17;
    const Outcome a = collect(*(*plain)->submit(r, &why, &msg));
    const Outcome b = collect(*(*fast)->submit(r, &why, &msg));
    EXPECT_EQ(a.tokens, b.tokens) << "temperature " << temp;
    EXPECT_EQ(a.text, b.text);
    if (temp == 0.0f) {
      EXPECT_EQ(b.tokens, alone(l, prompt, 96));
    }
  }
  const EngineStats st = (*fast)->stats();
  EXPECT_GT(st.spec_drafted, 0u);
  EXPECT_GT(st.spec_accepted, 0u);
  EXPECT_LT(st.steps, (*plain)->stats().steps);  // fewer forward passes for the same tokens
}

// A draft model proposes tokens verified in the target's pass. With the target as its own
// (greedy) draft, greedy decoding accepts every proposal and sampled decoding rejects many: either
// way the output is the target's alone, the same tokens for the same seed.
TEST(ServeEngine, DraftModelSpeculationGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  Refusal why;
  std::string msg;
  EngineOptions base;
  base.n_ctx = 256;
  base.max_seqs = 2;
  auto plain = Engine::create(*l.model, *l.tok, base);
  ASSERT_TRUE(plain);
  EngineOptions self = base;
  self.draft_model = l.model.get();
  self.draft_max = 4;
  auto spec = Engine::create(*l.model, *l.tok, self);
  ASSERT_TRUE(spec) << spec.status().message();
  for (float temp : {0.0f, 0.9f}) {
    GenRequest r = greedy(l, prompt, 80);
    r.sampler.temperature = temp;
    r.sampler.seed = 23;
    const Outcome a = collect(*(*plain)->submit(r, &why, &msg));
    const Outcome b = collect(*(*spec)->submit(r, &why, &msg));
    EXPECT_EQ(a.tokens, b.tokens) << "temperature " << temp;
  }
  const EngineStats st = (*spec)->stats();
  EXPECT_GT(st.spec_drafted, 0u);
  EXPECT_GT(st.spec_accepted, st.spec_drafted / 2);  // greedy: every draft stands
  EXPECT_LT(st.steps, (*plain)->stats().steps);
}

// generate() with a draft model (nexus run --draft): the target as its own draft, identical text.
TEST(ServeEngine, GenerateWithADraftModelGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  for (float temp : {0.0f, 0.9f}) {
    GenerateStats st[2];
    for (int k = 0; k < 2; ++k) {
      ContextOptions co;
      co.n_ctx = 256;
      co.max_batch = 16;
      auto ctx = Context::create(*l.model, co);
      auto dctx = Context::create(*l.model, co);
      ASSERT_TRUE(ctx && dctx);
      GenerateOptions g;
      g.sampler.temperature = temp;
      g.sampler.seed = 9;
      g.n_predict = 100;
      if (k) g.draft = dctx->get();
      auto r = generate(**ctx, *l.tok, "Once upon a time, there was a little girl named Lily.", g,
                        [](std::string_view) { return true; });
      ASSERT_TRUE(r) << r.status().message();
      st[k] = *r;
    }
    EXPECT_EQ(st[0].tokens, st[1].tokens) << "temperature " << temp;
    EXPECT_GT(st[1].accepted, 0);
    if (temp == 0.0f) {
      EXPECT_EQ(st[1].accepted, st[1].drafted);  // its own greedy draft stands
    }
  }
}

// The same speculation in generate() (nexus run --lookup-ngram): identical text, fewer calls.
TEST(ServeEngine, GenerateWithPromptLookupGivesTheSameOutput) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  for (float temp : {0.0f, 0.9f}) {
    GenerateStats st[2];
    std::string text[2];
    for (int k = 0; k < 2; ++k) {
      ContextOptions co;
      co.n_ctx = 256;
      co.max_batch = 64;
      auto ctx = Context::create(*l.model, co);
      ASSERT_TRUE(ctx);
      GenerateOptions g;
      g.sampler.temperature = temp;
      g.sampler.seed = 5;
      g.n_predict = 150;
      g.lookup_ngram = k ? 2 : 0;
      auto r = generate(**ctx, *l.tok, "Once upon a time, there was a little girl named Lily.", g,
                        [&](std::string_view s) {
                          text[k] += s;
                          return true;
                        });
      ASSERT_TRUE(r) << r.status().message();
      st[k] = *r;
    }
    EXPECT_EQ(st[0].tokens, st[1].tokens) << "temperature " << temp;
    EXPECT_EQ(text[0], text[1]);
    EXPECT_GT(st[1].accepted, 0);
    EXPECT_LT(st[1].decode_calls, st[0].decode_calls);
  }
}

TEST(ServeEngine, ARequestThePoolCannotHoldEndsWithAnError) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  const ModelConfig& c = l.model->config();
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.kv_block = 8;
  eo.kv_memory = 2 * (2 * c.n_layers * eo.kv_block *
                      static_cast<int64_t>(row_bytes(eo.kv_type, c.n_kv_heads * c.head_dim)));
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  Refusal why;
  std::string msg;
  auto s = (*engine)->submit(greedy(l, kPrompts[2], 8), &why, &msg);  // 17 tokens: 3 blocks
  ASSERT_TRUE(s) << msg;
  const Outcome o = collect(*s);
  EXPECT_EQ(o.finish.finish_reason, "error");
  EXPECT_NE(o.finish.error.find("KV blocks"), std::string::npos) << o.finish.error;
  // The engine goes on serving requests that fit.
  auto t = (*engine)->submit(greedy(l, "One", 4), &why, &msg);
  ASSERT_TRUE(t) << msg;
  EXPECT_EQ(collect(*t).finish.finish_reason, "length");
}

TEST(ServeEngine, CancelledRequestsFinishAndGiveTheirBlocksBack) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  EngineOptions eo;
  eo.n_ctx = 256;
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  Refusal why;
  std::string msg;
  GenRequest r = greedy(l, kPrompts[0], -1);
  r.ignore_eos = true;  // would run to the context's end
  auto s = (*engine)->submit(std::move(r), &why, &msg);
  ASSERT_TRUE(s) << msg;
  Event e;
  ASSERT_TRUE(s->next(&e, std::chrono::milliseconds(10000)));  // it is running
  s->cancel();
  const Outcome o = collect(*s);
  EXPECT_EQ(o.finish.finish_reason, "cancelled");
  for (int i = 0; i < 100 && (*engine)->stats().kv_blocks_used != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
  EXPECT_EQ((*engine)->stats().finished_cancelled, 1u);
}

TEST(ServeEngine, RefusesBadRequestsAndAFullQueueByKind) {
  NEXUS_REQUIRE_SHARED(kModel);
  const Loaded l = load();
  EngineOptions eo;
  eo.n_ctx = 16;
  eo.max_queue = 0;  // nothing may wait
  auto engine = Engine::create(*l.model, *l.tok, eo);
  ASSERT_TRUE(engine);
  Refusal why;
  std::string msg;
  GenRequest r = greedy(l, "Lily and Ben went to the park to play with a big red ball", 4);
  EXPECT_FALSE((*engine)->submit(r, &why, &msg));
  EXPECT_EQ(why, Refusal::kInvalid);
  EXPECT_NE(msg.find("the context holds 16"), std::string::npos) << msg;
  r.prompt = {1, 100000};
  EXPECT_FALSE((*engine)->submit(r, &why, &msg));
  EXPECT_EQ(why, Refusal::kInvalid);
  EXPECT_NE(msg.find("100000"), std::string::npos) << msg;
  r.prompt = {1, 2};
  r.sampler.top_p = 2.0f;
  EXPECT_FALSE((*engine)->submit(r, &why, &msg));
  EXPECT_EQ(why, Refusal::kInvalid);
  r.sampler.top_p = 1.0f;
  EXPECT_FALSE((*engine)->submit(r, &why, &msg));
  EXPECT_EQ(why, Refusal::kBusy);
  (*engine)->drain(std::chrono::steady_clock::now());
  EXPECT_FALSE((*engine)->submit(r, &why, &msg));
  EXPECT_EQ(why, Refusal::kShutdown);
}

}  // namespace
}  // namespace nexus::serve
