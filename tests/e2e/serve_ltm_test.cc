// The serving engine on a nexus-ltm model (random weights, the demo model's tokenizer): requests
// batched together, their prompts cut into chunks across segment boundaries, give each request's
// output alone, and the engine's stats carry the long-term memory's use per layer (/metrics).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "nexus/context.h"
#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/runtime/generator.h"
#include "nexus/serve/engine.h"
#include "nexus/tokenizer.h"
#include "nexus/train/train_model.h"
#include "test_paths.h"

namespace nexus::serve {
namespace {

TEST(ServeLtm, BatchedRequestsGiveEachOutputAloneAndTheMemoryStats) {
  const std::string demo = std::string(NEXUS_SOURCE_DIR) + "/models/shakespeare-1m.gguf";
  auto tok_file = GgufFile::open(demo);
  ASSERT_TRUE(tok_file);
  ModelConfig c;
  c.arch = Arch::kLtm;
  c.arch_name = "nexus-ltm";
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.rope_dim = 16;
  c.ffn_dim = 64;
  c.n_vocab = 1024;
  c.n_ctx_train = 64;
  c.memory_segment = 8;
  c.memory_kind = MemoryKind::kTitans;
  auto tm = train::TrainModel::create(c, 1, 8, {0.3f, 5, true});
  ASSERT_TRUE(tm) << tm.status().message();
  const std::string path =
      ::testing::TempDir() + "/serve_ltm_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(tm.value()->export_gguf(path, &tok_file.value()));
  auto model = Model::load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(model) << model.status().message();
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok);
  const std::vector<std::string> prompts = {
      "ROMEO: But soft, what light through yonder window breaks?", "JULIET: O Romeo",
      "Good morrow, cousin. Is the day so young?"};
  // Each alone, greedily, as `nexus run` generates.
  std::vector<std::vector<int32_t>> want;
  for (const std::string& p : prompts) {
    ContextOptions co;
    co.n_ctx = 256;
    auto ctx = Context::create(**model, co);
    ASSERT_TRUE(ctx);
    GenerateOptions g;
    g.sampler.temperature = 0;
    g.n_predict = 30;
    auto r = generate(**ctx, **tok, p, g, [](std::string_view) { return true; });
    ASSERT_TRUE(r) << r.status().message();
    want.push_back(r->tokens);
  }
  EngineOptions eo;
  eo.max_seqs = 3;
  eo.n_ctx = 256;
  eo.max_batch_tokens = 32;
  eo.prefill_chunk = 5;  // chunks that cross the 8-token segments
  auto engine = Engine::create(**model, **tok, eo);
  ASSERT_TRUE(engine) << engine.status().message();
  std::vector<std::shared_ptr<Stream>> streams;
  for (const std::string& p : prompts) {
    GenRequest r;
    r.prompt = (*tok)->encode(p, true);
    r.sampler.temperature = 0;
    r.max_tokens = 30;
    Refusal why;
    std::string msg;
    streams.push_back((*engine)->submit(r, &why, &msg));
    ASSERT_TRUE(streams.back()) << msg;
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> got;
    Event e;
    while (streams[i]->next(&e, std::chrono::milliseconds(10000)) && e.kind != Event::Kind::kFinish)
      got.push_back(e.token);
    EXPECT_EQ(got, want[i]) << prompts[i];
  }
  const EngineStats st = (*engine)->stats();
  ASSERT_EQ(st.memory.size(), 2u);
  for (const LayerMemoryStats& l : st.memory) {
    EXPECT_GT(l.norm, 0.0) << "layer " << l.layer;
    EXPECT_GT(l.slots_used, 0.0);
    EXPECT_LE(l.slots_used, 1.0);
  }
}

}  // namespace
}  // namespace nexus::serve
