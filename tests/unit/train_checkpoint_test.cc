// Gradient checkpointing (TrainOptions::recompute_blocks): the same loss and bit-identical
// gradients as keeping every block's activations, from a smaller arena (one block's working set,
// which the head's logits share).
#include <gtest/gtest.h>

#include <cstring>

#include "nexus/core/allocator.h"
#include "profile/memory.h"
#include "test_paths.h"
#include "nexus/train/train_model.h"

namespace nexus::train {
namespace {

std::unique_ptr<TrainModel> load(const std::string& name, int64_t b, int64_t t, bool recompute) {
  auto m = TrainModel::from_gguf(test::fixtures_dir() + "/train/" + name + ".gguf", b, t,
                                 TrainOptions{recompute});
  EXPECT_TRUE(m.is_ok()) << (m.is_ok() ? "" : m.status().message());
  return m.is_ok() ? std::move(m).value() : nullptr;
}

class TrainCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCheckpoint, RecomputeGivesBitIdenticalGradients) {
  const int64_t b = 3, t = 10;
  auto plain = load(GetParam(), b, t, false);
  auto ckpt = load(GetParam(), b, t, true);
  ASSERT_TRUE(plain && ckpt);
  const int64_t v = plain->config().n_vocab;
  // Two steps of different shapes (the second smaller than the arena) with the gradients
  // accumulating, and threaded attention in the checkpointed model.
  ckpt->set_threads(2);
  for (const auto& [bb, tt] : {std::pair<int64_t, int64_t>{b, t}, {2, 7}}) {
    std::vector<int32_t> tokens(bb * tt), targets(bb * tt);
    for (int64_t i = 0; i < bb * tt; ++i) {
      tokens[i] = static_cast<int32_t>((i * 13 + tt) % v);
      targets[i] = i % 5 == 4 ? -1 : static_cast<int32_t>((i * 7 + 2) % v);
    }
    const float l0 = plain->forward(tokens, targets, bb, tt);
    const float l1 = ckpt->forward(tokens, targets, bb, tt);
    EXPECT_EQ(l0, l1);
    plain->backward();
    ckpt->backward();
  }
  const size_t n = plain->grads().size();
  ASSERT_EQ(ckpt->grads().size(), n);
  size_t nonzero = 0;
  for (float g : plain->grads()) nonzero += g != 0.0f;
  EXPECT_GT(nonzero, n / 2);
  EXPECT_EQ(std::memcmp(plain->grads().data(), ckpt->grads().data(), n * sizeof(float)), 0);
}

size_t counted_activations() {
  return mem_stats().current[static_cast<int>(MemCategory::kActivations)];
}

TEST_P(TrainCheckpoint, ArenaHoldsOneBlock) {
  size_t before = counted_activations();
  auto plain = load(GetParam(), 4, 16, false);
  const size_t plain_counted = counted_activations() - before;
  before = counted_activations();
  auto ckpt = load(GetParam(), 4, 16, true);
  const size_t ckpt_counted = counted_activations() - before;
  ASSERT_TRUE(plain && ckpt);
  const ActivationBytes& p = plain->activation_bytes();
  const ActivationBytes& c = ckpt->activation_bytes();
  const int64_t layers = plain->config().n_layers;
  ASSERT_GT(layers, 1);
  EXPECT_EQ(p.blocks, c.blocks * layers);
  EXPECT_EQ(p.block_inputs, c.block_inputs);
  // The head's block of logits (here all 64 rows) lives in the block's working set and backward's
  // block gradients, which hold more: the head keeps the rest, without padding.
  const size_t logits = (64 * plain->config().n_vocab * 4 + 63) / 64 * 64;
  EXPECT_LE(logits, c.blocks + c.scratch);
  EXPECT_EQ(p.head - logits, c.head);
  EXPECT_EQ(p.scratch, c.scratch);
  EXPECT_LT(c.total(), p.total());
  // The breakdown is the arena the memory accounting sees.
  EXPECT_EQ(plain_counted, p.total());
  EXPECT_EQ(ckpt_counted, c.total());
  // ... and the profiler's registry names it.
  bool listed = false;
  for (const profile::LiveBuffer& buf : profile::largest_live_buffers(1000))
    listed |= buf.name == "train activations (checkpointed blocks)" && buf.bytes == c.total();
  EXPECT_TRUE(listed);
  std::printf("[%s] activation arena %zu -> %zu bytes (blocks %zu -> %zu)\n", GetParam().c_str(),
              p.total(), c.total(), p.blocks, c.blocks);
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainCheckpoint,
                         ::testing::Values("llama_tied", "llama_untied", "qwen2_untied",
                                           "qwen3_tied", "llama_swa", "gpt2_tied"));

}  // namespace
}  // namespace nexus::train
