// Shared pieces of the Trainer tests: a tiny llama config, a token file of random ids, a
// per-test temporary directory, a loop of steps, and a fixture model with a fixed batch.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "test_paths.h"
#include "nexus/train/token_file.h"
#include "nexus/train/train_model.h"
#include "nexus/train/trainer.h"

namespace nexus::train::test {

constexpr int kVocab = 64;

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.arch_name = "llama";
  c.n_vocab = kVocab;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.rope_dim = 8;
  c.ffn_dim = 64;
  c.n_ctx_train = 16;
  c.tied_output = true;
  return c;
}

// A token file of random ids (a mildly predictable stream: id i+1 often follows id i).
inline TokenFile make_tokens(const std::string& path, int n) {
  std::mt19937 rng(7);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i)
    ids[i] = (i > 0 && rng() % 2) ? (ids[i - 1] + 1) % kVocab : rng() % kVocab;
  auto w = TokenFileWriter::create(path, kVocab, 42, -1);
  EXPECT_TRUE(w.is_ok());
  EXPECT_TRUE(w.value()->append(ids).is_ok());
  EXPECT_TRUE(w.value()->finish().is_ok());
  auto f = TokenFile::open(path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return f.value();
}

inline std::string temp_dir(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "nexus_trainer_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Runs `n` steps and returns the losses.
inline std::vector<float> run_steps(Trainer& t, int n) {
  std::vector<float> losses;
  for (int i = 0; i < n; ++i) losses.push_back(t.step().loss);
  return losses;
}

// tests/fixtures/train/NAME.gguf as a TrainModel for batches up to b x t.
inline std::unique_ptr<TrainModel> load_fixture(const std::string& name, int64_t b, int64_t t,
                                                const TrainOptions& o) {
  auto m = TrainModel::from_gguf(nexus::test::fixtures_dir() + "/train/" + name + ".gguf", b, t, o);
  EXPECT_TRUE(m.is_ok()) << (m.is_ok() ? "" : m.status().message());
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// A fixed batch of b x t tokens and targets below v (every fifth target ignored).
inline void make_batch(int64_t v, int64_t b, int64_t t, std::vector<int32_t>* tokens,
                       std::vector<int32_t>* targets) {
  tokens->resize(b * t);
  targets->resize(b * t);
  for (int64_t i = 0; i < b * t; ++i) {
    (*tokens)[i] = static_cast<int32_t>((i * 13 + t) % v);
    (*targets)[i] = i % 5 == 4 ? -1 : static_cast<int32_t>((i * 7 + 2) % v);
  }
}

// Two forward + backward passes through both models, of b x t and then 2 x 7 tokens (the second
// smaller than the arena), gradients accumulating; each pass's losses must be equal.
inline void two_passes(TrainModel& x, TrainModel& y, int64_t b, int64_t t) {
  for (const auto& [bb, tt] : {std::pair<int64_t, int64_t>{b, t}, {2, 7}}) {
    std::vector<int32_t> tokens, targets;
    make_batch(x.config().n_vocab, bb, tt, &tokens, &targets);
    EXPECT_EQ(x.forward(tokens, targets, bb, tt), y.forward(tokens, targets, bb, tt));
    x.backward();
    y.backward();
  }
}

}  // namespace nexus::train::test
